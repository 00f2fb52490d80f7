//go:build integration && storm

package cluster

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"
)

// The storm client process: many gateway sessions behaving as Discord's
// libraries do, in a child process (the test binary re-executed) so the
// sockets do not count against the test process's descriptor limit.
//
// Environment: stormEnvRole=client, stormEnvURL (the load balancer),
// stormEnvTokens (a file, one token per line), stormEnvOffset and
// stormEnvCount (this process's sessions: tokens[(offset+i) % len]),
// stormEnvSources (comma-separated local addresses to dial from).
//
// Stdout lines: "identified <n>" (progress), "ready", "armed <k>",
// "back <k> <n>" (progress), "allback <k>", "report <k> <json>",
// "error <text>". Stdin commands: "storm <k>" arms storm k (every session
// is expected to lose its socket once and come back), "report <k>" prints
// its report; EOF ends the process.
const (
	stormEnvRole    = "CONCORD_STORM_ROLE"
	stormEnvURL     = "CONCORD_STORM_URL"
	stormEnvTokens  = "CONCORD_STORM_TOKENS"
	stormEnvOffset  = "CONCORD_STORM_OFFSET"
	stormEnvCount   = "CONCORD_STORM_COUNT"
	stormEnvSources = "CONCORD_STORM_SOURCES"
)

// stormReport is one client process's account of one storm.
type stormReport struct {
	// BackAt holds, per session that came back, the unix time in ns of
	// its READY or RESUMED.
	BackAt []int64 `json:"back_at"`
	// DropAt holds the unix time in ns each session saw its socket drop.
	DropAt []int64 `json:"drop_at"`
	// Resumed and Identified count how the sessions came back.
	Resumed    int `json:"resumed"`
	Identified int `json:"identified"`
	// InvalidSessions counts op 9 frames received (failed RESUMEs and
	// throttled IDENTIFYs); Identifies counts IDENTIFYs sent.
	InvalidSessions int `json:"invalid_sessions"`
	Identifies      int `json:"identifies"`
	// DialFailures counts reconnect attempts that got no HELLO, and
	// DialErrors the same by the error's last part ("EOF", "bad
	// handshake", "connection refused").
	DialFailures int            `json:"dial_failures"`
	DialErrors   map[string]int `json:"dial_errors"`
	// Closes counts the close codes the sessions saw during the storm.
	Closes map[int]int `json:"closes"`
	// ExtraDrops counts sockets lost again after a session came back.
	ExtraDrops int `json:"extra_drops"`
}

// nonResumableCloses are close codes after which Discord's clients must
// not reconnect: a session closed with one did not come back on its own.
var nonResumableCloses = map[int]bool{4004: true, 4010: true, 4011: true, 4012: true, 4013: true, 4014: true}

// stormClient holds the sessions of one client process.
type stormClient struct {
	url     string
	sources []string
	out     *lineWriter

	mu       sync.Mutex
	storm    int
	back     int
	armedN   int
	report   stormReport
	sessions []*stormSession
	// identified counts sessions whose first READY arrived.
	identified atomic.Int64
}

// stormSession is one gateway session of the client process.
type stormSession struct {
	c     *stormClient
	i     int
	token string
	src   string

	// Guarded by c.mu.
	sessionID string
	seq       int64
	storm     int // storm the session's state below belongs to
	lost      bool
	isBack    bool
}

// lineWriter writes whole lines from many goroutines.
type lineWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lineWriter) println(s string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	_, _ = io.WriteString(l.w, s+"\n")
}

// runStormClient is the client process's main.
func runStormClient(stdin io.Reader, stdout io.Writer) error {
	raw, err := os.ReadFile(os.Getenv(stormEnvTokens))
	if err != nil {
		return fmt.Errorf("storm client: tokens: %w", err)
	}
	tokens := strings.Fields(string(raw))
	offset, err1 := strconv.Atoi(os.Getenv(stormEnvOffset))
	count, err2 := strconv.Atoi(os.Getenv(stormEnvCount))
	if err := errors.Join(err1, err2); err != nil || len(tokens) == 0 {
		return fmt.Errorf("storm client: offset/count/tokens: %v (%d tokens)", err, len(tokens))
	}
	c := &stormClient{url: os.Getenv(stormEnvURL), sources: strings.Split(os.Getenv(stormEnvSources), ","), out: &lineWriter{w: stdout}}
	c.report.Closes = map[int]int{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for i := range count {
		s := &stormSession{c: c, i: i, token: tokens[(offset+i)%len(tokens)], src: c.sources[i%len(c.sources)]}
		c.sessions = append(c.sessions, s)
	}
	// First identifies: at most 64 sessions connecting at once per
	// process, so seeding does not look like a storm.
	sem := make(chan struct{}, 64)
	var wg sync.WaitGroup
	for _, s := range c.sessions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.run(ctx, sem)
		}()
	}
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				n := c.identified.Load()
				c.out.println("identified " + strconv.FormatInt(n, 10))
				if n == int64(count) {
					c.out.println("ready")
					close(done)
					return
				}
			case <-ctx.Done():
				return
			}
		}
	}()
	go c.progress(ctx, done)
	sc := bufio.NewScanner(stdin)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 2 {
			continue
		}
		k, _ := strconv.Atoi(f[1])
		switch f[0] {
		case "storm":
			c.arm(k)
			c.out.println("armed " + f[1])
		case "report":
			c.mu.Lock()
			b, err := json.Marshal(c.report)
			c.mu.Unlock()
			if err != nil {
				return fmt.Errorf("storm client: report: %w", err)
			}
			c.out.println("report " + f[1] + " " + string(b))
		}
	}
	cancel()
	wg.Wait()
	return nil
}

