// Command killviewers holds SSE viewers of one live stream for the
// gateway kill benchmark (test/live, TestBenchGatewayKill): -n raw TCP
// connections from 64 loopback source addresses, spread over -gateways
// the way the edge spreads a stream's viewers over its gateways. A
// viewer whose gateway goes away reconnects to the next gateway of the
// list with Last-Event-ID, as an EventSource does through the edge, after
// the reconnection time the server last set (retry:), else at once. It
// answers, on stdin, "stat SEQ,SEQ,..." with one JSON line: viewers open,
// viewers that resumed, viewers that have every seq listed, seqs shown
// twice or out of order, and the longest time a viewer was away.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

type viewer struct {
	mu      sync.Mutex
	seqs    []int64
	last    int64
	resumed bool
	away    time.Duration
	open    bool
	retry   time.Duration // the last retry: the server sent
}

var (
	dupes atomic.Int64
)

func main() {
	gws := flag.String("gateways", "", "the stream's gateways, host:port, comma-separated")
	path := flag.String("path", "", "the stream's /live path")
	n := flag.Int("n", 1000, "viewers")
	first := flag.Int("first", 0, "index of the first viewer (spreads viewers and source addresses across processes)")
	flag.Parse()
	gateways := strings.Split(*gws, ",")
	vs := make([]*viewer, *n)
	var opened sync.WaitGroup
	for i := range vs {
		vs[i] = &viewer{last: -1}
		if i > 0 && i%500 == 0 {
			opened.Wait() // in waves: a loaded server's accept queue overflows otherwise
		}
		opened.Add(1)
		go run(vs[i], *first+i, gateways, *path, &opened)
	}
	opened.Wait()
	fmt.Println("open")
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		arg, ok := strings.CutPrefix(sc.Text(), "stat ")
		if !ok {
			continue
		}
		var want []int64
		for _, f := range strings.Split(arg, ",") {
			if v, err := strconv.ParseInt(f, 10, 64); err == nil {
				want = append(want, v)
			}
		}
		var st struct {
			Open, Resumed, Have int
			Dupes               int64
			AwayMs              int64
		}
		for _, v := range vs {
			v.mu.Lock()
			if v.open {
				st.Open++
			}
			if v.resumed {
				st.Resumed++
			}
			all := true
			for _, w := range want {
				if _, found := slices.BinarySearch(v.seqs, w); !found {
					all = false
					break
				}
			}
			if all {
				st.Have++
			}
			st.AwayMs = max(st.AwayMs, v.away.Milliseconds())
			v.mu.Unlock()
		}
		st.Dupes = dupes.Load()
		b, _ := json.Marshal(st)
		fmt.Println(string(b))
	}
}

// run keeps viewer i connected, moving to the next gateway when one
// fails.
func run(v *viewer, i int, gateways []string, path string, opened *sync.WaitGroup) {
	src := &net.TCPAddr{IP: net.IPv4(127, 0, 0, byte(10+i%64))}
	g := i % len(gateways)
	var lost time.Time
	first := true
	for attempt := 0; ; attempt++ {
		host := gateways[g]
		d := net.Dialer{Timeout: 10 * time.Second, LocalAddr: src}
		c, err := d.Dial("tcp", host)
		if err == nil {
			v.mu.Lock()
			last := v.last
			v.mu.Unlock()
			req := fmt.Sprintf("GET %s HTTP/1.1\r\nHost: %s\r\nAccept: text/event-stream\r\n", path, host)
			if last >= 0 {
				req += "Last-Event-ID: " + strconv.FormatInt(last, 10) + "\r\n"
			}
			fmt.Fprint(c, req+"\r\n")
			br := bufio.NewReaderSize(c, 4096)
			status, err := br.ReadSlice('\n')
			if err == nil && bytes.Contains(status, []byte(" 200 ")) {
				v.mu.Lock()
				v.open = true
				if !lost.IsZero() {
					v.resumed = true
					v.away = max(v.away, time.Since(lost))
				}
				v.mu.Unlock()
				if first {
					first = false
					opened.Done()
				}
				attempt = 0
				read(v, br)
			}
			c.Close()
		}
		v.mu.Lock()
		if v.open || lost.IsZero() {
			lost = time.Now()
		}
		v.open = false
		v.mu.Unlock()
		if first && attempt > 20 {
			fmt.Fprintf(os.Stderr, "viewer %d: cannot connect to %s: %v\n", i, host, err)
			first = false
			opened.Done()
		}
		g = (g + 1) % len(gateways)
		v.mu.Lock()
		wait := v.retry
		v.mu.Unlock()
		if attempt > 0 || wait == 0 {
			wait = time.Duration(min(attempt+1, 10)) * 50 * time.Millisecond
		}
		time.Sleep(wait)
	}
}

// read follows the event stream until it fails, recording each event's
// id (seq).
func read(v *viewer, br *bufio.Reader) {
	for {
		line, err := br.ReadSlice('\n')
		if err != nil && err != bufio.ErrBufferFull {
			return
		}
		if ms, ok := bytes.CutPrefix(line, []byte("retry: ")); ok {
			if n, err := strconv.Atoi(string(bytes.TrimSpace(ms))); err == nil && n >= 0 {
				v.mu.Lock()
				v.retry = time.Duration(n) * time.Millisecond
				v.mu.Unlock()
			}
			continue
		}
		id, ok := bytes.CutPrefix(line, []byte("id: "))
		if !ok {
			continue
		}
		seq, err := strconv.ParseInt(string(bytes.TrimSpace(id)), 10, 64)
		if err != nil {
			continue
		}
		v.mu.Lock()
		if seq <= v.last {
			dupes.Add(1)
		} else {
			v.last = seq
			v.seqs = append(v.seqs, seq)
		}
		v.mu.Unlock()
	}
}
