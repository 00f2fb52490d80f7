//go:build slowloris

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/concord-chat/concord/internal/gwtest"
	"github.com/concord-chat/concord/internal/resttest"
)

// TestSlowlorisLatency measures the connection hardening: a node under
// SLOWLORIS_CONNS (default 5000) slowloris connections — each sends a
// request line and then a header byte a second, never finishing, and
// reconnects as soon as the node closes it — still lets a normal client
// post a message and receive its MESSAGE_CREATE within its usual latency.
// The same client is measured without and then with the load, in one run;
// the slowloris connections come from 40 loopback addresses (127.0.0.10–49)
// so that each stays under the per-address cap.
//
//	go test -tags slowloris -run TestSlowlorisLatency -v -timeout 20m ./test/e2e/
func TestSlowlorisLatency(t *testing.T) {
	conns := 5000
	if v := os.Getenv("SLOWLORIS_CONNS"); v != "" {
		conns, _ = strconv.Atoi(v)
	}
	const samples = 300
	addr := freeAddr(t)
	startConcord(t, addr, "serve", "--http="+addr, "--data-dir="+t.TempDir(), "--registry=embedded", "--rate-limits=false")

	var u struct {
		Token string `json:"token"`
	}
	resttest.Call(t, addr, "", "POST", "/auth/register", map[string]any{"username": "normal", "password": "correct-horse-1"}, &u)
	var g struct {
		ID string `json:"id"`
	}
	resttest.Call(t, addr, u.Token, "POST", "/guilds", map[string]any{"name": "slowloris"}, &g)
	var chans []struct {
		ID   string `json:"id"`
		Type int    `json:"type"`
	}
	resttest.Call(t, addr, u.Token, "GET", "/guilds/"+g.ID+"/channels", nil, &chans)
	channel := ""
	for _, c := range chans {
		if c.Type == 0 {
			channel = c.ID
		}
	}
	gw, err := gwtest.Dial(gwtest.URL(addr), u.Token, gwtest.Options{Name: "reader", Intents: 1 | 1<<9 | 1<<15})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(gw.Close)
	if err := gw.Await("READY", 20*time.Second, gwtest.HasType("READY")); err != nil {
		t.Fatal(err)
	}
	// measure posts samples messages one after the other and returns the
	// time from sending each POST to receiving its MESSAGE_CREATE.
	measure := func(phase string) []time.Duration {
		var out []time.Duration
		for i := range samples {
			content := fmt.Sprintf("%s-%d", phase, i)
			start := time.Now()
			var m struct {
				ID string `json:"id"`
			}
			if code, _, err := resttest.Do(context.Background(), nil, "POST", "http://"+addr+"/api/v10/channels/"+channel+"/messages", u.Token, map[string]any{"content": content}, &m); code != 200 {
				t.Fatalf("%s: POST %d = %d %v", phase, i, code, err)
			}
			if err := gw.Await(content, time.Minute, hasContent(content)); err != nil {
				t.Fatalf("%s: %v", phase, err)
			}
			out = append(out, time.Since(start))
		}
		return out
	}
	measure("warmup")
	idle := measure("idle")

	stop := make(chan struct{})
	var open atomic.Int64
	var wg sync.WaitGroup
	for i := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			slowloris(addr, fmt.Sprintf("127.0.0.%d", 10+i%40), &open, stop)
		}()
	}
	deadline := time.Now().Add(2 * time.Minute)
	for open.Load() < int64(conns) {
		if time.Now().After(deadline) {
			t.Fatalf("only %d of %d slowloris connections open after 2 min", open.Load(), conns)
		}
		time.Sleep(100 * time.Millisecond)
	}
	loaded := measure("slowloris")
	held := open.Load()
	close(stop)
	wg.Wait()

	p := func(d []time.Duration, q float64) time.Duration {
		s := slices.Clone(d)
		slices.Sort(s)
		return s[int(q*float64(len(s)-1))]
	}
	ms := func(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d)/1e6) }
	t.Logf("post → MESSAGE_CREATE, %d samples each, %d slowloris connections (%d open at the end)", samples, conns, held)
	t.Logf("idle:      p50 %s  p99 %s", ms(p(idle, .5)), ms(p(idle, .99)))
	t.Logf("slowloris: p50 %s  p99 %s", ms(p(loaded, .5)), ms(p(loaded, .99)))
	t.Logf("ratio slowloris/idle: p50 %.2f  p99 %.2f",
		float64(p(loaded, .5))/float64(p(idle, .5)), float64(p(loaded, .99))/float64(p(idle, .99)))
}

// slowloris keeps one slow connection to addr from src open until stop:
// a request line, then a header byte a second; when the node closes it, it
// reconnects.
func slowloris(addr, src string, open *atomic.Int64, stop <-chan struct{}) {
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: 5 * time.Second}
	for {
		select {
		case <-stop:
			return
		default:
		}
		c, err := d.Dial("tcp", addr)
		if err != nil {
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
			continue
		}
		open.Add(1)
		closed := make(chan struct{})
		go func() { _, _ = io.Copy(io.Discard, c); close(closed) }()
		_, err = io.WriteString(c, "GET /api/v10/gateway HTTP/1.1\r\nHost: x\r\nX-Slow: ")
		tick := time.NewTicker(time.Second)
	loop:
		for err == nil {
			select {
			case <-stop:
				break loop
			case <-closed:
				break loop
			case <-tick.C:
				_, err = c.Write([]byte("a"))
			}
		}
		tick.Stop()
		c.Close()
		open.Add(-1)
	}
}

// hasContent is an Await condition: a MESSAGE_CREATE with content.
func hasContent(content string) func([]gwtest.Frame) bool {
	return func(fs []gwtest.Frame) bool {
		for i := len(fs) - 1; i >= 0; i-- {
			var m struct {
				Content string `json:"content"`
			}
			if fs[i].Type == "MESSAGE_CREATE" && json.Unmarshal(fs[i].D, &m) == nil && m.Content == content {
				return true
			}
		}
		return false
	}
}
