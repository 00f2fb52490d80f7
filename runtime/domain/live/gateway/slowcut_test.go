package gateway

import (
	"bytes"
	"net"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestWriteTimeoutCountsAsSlowCut: a viewer whose socket takes less than
// its queued batch within WriteTimeout is cut like one over MaxPending,
// and counted as a slow viewer: the flood benchmark saw viewers lost
// under load that the metric did not show.
func TestWriteTimeoutCountsAsSlowCut(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	client, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close() // never read: the viewer's socket fills
	server, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	client.(*net.TCPConn).SetReadBuffer(4 << 10)
	server.(*net.TCPConn).SetWriteBuffer(4 << 10)

	g := &Gateway{cfg: Config{WriteTimeout: 200 * time.Millisecond, MaxPending: 64 << 20}, m: newMetrics(nil)}
	v := newViewer(0)
	v.g, v.conn = g, server
	v.mu.Lock()
	v.buf = bytes.Repeat([]byte("data: x\n\n"), 8<<20/9) // far more than both socket buffers
	v.queued = time.Now()
	v.mu.Unlock()
	v.kick()
	select {
	case <-v.cut:
	case <-time.After(30 * time.Second):
		t.Fatal("a viewer whose socket took nothing for the write timeout was not cut")
	}
	if n := testutil.ToFloat64(g.m.slowCut); n != 1 {
		t.Fatalf("slow viewers cut = %v, want 1", n)
	}
}
