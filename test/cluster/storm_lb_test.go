//go:build integration && storm

package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// The storm load balancer process: a TCP balancer in front of the
// gateway nodes, in its own process (two descriptors per connection).
// New connections go round-robin to the backends whose /readyz answered
// 200 (checked every 100 ms; down after three failures) and whose port
// accepts; a backend that refuses a dial is marked down at once and the
// next one is tried.
// Established connections are spliced until either side closes, then both
// close, so a client whose gateway dies sees its socket drop.
//
// Environment: stormEnvRole=lb, stormEnvBackends (comma-separated HTTP
// addresses of the gateway nodes), stormEnvListen, stormEnvSources (local
// addresses for the upstream dials). Stdout: "listening <addr>", then
// "healthy <addr,addr>" at every change. It runs until stdin closes.
const (
	stormEnvBackends = "CONCORD_STORM_BACKENDS"
	stormEnvListen   = "CONCORD_STORM_LISTEN"
)

// stormLB is the balancer's state.
type stormLB struct {
	backends []string
	sources  []string
	out      *lineWriter

	mu      sync.Mutex
	healthy map[string]bool
	next    atomic.Uint64
	src     atomic.Uint64
	// noBackend counts connections no backend accepted; early those
	// whose backend closed before sending a byte (lastEarly: why).
	noBackend, early atomic.Int64
	lastEarly        atomic.Value
}

// runStormLB is the balancer process's main.
func runStormLB(stdin io.Reader, stdout io.Writer) error {
	lb := &stormLB{
		backends: strings.Split(os.Getenv(stormEnvBackends), ","),
		sources:  strings.Split(os.Getenv(stormEnvSources), ","),
		out:      &lineWriter{w: stdout},
		healthy:  map[string]bool{},
	}
	l, err := net.Listen("tcp", os.Getenv(stormEnvListen))
	if err != nil {
		return fmt.Errorf("storm lb: listen: %w", err)
	}
	defer l.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		_, _ = io.Copy(io.Discard, stdin)
		cancel()
		l.Close()
	}()
	go lb.check(ctx)
	go lb.report(ctx)
	lb.out.println("listening " + l.Addr().String())
	for {
		c, err := l.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) {
				// Out of descriptors: say so, wait for connections to
				// close, accept again.
				lb.out.println("emfile " + err.Error())
				time.Sleep(10 * time.Millisecond)
				continue
			}
			return fmt.Errorf("storm lb: accept: %w", err)
		}
		go lb.serve(c)
	}
}

// check polls every backend's /readyz every 100 ms and prints the healthy
// set when it changes. A backend is up after one 200 and down after three
// failed checks in a row (a gateway busy with a storm may answer /readyz
// late), or at once when its port refuses a dial (serve).
func (lb *stormLB) check(ctx context.Context) {
	client := &http.Client{Timeout: time.Second}
	fails := make([]int, len(lb.backends))
	last := ""
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		var wg sync.WaitGroup
		up := make([]bool, len(lb.backends))
		for i, b := range lb.backends {
			wg.Add(1)
			go func() {
				defer wg.Done()
				resp, err := client.Get("http://" + b + "/readyz")
				if err == nil {
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					up[i] = resp.StatusCode == http.StatusOK
				}
			}()
		}
		wg.Wait()
		lb.mu.Lock()
		var names []string
		for i, b := range lb.backends {
			if up[i] {
				fails[i] = 0
				lb.healthy[b] = true
			} else if fails[i]++; fails[i] >= 3 {
				lb.healthy[b] = false
			}
			if lb.healthy[b] {
				names = append(names, b)
			}
		}
		lb.mu.Unlock()
		if s := strings.Join(names, ","); s != last {
			lb.out.println("healthy " + s)
			last = s
		}
		select {
		case <-t.C:
		case <-ctx.Done():
			return
		}
	}
}

// pick returns the healthy backends, starting at the next in turn; with
// none healthy, every backend (Envoy's panic mode: a dial that refuses is
// cheap, turning clients away is not).
func (lb *stormLB) pick() []string {
	lb.mu.Lock()
	var up []string
	for _, b := range lb.backends {
		if lb.healthy[b] {
			up = append(up, b)
		}
	}
	lb.mu.Unlock()
	if len(up) == 0 {
		up = lb.backends
	}
	k := int(lb.next.Add(1) % uint64(len(up)))
	return append(slices.Clone(up[k:]), up[:k]...)
}

// serve connects c to a healthy backend and splices the two; with no
// backend accepting, c is closed.
func (lb *stormLB) serve(c net.Conn) {
	defer c.Close()
	var up net.Conn
	for _, b := range lb.pick() {
		src := lb.sources[lb.src.Add(1)%uint64(len(lb.sources))]
		// A storm overflows the gateway's accept backlog; the kernel
		// retransmits the SYN after 1 s and 3 s, so a connect may take
		// seconds without the backend being down.
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: 10 * time.Second}
		var err error
		if up, err = d.Dial("tcp", b); err == nil {
			break
		}
		if errors.Is(err, syscall.ECONNREFUSED) {
			lb.mu.Lock()
			lb.healthy[b] = false // nothing listens: down until a check says otherwise
			lb.mu.Unlock()
		}
	}
	if up == nil {
		lb.noBackend.Add(1)
		return
	}
	defer up.Close()
	done := make(chan struct{}, 2)
	go func() { pipe(up, c); done <- struct{}{} }()
	go func() {
		if n, err := pipe(c, up); n == 0 {
			// The backend closed before answering a byte.
			lb.early.Add(1)
			if err != nil {
				lb.lastEarly.Store(err.Error())
			}
		}
		done <- struct{}{}
	}()
	<-done
}

// report prints to stderr, at most every second and only on change, how
// many connections found no backend and how many backends closed before
// answering.
func (lb *stormLB) report(ctx context.Context) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	var last [2]int64
	for {
		select {
		case <-t.C:
		case <-ctx.Done():
			return
		}
		cur := [2]int64{lb.noBackend.Load(), lb.early.Load()}
		if cur != last {
			e, _ := lb.lastEarly.Load().(string)
			fmt.Fprintf(os.Stderr, "storm lb %s: no backend accepted %d, backend closed before answering %d (last error %q)\n",
				os.Getenv(stormEnvListen), cur[0], cur[1], e)
			last = cur
		}
	}
}

// pipe copies src to dst through a small buffer and returns the bytes
// copied and the read error (nil at EOF). Plain reads and writes on
// purpose: io.Copy between two TCP connections splices through a kernel
// pipe, two more descriptors per direction, which at 5,000 connections
// passes the 20,000 descriptor limit.
func pipe(dst, src net.Conn) (int64, error) {
	buf := make([]byte, 4096)
	var n int64
	for {
		k, err := src.Read(buf)
		if k > 0 {
			n += int64(k)
			if _, werr := dst.Write(buf[:k]); werr != nil {
				return n, nil
			}
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				return n, nil
			}
			return n, err
		}
	}
}