// arm starts storm k: every session's next drop and return count for it.
func (c *stormClient) arm(k int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.storm, c.back, c.armedN = k, 0, len(c.sessions)
	c.report = stormReport{Closes: map[int]int{}}
}

// progress prints "back <k> <n>" every second during a storm and
// "allback <k>" once every session of storm k is back.
func (c *stormClient) progress(ctx context.Context, ready <-chan struct{}) {
	select {
	case <-ready:
	case <-ctx.Done():
		return
	}
	t := time.NewTicker(time.Second)
	defer t.Stop()
	announced := 0
	for {
		select {
		case <-t.C:
		case <-ctx.Done():
			return
		}
		c.mu.Lock()
		k, back, n := c.storm, c.back, c.armedN
		c.mu.Unlock()
		if k == 0 || k == announced {
			continue
		}
		c.out.println(fmt.Sprintf("back %d %d", k, back))
		if back == n {
			c.out.println(fmt.Sprintf("allback %d", k))
			announced = k
		}
	}
}

// frame is the part of a gateway payload the client reads.
type frame struct {
	Op int             `json:"op"`
	S  *int64          `json:"s"`
	T  string          `json:"t"`
	D  json.RawMessage `json:"d"`
}

// run keeps the session connected until ctx ends: connect, RESUME if it
// has a session else IDENTIFY, and on a lost socket start again.
func (s *stormSession) run(ctx context.Context, first chan struct{}) {
	first <- struct{}{}
	var once sync.Once
	release := func() { once.Do(func() { <-first }) }
	for ctx.Err() == nil {
		err := s.connect(ctx, release)
		release()
		if ctx.Err() != nil {
			return
		}
		s.dropped(err)
		// A socket that never got HELLO: back off 1-5 s like a library's
		// reconnect backoff. A socket lost after working: reconnect now.
		var noHello errNoHello
		if errors.As(err, &noHello) {
			msg := noHello.err.Error()
			if i := strings.LastIndex(msg, ": "); i >= 0 {
				msg = msg[i+2:]
			}
			s.c.mu.Lock()
			s.c.report.DialFailures++
			if s.c.report.DialErrors == nil {
				s.c.report.DialErrors = map[string]int{}
			}
			s.c.report.DialErrors[msg]++
			s.c.mu.Unlock()
			jitter(ctx)
		}
	}
}

// errNoHello is a connection attempt that failed before HELLO.
type errNoHello struct{ err error }

func (e errNoHello) Error() string { return "no HELLO: " + e.err.Error() }

