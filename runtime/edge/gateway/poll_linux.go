package gateway

import (
	"fmt"
	"os"
	"sync"
	"syscall"
)

// poller tells the node which sockets are readable, so that an idle
// connection needs no goroutine of its own (reader.go). It is one epoll
// instance with edge-triggered registrations; each event carries the
// connection's id, never its file descriptor, so a closed and reused
// descriptor is never confused with the connection that had it.
//
// The poller's goroutine does not block in epoll_wait on a thread of its
// own: the epoll descriptor is itself registered with the Go runtime's
// network poller, which wakes the goroutine when the instance has events.
// The sockets stay registered with the runtime's poller too (net.Conn
// does that), so a heartbeat raises one runtime wake-up, not two threads'.
type poller struct {
	epfd int
	file *os.File // epfd, as the runtime's poller knows it
	rc   syscall.RawConn

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
	if err := syscall.SetNonblock(fd, true); err != nil {
		_ = syscall.Close(fd)
		return nil, fmt.Errorf("gateway: poller: %w", err)
	}
	p := &poller{epfd: fd, file: os.NewFile(uintptr(fd), "gateway-epoll"), conns: make(map[uint64]*conn)}
	if p.rc, err = p.file.SyscallConn(); err != nil {
		_ = p.file.Close()
		return nil, fmt.Errorf("gateway: poller: %w", err)
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
		var n int
		var werr error
		// Collect what is ready without blocking; when nothing is, the
		// runtime parks the goroutine until the epoll descriptor is
		// readable (it has events).
		err := p.rc.Read(func(fd uintptr) bool {
			for {
				n, werr = epollWaitNow(int(fd), events)
				if werr != syscall.EINTR {
					return werr != nil || n > 0
				}
			}
		})
		if err != nil || werr != nil {
			return // closed
		}
		ready = ready[:0]
		p.mu.Lock()
		for _, ev := range events[:n] {
			id := uint64(uint32(ev.Fd)) | uint64(uint32(ev.Pad))<<32
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

// close stops the poller's goroutine and closes the epoll descriptor.
func (p *poller) close() {
	if p != nil {
		_ = p.file.Close()
	}
}
