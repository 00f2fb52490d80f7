//go:build linux && !race

package gateway

import (
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// nbRead and nbWritev (below) are read(2) and writev(2) on a non-blocking socket,
// made without the runtime's syscall bookkeeping (entersyscall and
// exitsyscall, which wake the runtime's sysmon thread when the process is
// idle: a futex wake per heartbeat). They never block, so the goroutine
// keeps its P for the few microseconds they take. Race-detector builds
// use the syscall package instead (sys_other.go), whose annotations order
// a socket's writes before the reads of its bytes, as tests rely on.
func nbRead(fd int, b []byte) (int, error) {
	var p unsafe.Pointer
	if len(b) > 0 {
		p = unsafe.Pointer(&b[0])
	}
	n, _, e := syscall.RawSyscall(syscall.SYS_READ, uintptr(fd), uintptr(p), uintptr(len(b)))
	if e != 0 {
		return -1, e
	}
	return int(n), nil
}

// iovecs is sendmsg's vector and header, reused across writes.
type iovecs struct {
	v   []unix.Iovec
	msg unix.Msghdr
}

// nbWritev writes segs with one sendmsg(2) on a non-blocking socket, raw
// like nbRead: one call for every segment (at most maxSegments are
// passed). iov is scratch for the vector. sendmsg rather than writev: on
// a socket both gather the same way, and writev's way in through the
// file layer (a position lock, permission and notification hooks) cost
// the kernel measurably more per write (docs/benchmarks.md, issue 27,
// session 19).
func nbWritev(fd int, segs [][]byte, iov *iovecs) (int, error) {
	v := iov.v[:0]
	for _, s := range segs {
		if len(s) == 0 {
			continue
		}
		e := unix.Iovec{Base: &s[0]}
		e.SetLen(len(s))
		v = append(v, e)
	}
	iov.v = v
	if len(v) == 0 {
		return 0, nil
	}
	iov.msg = unix.Msghdr{Iov: &v[0]}
	iov.msg.SetIovlen(len(v))
	n, _, e := syscall.RawSyscall(unix.SYS_SENDMSG, uintptr(fd), uintptr(unsafe.Pointer(&iov.msg)), unix.MSG_DONTWAIT|unix.MSG_NOSIGNAL)
	iov.msg = unix.Msghdr{}
	clear(v) // hold no payload past the write
	if e != 0 {
		return -1, e
	}
	return int(n), nil
}

// epollWaitNow is epoll_wait with a zero timeout (epoll_pwait with no
// signal mask, which every Linux architecture has), likewise raw.
func epollWaitNow(epfd int, events []syscall.EpollEvent) (int, error) {
	n, _, e := syscall.RawSyscall6(syscall.SYS_EPOLL_PWAIT, uintptr(epfd), uintptr(unsafe.Pointer(&events[0])), uintptr(len(events)), 0, 0, 0)
	if e != 0 {
		return 0, e
	}
	return int(n), nil
}
