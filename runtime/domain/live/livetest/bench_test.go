package livetest_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/concord-chat/concord/runtime/domain/live/gateway"
	"github.com/concord-chat/concord/runtime/domain/live/livetest"
	"github.com/concord-chat/concord/runtime/domain/live/sse"
)

// marks collects, per posted comment text, when each viewer received it.
type marks struct {
	mu   sync.Mutex
	per  map[int][]string
	got  map[string][]time.Time
	wait map[string]chan struct{}
	n    int
}

func newMarks(viewers int) *marks {
	return &marks{got: map[string][]time.Time{}, wait: map[string]chan struct{}{}, n: viewers}
}

func (m *marks) expect(text string) chan struct{} {
	m.mu.Lock()
	defer m.mu.Unlock()
	ch := make(chan struct{})
	m.wait[text] = ch
	return ch
}

func (m *marks) saw(viewer int, text string, at time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.per == nil {
		m.per = map[int][]string{}
	}
	m.per[viewer] = append(m.per[viewer], text)
	m.got[text] = append(m.got[text], at)
	if len(m.got[text]) == m.n {
		if ch := m.wait[text]; ch != nil {
			close(ch)
		}
	}
}

// follow reads one viewer's stream, marking each comment "bench-<i>".
func follow(ctx context.Context, b *testing.B, viewer int, url string, m *marks, ready *sync.WaitGroup) {
	s, err := sse.Dial(ctx, nil, url, nil)
	if err != nil {
		b.Error(err)
		ready.Done()
		return
	}
	ready.Done()
	go func() {
		defer s.Close()
		for {
			ev, err := s.Next()
			if err != nil {
				return
			}
			if ev.Type != "comment" {
				continue
			}
			d := string(ev.Data)
			if i := strings.Index(d, `"text":"bench-`); i >= 0 {
				rest := d[i+len(`"text":"`):]
				m.saw(viewer, rest[:strings.IndexByte(rest, '"')], time.Now())
			}
		}
	}()
}

func percentiles(ds []time.Duration) (p50, p99 time.Duration) {
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	return ds[len(ds)*50/100], ds[len(ds)*99/100]
}

// benchViewers is the number of SSE viewers, split over two gateways.
const benchViewers = 2000

// BenchmarkPostToScreen measures post-to-screen latency: one comment per
// iteration, 200 ms apart (a busy but unsampled stream), from the POST to
// each of benchViewers SSE viewers over two gateways reading it, through
// the whole in-process path (API, filter, memlog, router, relay, gateway
// flush). The "bare" peer is a minimal broadcaster in the same run that
// writes each comment to every connection the moment it is posted: the
// floor for the HTTP, SSE and client work of the same viewers.
func BenchmarkPostToScreen(b *testing.B) {
	b.Run("live", func(b *testing.B) {
		e := livetest.Start(b, livetest.Backends{}, livetest.Options{})
		alice := e.NewUser()
		s := e.CreateStream(alice, "bench")
		gws := []livetest.ExtraGateway{e.StartGateway(gateway.Config{}), e.StartGateway(gateway.Config{})}
		m := newMarks(benchViewers)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		var ready sync.WaitGroup
		for i := range benchViewers {
			ready.Add(1)
			follow(ctx, b, i, gws[i%2].URL+"/v1/streams/"+s.ID+"/live", m, &ready)
		}
		ready.Wait()
		post := func(text string) { e.Post(alice, s.ID, text, 0) }
		defer func() {
			if b.Failed() {
				b.Logf("gateway viewers %d + %d", gws[0].Viewers(), gws[1].Viewers())
			}
		}()
		run(b, m, post)
	})
	b.Run("bare", func(b *testing.B) {
		hub := &bareHub{}
		srvs := []*httptest.Server{httptest.NewServer(hub), httptest.NewServer(hub)}
		for _, s := range srvs {
			defer s.Close()
		}
		m := newMarks(benchViewers)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		var ready sync.WaitGroup
		for i := range benchViewers {
			ready.Add(1)
			follow(ctx, b, i, srvs[i%2].URL, m, &ready)
		}
		ready.Wait()
		run(b, m, hub.broadcast)
	})
}

