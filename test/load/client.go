package load

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/gorilla/websocket"
)

// Environment variables that turn a binary into the client process.
const (
	envRole    = "CONCORD_FANOUT_ROLE"
	envSystem  = "CONCORD_FANOUT_SYSTEM"
	envURL     = "CONCORD_FANOUT_URL"
	envN       = "CONCORD_FANOUT_N"
	envRounds  = "CONCORD_FANOUT_ROUNDS"
	envSources = "CONCORD_FANOUT_SOURCES"
	// envSpin, set to 1 when the client process has CPUs of its own
	// (Options.ClientCPUs), lets it poll without sleeping while a round is
	// open (epollReader.run).
	envSpin = "CONCORD_FANOUT_SPIN"
)

// MaybeRunClient runs the client process and exits if this process was
// started as one by Run; otherwise it returns at once. Call it first in
// main or TestMain.
func MaybeRunClient() {
	if os.Getenv(envRole) != "client" {
		return
	}
	if err := runClient(os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stdout, "error", strings.ReplaceAll(err.Error(), "\n", " "))
		os.Exit(1)
	}
	os.Exit(0)
}

// errNoEpoll says the client cannot read its sockets from one epoll
// loop; it then reads each from a goroutine of its own.
var errNoEpoll = errors.New("no epoll reader")

// clientConn is one client socket and the latencies it saw.
type clientConn struct {
	ws  *websocket.Conn
	lat []int64
	// arrived holds each round's arrival time on a compressed
	// connection, whose payloads are counted rather than parsed: the
	// k-th message after READY is round k (nothing else is sent to an
	// idle session). The latency is computed once the parent has sent
	// the rounds' send times.
	arrived []int64
	// wire is the message bytes received after the handshake.
	wire int64
	// The epoll reader's state (epoll_linux.go): the socket's duplicated
	// descriptor, bytes of an incomplete frame, and a fragmented
	// message's bytes so far.
	fd   int
	rest []byte
	msg  []byte
	// fed: the last read completed a message.
	fed bool
}

// runClient dials N sockets, prints "ready cpu=<ns>", counts one delivery
// per socket and round ("round K cpu=<ns>" when all N arrived; cpu is the
// client process's CPU time so far), and after stdin closes prints
// "stats <count> <p50 ns> <p99 ns> <max ns> <cpu ns> <wire bytes>" followed
// by the latency distribution, "cdf <p0 ns> <p1 ns> ... <p100 ns>" (every
// percentile, nearest rank), for the latency CDF plot. Stdin carries
// "ts <round> <send ns>" lines for the compressed systems' latencies
// before it closes.
func runClient(stdin io.Reader, stdout io.Writer) error {
	if _, err := RaiseFileLimit(); err != nil {
		return err
	}
	system, url := os.Getenv(envSystem), os.Getenv(envURL)
	n, err := strconv.Atoi(os.Getenv(envN))
	if err != nil {
		return fmt.Errorf("load: %s: %w", envN, err)
	}
	rounds, err := strconv.Atoi(os.Getenv(envRounds))
	if err != nil {
		return fmt.Errorf("load: %s: %w", envRounds, err)
	}
	sources := strings.Split(os.Getenv(envSources), ",")
	out := &syncWriter{w: stdout}

	conns := make([]*clientConn, n)
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 1)
	for range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				c, err := dialClient(system, url, sources[i*len(sources)/n])
				if err != nil {
					select {
					case errs <- fmt.Errorf("load: client %d: %w", i, err):
					default:
					}
					return
				}
				conns[i] = c
			}
		}()
	}
	wg.Wait()
	select {
	case err := <-errs:
		return err
	default:
	}

	counts := make([]atomic.Int64, rounds+1)
	for _, c := range conns {
		c.lat = make([]int64, 0, rounds)
	}
	// One epoll loop reads every socket where it can: a goroutine per
	// socket costs the client more per delivery than the server spends
	// writing it, and the latency measured would be the client's.
	var readers sync.WaitGroup
	ep, err := newEpollReader(conns)
	if err != nil && !errors.Is(err, errNoEpoll) {
		return fmt.Errorf("load: client: %w", err)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "load: client: one goroutine per socket:", err)
		for _, c := range conns {
			readers.Add(1)
			go func() {
				defer readers.Done()
				c.readLoop(system, counts, int64(n), out)
			}()
		}
	} else {
		readers.Add(1)
		go func() {
			defer readers.Done()
			ep.run(os.Getenv(envSpin) == "1", func(c *clientConn, b []byte, now int64) bool { return c.record(system, b, now, counts, int64(n), out) })
		}()
	}
	out.println("ready cpu=" + strconv.FormatInt(processCPU(), 10))
	// Wait for the parent to finish (it sends the send times and closes
	// stdin), then report.
	sent := make([]int64, rounds+1)
	sc := bufio.NewScanner(stdin)
	for sc.Scan() {
		var round int
		var ts int64
		if _, err := fmt.Sscanf(sc.Text(), "ts %d %d", &round, &ts); err == nil && round >= 1 && round <= rounds {
			sent[round] = ts
		}
	}
	if ep != nil {
		ep.close()
	} else {
		for _, c := range conns {
			_ = c.ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""), time.Now().Add(time.Second))
			_ = c.ws.Close()
		}
	}
	readers.Wait()
	var all []int64
	var wire int64
	for _, c := range conns {
		for i, at := range c.arrived {
			if sent[i+1] > 0 {
				c.lat = append(c.lat, at-sent[i+1])
			}
		}
		all = append(all, c.lat...)
		wire += c.wire
	}
	slices.Sort(all)
	out.println(fmt.Sprintf("stats %d %d %d %d %d %d", len(all), percentile(all, 50), percentile(all, 99), percentile(all, 100), processCPU(), wire))
	cdf := []byte("cdf")
	for p := 0; p <= 100; p++ {
		cdf = fmt.Appendf(cdf, " %d", percentile(all, p))
	}
	out.println(string(cdf))
	return nil
}

