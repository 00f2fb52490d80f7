//go:build !linux || race

package gateway

import "syscall"

// nbRead is read(2) on a non-blocking socket, through the syscall package
// (see sys_linux_norace.go for the raw one).
func nbRead(fd int, b []byte) (int, error) { return syscall.Read(fd, b) }

// iovecs is nbWritev's scratch: here the segments joined.
type iovecs = []byte

// nbWritev writes segs in one write(2) of their bytes joined in iov. The
// race detector's build uses it too: syscall.Write's annotations order
// the bytes' write before a reader's read of them, as tests rely on.
func nbWritev(fd int, segs [][]byte, iov *iovecs) (int, error) {
	b := (*iov)[:0]
	for _, s := range segs {
		b = append(b, s...)
	}
	*iov = b
	if len(b) == 0 {
		return 0, nil
	}
	return syscall.Write(fd, b)
}