func run(b *testing.B, m *marks, post func(string)) {
	var lat []time.Duration
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		text := fmt.Sprintf("bench-%d", i)
		ch := m.expect(text)
		start := time.Now()
		post(text)
		select {
		case <-ch:
		case <-time.After(30 * time.Second):
			m.mu.Lock()
			for v := range m.n {
				if got := m.per[v]; len(got) < i+1 {
					b.Logf("viewer %d saw %v", v, got)
				}
			}
			m.mu.Unlock()
			b.Fatalf("comment %d reached %d of %d viewers", i, len(m.got[text]), m.n)
		}
		m.mu.Lock()
		for _, at := range m.got[text] {
			lat = append(lat, at.Sub(start))
		}
		m.mu.Unlock()
		time.Sleep(200 * time.Millisecond)
	}
	b.StopTimer()
	p50, p99 := percentiles(lat)
	b.ReportMetric(float64(p50.Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(p99.Microseconds())/1000, "p99-ms")
	b.ReportMetric(float64(m.n), "viewers")
}

// bareHub is the peer: SSE connections written directly on broadcast.
type bareHub struct {
	mu    sync.Mutex
	conns map[chan []byte]struct{}
}

func (h *bareHub) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ch := make(chan []byte, 64)
	h.mu.Lock()
	if h.conns == nil {
		h.conns = map[chan []byte]struct{}{}
	}
	h.conns[ch] = struct{}{}
	h.mu.Unlock()
	defer func() {
		h.mu.Lock()
		delete(h.conns, ch)
		h.mu.Unlock()
	}()
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(200)
	w.(http.Flusher).Flush()
	for {
		select {
		case f := <-ch:
			w.Write(f)
			w.(http.Flusher).Flush()
		case <-r.Context().Done():
			return
		}
	}
}

func (h *bareHub) broadcast(text string) {
	f := sse.AppendEvent(nil, "comment", "1", []byte(`{"text":"`+text+`"}`))
	h.mu.Lock()
	defer h.mu.Unlock()
	for ch := range h.conns {
		select {
		case ch <- f:
		default:
		}
	}
}

// BenchmarkIdleViewerMemory opens idle SSE viewers on one gateway (raw
// connections that send the request and read only the response head, so
// the client side holds no goroutine) and reports the server's heap and
// stack growth per viewer once they are all subscribed.
func BenchmarkIdleViewerMemory(b *testing.B) {
	const n = 2000
	e := livetest.Start(b, livetest.Backends{}, livetest.Options{})
	alice := e.NewUser()
	s := e.CreateStream(alice, "idle")
	gw := e.StartGateway(gateway.Config{})
	addr := strings.TrimPrefix(gw.URL, "http://")
	for b.Loop() {
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		conns := make([]net.Conn, 0, n)
		for range n {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				b.Fatal(err)
			}
			fmt.Fprintf(c, "GET /v1/streams/%s/live HTTP/1.1\r\nHost: x\r\nAccept: text/event-stream\r\n\r\n", s.ID)
			br := bufio.NewReader(c)
			line, err := br.ReadString('\n')
			if err != nil || !strings.Contains(line, "200") {
				b.Fatalf("open: %q %v", line, err)
			}
			conns = append(conns, c)
		}
		for gw.Viewers() < n {
			time.Sleep(10 * time.Millisecond)
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		grow := (int64(after.HeapInuse+after.StackInuse) - int64(before.HeapInuse+before.StackInuse)) / n
		b.ReportMetric(float64(grow), "bytes/viewer")
		b.ReportMetric(float64(int64(after.StackInuse)-int64(before.StackInuse))/n, "stack-bytes/viewer")
		for _, c := range conns {
			c.Close()
		}
	}
}
