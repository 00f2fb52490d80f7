package gateway

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http/httptest"
	"os"
	"os/exec"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/event"
)

// idleSessions is the session count the idle CPU goal is stated for,
// and the most sessions one client process of the benchmark holds.
const idleSessions = 10000

// idleCount is BenchmarkIdleHeartbeat's session count:
// $CONCORD_IDLE_SESSIONS, else idleSessions.
func idleCount() int {
	if n, err := strconv.Atoi(os.Getenv("CONCORD_IDLE_SESSIONS")); err == nil && n > 0 {
		return n
	}
	return idleSessions
}

// idleBackend accepts every token as a distinct bot with no guilds.
type idleBackend struct{}

func (idleBackend) Identify(ctx context.Context, token string, s event.Session) (event.Ready, error) {
	id, _ := strconv.ParseInt(strings.TrimPrefix(token, "tok-"), 10, 64)
	uid := 1_000_000 + id
	user := fmt.Sprintf(`{"id":"%d","username":"u%d","discriminator":"0","global_name":null,"avatar":null,"bot":true}`, uid, uid)
	return event.Ready{UserID: snowflake.ID(uid), Bot: true, User: json.RawMessage(user), ApplicationID: snowflake.ID(uid)}, nil
}
func (idleBackend) Subscribe(context.Context, event.Session) error { return nil }
func (idleBackend) Disconnect(context.Context, event.Session)      {}

// idleClientEnv names the environment variable that turns the benchmark
// binary into the client process of BenchmarkIdleHeartbeat: its value is
// the gateway URL.
const idleClientEnv = "CONCORD_IDLE_CLIENT_URL"

// BenchmarkIdleHeartbeat measures the gateway process's CPU while 10,000
// identified sessions do nothing but heartbeat at Discord's interval
// (41.25 s: 242 heartbeats/s, each read, decoded and ACKed). The clients
// run in a child process (this binary re-executed), so the figure is the
// server's alone: heartbeat handling, liveness deadlines and the runtime.
// Each iteration is one 30 s window, reported as % of one core per
// 10,000 sessions, with the heap (and goroutine stacks) and the resident
// memory the sessions added, per session. CONCORD_IDLE_SESSIONS sets
// another session count; clients are spread over processes of at most
// 10,000 sockets each.
//
//	go test -run '^$' -bench BenchmarkIdleHeartbeat -benchtime=1x ./runtime/edge/gateway/
func BenchmarkIdleHeartbeat(b *testing.B) {
	if url := os.Getenv(idleClientEnv); url != "" {
		runIdleClients(url)
		os.Exit(0)
	}
	// CONCORD_IDLE_GOROUTINE_READER=1 measures the goroutine-per-
	// connection reader instead of the poller, for comparison.
	node, err := NewNode(Config{Node: testNode, GoroutineReader: os.Getenv("CONCORD_IDLE_GOROUTINE_READER") == "1"}, idleBackend{})
	if err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(node)
	defer srv.Close()
	defer node.Close()
	runtime.GC()
	mem0, rss0 := memInUse(), rssBytes()
	// A process may hold 20,000 descriptors here: the clients are spread
	// over processes of at most 10,000 each.
	total := idleCount()
	for first := 0; first < total; first += idleSessions {
		count := min(idleSessions, total-first)
		cmd := exec.Command(os.Args[0], "-test.run=^$", "-test.bench=^BenchmarkIdleHeartbeat$", "-test.benchtime=1x")
		cmd.Env = append(os.Environ(), idleClientEnv+"=ws"+strings.TrimPrefix(srv.URL, "http")+"/gateway",
			fmt.Sprintf("CONCORD_IDLE_CLIENT_RANGE=%d:%d", first, count))
		stdin, err := cmd.StdinPipe()
		if err != nil {
			b.Fatal(err)
		}
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			b.Fatal(err)
		}
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			b.Fatalf("start clients: %v", err)
		}
		defer func() {
			stdin.Close() // the clients exit when their stdin closes
			_ = cmd.Wait()
		}()
		// The child prints "identified N" once every session got READY.
		line, err := bufio.NewReader(stdout).ReadString('\n')
		if err != nil || strings.TrimSpace(line) != fmt.Sprintf("identified %d", count) {
			b.Fatalf("clients: %q, %v", line, err)
		}
	}
	if n := node.Sessions(); n != total {
		b.Fatalf("node holds %d sessions, want %d", n, total)
	}
	runtime.GC()
	heapPer := float64(memInUse()-mem0) / float64(total)
	rssPer := float64(rssBytes()-rss0) / float64(total)
	if path := os.Getenv("CONCORD_IDLE_CPUPROFILE"); path != "" {
		// The measured window only, without the 10,000 identifies.
		f, err := os.Create(path)
		if err != nil {
			b.Fatal(err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			b.Fatal(err)
		}
		defer pprof.StopCPUProfile()
	}
	b.ResetTimer()
	var ru0 syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
	wall0 := time.Now()
	for range b.N {
		time.Sleep(30 * time.Second) // the measured window: the clients drive the work
	}
	var ru1 syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
	wall := time.Since(wall0)
	b.StopTimer()
	cpu := time.Duration(ru1.Utime.Nano() - ru0.Utime.Nano() + ru1.Stime.Nano() - ru0.Stime.Nano())
	b.ReportMetric(100*float64(cpu)/float64(wall)*idleSessions/float64(total), "%core/10k")
	b.ReportMetric(heapPer, "heapB/session")
	b.ReportMetric(rssPer, "rssB/session")
	if n := node.Sessions(); n != total {
		b.Fatalf("node holds %d sessions after the window, want %d (zombie closes?)", n, total)
	}
}

