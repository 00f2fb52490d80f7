//go:build !linux

package load

import "fmt"

// epollReader is Linux-only; elsewhere the client reads with a goroutine
// per socket.
type epollReader struct{}

func newEpollReader([]*clientConn) (*epollReader, error) {
	return nil, fmt.Errorf("%w on this system", errNoEpoll)
}

func (*epollReader) run(bool, func(*clientConn, []byte, int64) bool) {}

func (*epollReader) close() {}