// processCPU is the process's user and system CPU time so far, in
// nanoseconds.
func processCPU() int64 {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// percentile returns the p-th percentile of sorted values (nearest rank).
func percentile(sorted []int64, p int) int64 {
	if len(sorted) == 0 {
		return 0
	}
	i := (len(sorted)*p + 99) / 100
	return sorted[min(max(i-1, 0), len(sorted)-1)]
}

// dialClient opens one socket from source address src and completes the
// system's handshake: IDENTIFY → READY for the gateway, connect and
// subscribe for centrifuge.
func dialClient(system, url, src string) (*clientConn, error) {
	d := websocket.Dialer{
		NetDialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: 30 * time.Second}).DialContext,
		ReadBufferSize: 1024, WriteBufferSize: 1024, HandshakeTimeout: 60 * time.Second,
	}
	ws, _, err := d.Dial(url, nil)
	if err != nil {
		return nil, err
	}
	c := &clientConn{ws: ws}
	_ = ws.SetReadDeadline(time.Now().Add(60 * time.Second))
	switch system {
	case SystemGatewayZlib, SystemGatewayZstd:
		// HELLO and READY, compressed: counted, not parsed.
		if _, _, err := ws.ReadMessage(); err != nil {
			return nil, err
		}
		identify := `{"op":2,"d":{"token":"bench","intents":513,"properties":{"os":"linux","browser":"load","device":"load"}}}`
		if err := ws.WriteMessage(websocket.TextMessage, []byte(identify)); err != nil {
			return nil, err
		}
		if mt, _, err := ws.ReadMessage(); err != nil {
			return nil, err
		} else if mt != websocket.BinaryMessage {
			return nil, fmt.Errorf("want a compressed (binary) READY, got message type %d", mt)
		}
	case SystemGateway:
		if _, _, err := ws.ReadMessage(); err != nil { // HELLO
			return nil, err
		}
		identify := `{"op":2,"d":{"token":"bench","intents":513,"properties":{"os":"linux","browser":"load","device":"load"}}}`
		if err := ws.WriteMessage(websocket.TextMessage, []byte(identify)); err != nil {
			return nil, err
		}
		_, b, err := ws.ReadMessage()
		if err != nil {
			return nil, err
		}
		if !bytes.Contains(b, []byte(`"t":"READY"`)) {
			return nil, fmt.Errorf("want READY, got %.100s", b)
		}
	case SystemCentrifuge:
		if err := ws.WriteMessage(websocket.TextMessage, []byte(`{"id":1,"connect":{}}`+"\n"+`{"id":2,"subscribe":{"channel":"bench"}}`)); err != nil {
			return nil, err
		}
		for got := 0; got < 2; {
			_, b, err := ws.ReadMessage()
			if err != nil {
				return nil, err
			}
			for line := range bytes.SplitSeq(b, []byte("\n")) {
				var r struct {
					ID    int             `json:"id"`
					Error json.RawMessage `json:"error"`
				}
				if json.Unmarshal(line, &r) == nil && r.ID > 0 {
					if r.Error != nil {
						return nil, fmt.Errorf("centrifuge reply %s", line)
					}
					got++
				}
			}
		}
	case SystemWriteLoop:
	default:
		return nil, fmt.Errorf("unknown system %q", system)
	}
	_ = ws.SetReadDeadline(time.Time{})
	return c, nil
}

