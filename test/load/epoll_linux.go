//go:build linux

package load

import (
	"encoding/binary"
	"errors"
	"fmt"
	"syscall"
	"time"
)

// epollReader reads every client socket of the client process from one
// goroutine blocked in epoll_wait. With a goroutine per socket the client
// spent as much CPU per delivery as the server (about 8 µs: a scheduler
// wake-up, a read and gorilla's frame reader per message), so on its own
// core it finished reading a round no sooner than the server finished
// writing it, plus its own queueing: the latency measured was partly the
// client's. Here a readable socket costs one read and a frame scan.
type epollReader struct {
	epfd  int
	wake  [2]int // a pipe; a byte written ends run
	conns map[int]*clientConn
	done  chan struct{}
}

// maxClientFrame bounds one frame the client accepts.
const maxClientFrame = 64 << 20

// newEpollReader takes the sockets of conns over from gorilla, whose
// handshakes are done and whose servers send nothing before the first
// round: each socket's descriptor is duplicated and the Go connection
// closed, which takes it out of the runtime's poller while the socket
// stays open on the duplicate.
func newEpollReader(conns []*clientConn) (*epollReader, error) {
	epfd, err := syscall.EpollCreate1(syscall.EPOLL_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("%w: epoll_create1: %w", errNoEpoll, err)
	}
	r := &epollReader{epfd: epfd, conns: make(map[int]*clientConn, len(conns)), done: make(chan struct{})}
	if err := syscall.Pipe2(r.wake[:], syscall.O_CLOEXEC|syscall.O_NONBLOCK); err != nil {
		syscall.Close(epfd)
		return nil, fmt.Errorf("%w: pipe2: %w", errNoEpoll, err)
	}
	if err := r.add(r.wake[0]); err != nil {
		r.closeFDs()
		return nil, fmt.Errorf("%w: %w", errNoEpoll, err)
	}
	// From here a failure leaves sockets taken from gorilla: the client
	// fails rather than fall back.
	for _, c := range conns {
		fd, err := dupSocket(c)
		if err != nil {
			r.closeFDs()
			return nil, err
		}
		c.fd = fd
		r.conns[fd] = c
		_ = c.ws.Close() // the Go side only; the socket lives on in fd
		if err := r.add(fd); err != nil {
			r.closeFDs()
			return nil, err
		}
	}
	return r, nil
}

// dupSocket duplicates c's socket descriptor, close-on-exec. The copy
// shares the file's flags, so it is non-blocking as Go made it.
func dupSocket(c *clientConn) (int, error) {
	sc, ok := c.ws.NetConn().(syscall.Conn)
	if !ok {
		return -1, errors.New("client socket has no descriptor")
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return -1, err
	}
	fd := -1
	var derr error
	if err := raw.Control(func(s uintptr) { fd, derr = syscall.Dup(int(s)) }); err != nil {
		return -1, err
	}
	if derr != nil {
		return -1, fmt.Errorf("dup: %w", derr)
	}
	syscall.CloseOnExec(fd)
	return fd, nil
}

func (r *epollReader) add(fd int) error {
	ev := syscall.EpollEvent{Events: syscall.EPOLLIN | syscall.EPOLLRDHUP, Fd: int32(fd)}
	if err := syscall.EpollCtl(r.epfd, syscall.EPOLL_CTL_ADD, fd, &ev); err != nil {
		return fmt.Errorf("epoll_ctl add %d: %w", fd, err)
	}
	return nil
}

