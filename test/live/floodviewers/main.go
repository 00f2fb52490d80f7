// Command floodviewers holds SSE viewers of one live stream for the
// flood benchmark (test/live, TestBenchFlood): -n raw TCP connections
// from -sources loopback source addresses (127.0.0.10 and up), spread
// over -gateways the way the edge spreads a stream's viewers. Every
// viewer counts the comment events it reads; one viewer in -every also
// records when it read each seq. On stdin it answers "stat" with one
// JSON line (viewers open, comment events read in all) and "times" with
// the recorded (seq, Unix ns) pairs of the timed viewers, one JSON line.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

var (
	open, events atomic.Int64
	mu           sync.Mutex
	times        [][2]int64 // seq, read at (Unix ns), of the timed viewers
)

func main() {
	gws := flag.String("gateways", "", "the stream's gateways, host:port, comma-separated")
	path := flag.String("path", "", "the stream's /live path")
	n := flag.Int("n", 1000, "viewers")
	first := flag.Int("first", 0, "index of the first viewer (spreads viewers and source addresses across processes)")
	sources := flag.Int("sources", 64, "loopback source addresses")
	every := flag.Int("every", 100, "one viewer in every this many records when it read each seq")
	flag.Parse()
	gateways := strings.Split(*gws, ",")
	var opened sync.WaitGroup
	for i := range *n {
		if i > 0 && i%500 == 0 {
			opened.Wait() // in waves: a loaded server's accept queue overflows otherwise
		}
		opened.Add(1)
		k := *first + i
		go run(k, gateways[k%len(gateways)], *path, byte(10+k%*sources), k%*every == 0, &opened)
	}
	opened.Wait()
	fmt.Println("open")
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		switch sc.Text() {
		case "stat":
			b, _ := json.Marshal(map[string]int64{"open": open.Load(), "events": events.Load()})
			fmt.Println(string(b))
		case "times":
			mu.Lock()
			b, _ := json.Marshal(times)
			times = nil
			mu.Unlock()
			fmt.Println(string(b))
		}
	}
}

// run holds viewer i on host; it does not reconnect (a lost viewer is
// visible in the open count).
func run(i int, host, path string, src byte, timed bool, opened *sync.WaitGroup) {
	d := net.Dialer{Timeout: 30 * time.Second, LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, src)}}
	var c net.Conn
	var err error
	for attempt := 0; attempt < 20; attempt++ {
		if c, err = d.Dial("tcp", host); err == nil {
			break
		}
		time.Sleep(time.Duration(attempt+1) * 100 * time.Millisecond)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "viewer %d: %v\n", i, err)
		opened.Done()
		return
	}
	defer c.Close()
	fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: %s\r\nAccept: text/event-stream\r\n\r\n", path, host)
	br := bufio.NewReaderSize(c, 4096)
	status, err := br.ReadSlice('\n')
	if err != nil || !bytes.Contains(status, []byte(" 200 ")) {
		fmt.Fprintf(os.Stderr, "viewer %d: %q %v\n", i, status, err)
		opened.Done()
		return
	}
	open.Add(1)
	opened.Done()
	defer open.Add(-1)
	comment := false
	for {
		line, err := br.ReadSlice('\n')
		if err != nil && err != bufio.ErrBufferFull {
			return
		}
		if bytes.HasPrefix(line, []byte("event: ")) {
			comment = bytes.HasPrefix(line, []byte("event: comment"))
			continue
		}
		id, ok := bytes.CutPrefix(line, []byte("id: "))
		if !ok || !comment {
			continue
		}
		events.Add(1)
		if timed {
			at := time.Now().UnixNano()
			if seq, err := strconv.ParseInt(string(bytes.TrimSpace(id)), 10, 64); err == nil {
				mu.Lock()
				times = append(times, [2]int64{seq, at})
				mu.Unlock()
			}
		}
	}
}