// runIdleClients identifies idleSessions sessions at url, reports it on
// stdout and heartbeats each at its HELLO interval from a random phase
// until stdin closes.
func runIdleClients(url string) {
	first, count := 0, idleSessions
	if r := os.Getenv("CONCORD_IDLE_CLIENT_RANGE"); r != "" {
		_, _ = fmt.Sscanf(r, "%d:%d", &first, &count)
	}
	var wg sync.WaitGroup
	ready := make(chan error, count)
	stop := make(chan struct{})
	sem := make(chan struct{}, 64) // dial in parallel, not all at once
	for i := first; i < first+count; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			ws, interval, err := idleIdentify(url, i)
			<-sem
			ready <- err
			if err != nil {
				return
			}
			defer ws.Close()
			go func() { // read ACKs; a close ends the loop below
				for {
					if _, _, err := ws.NextReader(); err != nil {
						return
					}
				}
			}()
			t := time.NewTimer(time.Duration(rand.Int64N(int64(interval))))
			for {
				select {
				case <-stop:
					return
				case <-t.C:
				}
				if err := ws.WriteMessage(websocket.TextMessage, []byte(`{"op":1,"d":1}`)); err != nil {
					fmt.Fprintln(os.Stderr, "heartbeat:", err)
					return
				}
				t.Reset(interval)
			}
		}()
	}
	for range count {
		if err := <-ready; err != nil {
			fmt.Fprintln(os.Stderr, "identify:", err)
			os.Exit(1)
		}
	}
	fmt.Printf("identified %d\n", count)
	_, _ = bufio.NewReader(os.Stdin).ReadString('\n') // until EOF
	close(stop)
	wg.Wait()
}

// idleIdentify dials and identifies session i, returning the socket and
// HELLO's heartbeat interval once READY arrived.
func idleIdentify(url string, i int) (*websocket.Conn, time.Duration, error) {
	ws, _, err := websocket.DefaultDialer.Dial(url, nil)
	if err != nil {
		return nil, 0, fmt.Errorf("dial: %w", err)
	}
	var hello struct {
		D struct {
			HeartbeatInterval int64 `json:"heartbeat_interval"`
		} `json:"d"`
	}
	if err := ws.ReadJSON(&hello); err != nil {
		ws.Close()
		return nil, 0, fmt.Errorf("hello: %w", err)
	}
	id := fmt.Sprintf(`{"op":2,"d":{"token":"Bot tok-%d","intents":0,"properties":{"os":"linux","browser":"idle","device":"idle"}}}`, i)
	if err := ws.WriteMessage(websocket.TextMessage, []byte(id)); err != nil {
		ws.Close()
		return nil, 0, fmt.Errorf("identify: %w", err)
	}
	for {
		var f struct {
			Op int    `json:"op"`
			T  string `json:"t"`
		}
		if err := ws.ReadJSON(&f); err != nil {
			ws.Close()
			return nil, 0, fmt.Errorf("ready: %w", err)
		}
		if f.T == "READY" {
			return ws, time.Duration(hello.D.HeartbeatInterval) * time.Millisecond, nil
		}
	}
}

// memInUse is the heap and goroutine stacks in use, in bytes.
func memInUse() int64 {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapInuse + m.StackInuse)
}

// rssBytes is the process's resident set size from /proc/self/statm, or 0.
func rssBytes() int64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return 0
	}
	pages, _ := strconv.ParseInt(f[1], 10, 64)
	return pages * int64(os.Getpagesize())
}
