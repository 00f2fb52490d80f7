//go:build integration

package cluster

import (
	"io"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"
)

// readyLB is a TCP load balancer in front of gateway processes, standing
// in for a Kubernetes Service with readiness: each new connection goes to
// the first backend (in list order) whose /readyz answers 200 right now.
// Open connections stay where they are.
type readyLB struct {
	l        net.Listener
	backends []string // HTTP host:port of each gateway
	client   *http.Client

	mu    sync.Mutex
	picks []string // backend of each accepted connection, in order
	conns map[net.Conn]struct{}
}

// newReadyLB listens on a loopback port until the test ends.
func newReadyLB(t *testing.T, backends ...string) *readyLB {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	lb := &readyLB{l: l, backends: backends, client: &http.Client{Timeout: time.Second}, conns: map[net.Conn]struct{}{}}
	go lb.serve()
	t.Cleanup(func() {
		l.Close()
		lb.mu.Lock()
		for c := range lb.conns {
			c.Close()
		}
		lb.mu.Unlock()
	})
	return lb
}

// addr is the balancer's host:port.
func (lb *readyLB) addr() string { return lb.l.Addr().String() }

// picksSince returns the backends of the connections accepted after the
// first n, in order.
func (lb *readyLB) picksSince(n int) []string {
	lb.mu.Lock()
	defer lb.mu.Unlock()
	return append([]string(nil), lb.picks[min(n, len(lb.picks)):]...)
}

func (lb *readyLB) serve() {
	for {
		c, err := lb.l.Accept()
		if err != nil {
			return
		}
		go lb.proxy(c)
	}
}

// pick returns the first ready backend, or "".
func (lb *readyLB) pick() string {
	for _, b := range lb.backends {
		resp, err := lb.client.Get("http://" + b + "/readyz")
		if err != nil {
			continue
		}
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			return b
		}
	}
	return ""
}

// proxy pipes c to a ready backend until either side closes.
func (lb *readyLB) proxy(c net.Conn) {
	b := lb.pick()
	if b == "" {
		c.Close()
		return
	}
	up, err := net.Dial("tcp", b)
	if err != nil {
		c.Close()
		return
	}
	lb.mu.Lock()
	lb.picks = append(lb.picks, b)
	lb.conns[c], lb.conns[up] = struct{}{}, struct{}{}
	lb.mu.Unlock()
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		// Half-close is not needed by WebSocket: end both sides.
		dst.Close()
		src.Close()
		done <- struct{}{}
	}
	go pipe(up, c)
	go pipe(c, up)
	<-done
	<-done
	lb.mu.Lock()
	delete(lb.conns, c)
	delete(lb.conns, up)
	lb.mu.Unlock()
}