// jitter waits 1-5 s (or until ctx ends): what Discord tells a client to
// wait after op 9 before it identifies again.
func jitter(ctx context.Context) {
	t := time.NewTimer(time.Second + rand.N(4*time.Second))
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// connect runs one socket until it fails and returns why.
func (s *stormSession) connect(ctx context.Context, release func()) error {
	d := websocket.Dialer{
		NetDialContext:   (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(s.src)}, Timeout: 30 * time.Second}).DialContext,
		ReadBufferSize:   2048,
		WriteBufferSize:  1024,
		HandshakeTimeout: 60 * time.Second,
	}
	ws, _, err := d.DialContext(ctx, s.c.url, nil)
	if err != nil {
		return errNoHello{err}
	}
	defer ws.Close()
	stop := context.AfterFunc(ctx, func() { ws.Close() })
	defer stop()
	var hello struct {
		Op int `json:"op"`
		D  struct {
			HeartbeatInterval int `json:"heartbeat_interval"`
		} `json:"d"`
	}
	_ = ws.SetReadDeadline(time.Now().Add(60 * time.Second))
	if err := ws.ReadJSON(&hello); err != nil || hello.Op != 10 {
		return errNoHello{fmt.Errorf("hello op %d: %v", hello.Op, err)}
	}
	_ = ws.SetReadDeadline(time.Time{})
	var wmu sync.Mutex
	write := func(v string) error {
		wmu.Lock()
		defer wmu.Unlock()
		_ = ws.SetWriteDeadline(time.Now().Add(10 * time.Second))
		return ws.WriteMessage(websocket.TextMessage, []byte(v))
	}
	hbCtx, hbStop := context.WithCancel(ctx)
	defer hbStop()
	go s.heartbeat(hbCtx, write, time.Duration(hello.D.HeartbeatInterval)*time.Millisecond)

	s.c.mu.Lock()
	sid, seq := s.sessionID, s.seq
	s.c.mu.Unlock()
	if sid != "" {
		err = write(fmt.Sprintf(`{"op":6,"d":{"token":%q,"session_id":%q,"seq":%d}}`, s.token, sid, seq))
	} else {
		err = s.identify(write)
	}
	if err != nil {
		return err
	}
	for {
		_, b, err := ws.ReadMessage()
		if err != nil {
			return err
		}
		var f frame
		if err := json.Unmarshal(b, &f); err != nil {
			return fmt.Errorf("decode frame: %w", err)
		}
		switch f.Op {
		case 0:
			if s.dispatch(f) {
				release()
			}
		case 1:
			if err := s.beat(write); err != nil {
				return err
			}
		case 7: // RECONNECT: close and resume
			return errors.New("op 7 reconnect")
		case 9: // INVALID_SESSION
			s.c.mu.Lock()
			s.sessionID = ""
			s.c.report.InvalidSessions++
			s.c.mu.Unlock()
			jitter(ctx)
			if err := s.identify(write); err != nil {
				return err
			}
		}
	}
}

// identify sends IDENTIFY.
func (s *stormSession) identify(write func(string) error) error {
	s.c.mu.Lock()
	s.c.report.Identifies++
	s.c.mu.Unlock()
	return write(fmt.Sprintf(`{"op":2,"d":{"token":%q,"intents":513,"properties":{"os":"linux","browser":"concord-storm","device":"concord-storm"}}}`, s.token))
}

// beat sends one heartbeat with the last seq.
func (s *stormSession) beat(write func(string) error) error {
	s.c.mu.Lock()
	seq := s.seq
	s.c.mu.Unlock()
	if seq == 0 {
		return write(`{"op":1,"d":null}`)
	}
	return write(`{"op":1,"d":` + strconv.FormatInt(seq, 10) + `}`)
}

// heartbeat beats at the interval, the first after a random fraction of
// it, as Discord asks.
func (s *stormSession) heartbeat(ctx context.Context, write func(string) error, every time.Duration) {
	if every <= 0 {
		return
	}
	t := time.NewTimer(rand.N(every))
	defer t.Stop()
	for {
		select {
		case <-t.C:
		case <-ctx.Done():
			return
		}
		if s.beat(write) != nil {
			return
		}
		t.Reset(every)
	}
}

// dispatch records seq, and READY / RESUMED as the session being back;
// it reports whether the frame was READY or RESUMED.
func (s *stormSession) dispatch(f frame) bool {
	now := time.Now().UnixNano()
	c := s.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if f.S != nil {
		s.seq = *f.S
	}
	switch f.T {
	case "READY":
		var r struct {
			SessionID string `json:"session_id"`
		}
		_ = json.Unmarshal(f.D, &r)
		s.sessionID = r.SessionID
		if s.storm == 0 && c.storm == 0 && !s.isBack {
			s.isBack = true
			c.identified.Add(1)
			return true
		}
		c.markBackLocked(s, now, false)
		return true
	case "RESUMED":
		c.markBackLocked(s, now, true)
		return true
	}
	return false
}

// markBackLocked counts a session of the armed storm as back.
func (c *stormClient) markBackLocked(s *stormSession, now int64, resumed bool) {
	if s.storm != c.storm || !s.lost || s.isBack {
		return
	}
	s.isBack = true
	c.back++
	c.report.BackAt = append(c.report.BackAt, now)
	if resumed {
		c.report.Resumed++
	} else {
		c.report.Identified++
	}
}

// dropped records a lost socket and its close code.
func (s *stormSession) dropped(err error) {
	now := time.Now().UnixNano()
	code := 0
	var ce *websocket.CloseError
	if errors.As(err, &ce) {
		code = ce.Code
	}
	c := s.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.storm == 0 {
		return // still seeding
	}
	if s.storm != c.storm {
		s.storm, s.lost, s.isBack = c.storm, false, false
	}
	if code != 0 {
		c.report.Closes[code]++
	}
	if s.lost {
		if s.isBack {
			c.report.ExtraDrops++
		}
		return
	}
	s.lost = true
	c.report.DropAt = append(c.report.DropAt, now)
}
