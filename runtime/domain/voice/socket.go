package voice

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// listenUDP opens n sockets on one address with SO_REUSEPORT. The kernel
// hashes each client's flow to one of them, and each has one reader, so a
// speaker's packets are handled in order while the readers run in
// parallel (several readers on one socket would reorder a stream).
func listenUDP(addr string, n, readBuffer int) ([]*net.UDPConn, error) {
	lc := net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		if err := c.Control(func(fd uintptr) {
			serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_REUSEPORT, 1)
		}); err != nil {
			return err
		}
		return serr
	}}
	var conns []*net.UDPConn
	closeAll := func() {
		for _, c := range conns {
			c.Close()
		}
	}
	for i := 0; i < n; i++ {
		pc, err := lc.ListenPacket(context.Background(), "udp4", addr)
		if err != nil {
			closeAll()
			return nil, fmt.Errorf("voice: listen udp %s: %w", addr, err)
		}
		c := pc.(*net.UDPConn)
		// Bigger buffers absorb bursts of many speakers; the kernel caps
		// them at its limits, and failing to raise them is not fatal.
		_ = c.SetReadBuffer(readBuffer)
		_ = c.SetWriteBuffer(4 << 20)
		conns = append(conns, c)
		if i == 0 {
			// The rest bind the port the first one got (addr may say :0).
			host, _, _ := net.SplitHostPort(addr)
			addr = net.JoinHostPort(host, strconv.Itoa(c.LocalAddr().(*net.UDPAddr).Port))
		}
	}
	return conns, nil
}