// run reads until close: each readable socket once per wake-up (the
// registration is level-triggered, so what one read leaves is reported
// again), every complete message handed to record with its arrival time.
//
// With spin, while a round is incomplete (record says so), it polls
// without sleeping, yielding its CPU between polls. On loopback the writer
// of a socket pays for waking its reader: a client asleep in epoll_wait
// whenever it has caught up would add a wake-up (an inter-processor
// interrupt, costly in a virtual machine) to the server's system time for
// nearly every delivery, which a remote client never costs a server. Only
// a client with CPUs of its own spins; one sharing the server's would take
// them from it.
func (r *epollReader) run(spin bool, record func(c *clientConn, msg []byte, now int64) (roundOpen bool)) {
	defer close(r.done)
	events := make([]syscall.EpollEvent, 256)
	buf := make([]byte, 64<<10)
	timeout := -1
	for {
		k, err := syscall.EpollWait(r.epfd, events, timeout)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return
		}
		if k == 0 {
			_, _, _ = syscall.RawSyscall(syscall.SYS_SCHED_YIELD, 0, 0, 0)
			continue
		}
		for _, ev := range events[:k] {
			fd := int(ev.Fd)
			if fd == r.wake[0] {
				return
			}
			c := r.conns[fd]
			if c == nil {
				continue
			}
			n, err := syscall.Read(fd, buf)
			if err == syscall.EAGAIN || err == syscall.EINTR {
				continue
			}
			if n <= 0 {
				_ = syscall.EpollCtl(r.epfd, syscall.EPOLL_CTL_DEL, fd, nil)
				continue
			}
			open, err := c.feed(buf[:n], time.Now().UnixNano(), record)
			if err != nil {
				_ = syscall.EpollCtl(r.epfd, syscall.EPOLL_CTL_DEL, fd, nil)
			}
			if open && spin {
				timeout = 0
			} else if c.fed {
				timeout = -1
			}
		}
	}
}

// feed parses the WebSocket frames in p (after what an earlier read left
// incomplete) and hands each complete message to record.
// It reports whether the last message's round is still incomplete.
func (c *clientConn) feed(p []byte, now int64, record func(*clientConn, []byte, int64) bool) (roundOpen bool, err error) {
	c.fed = false
	data := p
	if len(c.rest) > 0 {
		data = append(c.rest, p...)
	}
	for {
		if len(data) < 2 {
			break
		}
		op, fin := data[0]&0x0f, data[0]&0x80 != 0
		if data[1]&0x80 != 0 {
			return roundOpen, errors.New("masked frame from the server")
		}
		size, hdr := uint64(data[1]&0x7f), 2
		switch size {
		case 126:
			if len(data) < 4 {
				break
			}
			size, hdr = uint64(binary.BigEndian.Uint16(data[2:])), 4
		case 127:
			if len(data) < 10 {
				break
			}
			size, hdr = binary.BigEndian.Uint64(data[2:]), 10
		}
		if size >= 126 && hdr == 2 {
			break // the extended length is not all here yet
		}
		if size > maxClientFrame {
			return roundOpen, fmt.Errorf("frame of %d bytes", size)
		}
		if uint64(len(data)-hdr) < size {
			break
		}
		payload := data[hdr : hdr+int(size)]
		data = data[hdr+int(size):]
		switch op {
		case 0x0, 0x1, 0x2: // continuation, text, binary
			if !fin || len(c.msg) > 0 {
				c.msg = append(c.msg, payload...)
				if !fin {
					continue
				}
				payload = c.msg
			}
			roundOpen, c.fed = record(c, payload, now), true
			c.msg = c.msg[:0]
		case 0x8:
			return roundOpen, errors.New("closed by the server")
		}
	}
	c.rest = append(c.rest[:0:0], data...)
	return roundOpen, nil
}

// close sends each socket a close frame (1000, masked as a client's must
// be, with a zero key) and closes it, then ends run and waits for it.
func (r *epollReader) close() {
	frame := []byte{0x88, 0x82, 0, 0, 0, 0, 0x03, 0xe8}
	for fd := range r.conns {
		_, _ = syscall.Write(fd, frame)
		_ = syscall.Close(fd)
	}
	_, _ = syscall.Write(r.wake[1], []byte{0})
	<-r.done
	r.closeFDs()
}

// closeFDs closes the epoll and pipe descriptors.
func (r *epollReader) closeFDs() {
	_ = syscall.Close(r.epfd)
	_ = syscall.Close(r.wake[0])
	_ = syscall.Close(r.wake[1])
}