var tsKey = []byte(`"ts":`)
var roundKey = []byte(`"round":`)

// readLoop records the latency of every payload carrying "ts", reading
// with gorilla on a goroutine of its own: the reader where epoll is not
// available (the Linux client reads every socket from one epoll loop,
// epoll_linux.go).
func (c *clientConn) readLoop(system string, counts []atomic.Int64, n int64, out *syncWriter) {
	for {
		_, b, err := c.ws.ReadMessage()
		if err != nil {
			return
		}
		c.record(system, b, time.Now().UnixNano(), counts, n, out)
	}
}

// record counts one message that arrived at now (Unix ns) and, once a
// round's last delivery arrived, prints "round K cpu=<ns>". It reports
// whether the message's round is still incomplete.
func (c *clientConn) record(system string, b []byte, now int64, counts []atomic.Int64, n int64, out *syncWriter) bool {
	c.wire += int64(len(b))
	incomplete := false
	count := func(round int64) {
		got := counts[round].Add(1)
		if got == n {
			out.println("round " + strconv.FormatInt(round, 10) + " cpu=" + strconv.FormatInt(processCPU(), 10))
		}
		incomplete = got < n
	}
	if compressed(system) {
		round := int64(len(c.arrived) + 1)
		if round < int64(len(counts)) {
			c.arrived = append(c.arrived, now)
			count(round)
		}
		return incomplete
	}
	for len(b) > 0 {
		var line []byte
		line, b, _ = bytes.Cut(b, []byte("\n"))
		ts, ok1 := intAfter(line, tsKey)
		round, ok2 := intAfter(line, roundKey)
		if !ok1 || !ok2 || round < 1 || round >= int64(len(counts)) {
			continue
		}
		c.lat = append(c.lat, now-ts)
		count(round)
	}
	return incomplete
}

// intAfter parses the integer following key in b.
func intAfter(b, key []byte) (int64, bool) {
	i := bytes.Index(b, key)
	if i < 0 {
		return 0, false
	}
	b = b[i+len(key):]
	j := 0
	for j < len(b) && b[j] >= '0' && b[j] <= '9' {
		j++
	}
	v, err := strconv.ParseInt(string(b[:j]), 10, 64)
	return v, err == nil
}

// syncWriter writes whole lines from many goroutines.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) println(line string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	bw := bufio.NewWriter(s.w)
	_, _ = bw.WriteString(line + "\n")
	_ = bw.Flush()
}

// RaiseFileLimit raises RLIMIT_NOFILE as far as the process may and returns
// the soft limit it got: the benchmark holds one descriptor per socket on
// each side. Raising the hard limit needs CAP_SYS_RESOURCE.
func RaiseFileLimit() (uint64, error) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0, fmt.Errorf("load: getrlimit: %w", err)
	}
	const want = 1 << 20
	if lim.Max < want {
		raised := syscall.Rlimit{Cur: want, Max: want}
		if syscall.Setrlimit(syscall.RLIMIT_NOFILE, &raised) == nil {
			return want, nil
		}
	}
	lim.Cur = min(lim.Max, want)
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0, fmt.Errorf("load: setrlimit: %w", err)
	}
	return lim.Cur, nil
}
