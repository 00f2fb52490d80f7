package gateway

import (
	"fmt"
	"sync"
	"syscall"
)

// poller tells the node which sockets are readable, so that an idle
// connection needs no goroutine of its own (reader.go). It is one epoll
// instance with edge-triggered registrations and one goroutine blocked in
// epoll_wait; each event carries the connection's id, never its file
// descriptor, so a closed and reused descriptor is never confused with
// the connection that had it.
type poller struct {
	epfd int
	// wake is a pipe registered with id 0: a byte written to wake[1]
	// stops run (closing an epoll descriptor does not wake epoll_wait).
	wake [2]int

	mu    sync.Mutex
	next  uint64
	conns map[uint64]*conn
}

// newPoller starts a poller; its goroutine runs until close.
func newPoller() (*poller, error) {
	fd, err := syscall.EpollCreate1(syscall.EPOLL_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("gateway: epoll_create1: %w", err)
	}
	p := &poller{epfd: fd, conns: make(map[uint64]*conn)}
	if err := syscall.Pipe2(p.wake[:], syscall.O_CLOEXEC|syscall.O_NONBLOCK); err != nil {
		_ = syscall.Close(fd)
		return nil, fmt.Errorf("gateway: poller pipe: %w", err)
	}
	ev := syscall.EpollEvent{Events: syscall.EPOLLIN}
	if err := syscall.EpollCtl(fd, syscall.EPOLL_CTL_ADD, p.wake[0], &ev); err != nil {
		p.closeFDs()
		return nil, fmt.Errorf("gateway: poller pipe: %w", err)
	}
	go p.run()
	return p, nil
}

// add registers c's socket; from then on readable is called when it has
// bytes to read. It reports false if the socket cannot be registered.
func (p *poller) add(c *conn) bool {
	if p == nil {
		return false
	}
	p.mu.Lock()
	p.next++
	id := p.next
	p.conns[id] = c
	c.pollID = id
	p.mu.Unlock()
	var cerr error
	err := c.raw.Control(func(fd uintptr) {
		ev := syscall.EpollEvent{Events: syscall.EPOLLIN | syscall.EPOLLRDHUP | syscall.EPOLLET&0xffffffff}
		// The event's 8 data bytes carry the id (Fd and Pad).
		ev.Fd, ev.Pad = int32(uint32(id)), int32(uint32(id>>32))
		cerr = syscall.EpollCtl(p.epfd, syscall.EPOLL_CTL_ADD, int(fd), &ev)
	})
	if err == nil {
		err = cerr
	}
	if err != nil {
		p.remove(c)
		return false
	}
	return true
}

// remove forgets c; the kernel drops the registration when the socket
// closes.
func (p *poller) remove(c *conn) {
	if p == nil || c.pollID == 0 {
		return
	}
	p.mu.Lock()
	delete(p.conns, c.pollID)
	p.mu.Unlock()
}

// run waits for readiness and hands it to the connections. Each readable
// connection is served in turn on this goroutine; a connection whose
// payload may wait moves to a goroutine of its own (conn.readRun).
func (p *poller) run() {
	events := make([]syscall.EpollEvent, 256)
	ready := make([]*conn, 0, len(events))
	for {
		n, err := syscall.EpollWait(p.epfd, events, -1)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return
		}
		ready = ready[:0]
		p.mu.Lock()
		for _, ev := range events[:n] {
			id := uint64(uint32(ev.Fd)) | uint64(uint32(ev.Pad))<<32
			if id == 0 {
				p.mu.Unlock()
				p.closeFDs()
				return
			}
			if c := p.conns[id]; c != nil {
				ready = append(ready, c)
			}
		}
		p.mu.Unlock()
		for i, c := range ready {
			c.readable()
			ready[i] = nil
		}
	}
}

// close stops the poller's goroutine, which then closes its descriptors.
func (p *poller) close() {
	if p != nil {
		_, _ = syscall.Write(p.wake[1], []byte{0})
	}
}

func (p *poller) closeFDs() {
	_ = syscall.Close(p.epfd)
	_ = syscall.Close(p.wake[0])
	_ = syscall.Close(p.wake[1])
}
