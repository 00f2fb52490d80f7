//go:build integration && chaos

package cluster

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// chaosClient is a gateway client that survives its gateway node dying,
// as bot libraries do: when its connection ends it resumes (RESUME with
// its session id and last sequence number) at READY's resume_gateway_url
// or, when that node does not answer, at the other gateway nodes; on
// INVALID_SESSION it identifies again. Every dispatch is recorded under
// the session (READY's session_id) it arrived on, so duplicates and gaps
// are judged per session across its resumes.
type chaosClient struct {
	name     string
	token    string
	gateways []string // gateway nodes' HTTP addresses, the first preferred
	intents  uint64

	mu         sync.Mutex
	sessions   []*chaosSession // in order; the last is the current one
	resumeURL  string          // READY's resume_gateway_url
	live       bool            // READY or RESUMED on the current connection
	liveAt     time.Time       // when the current connection became live
	ws         *websocket.Conn
	writeMu    *sync.Mutex // guards writes to ws
	identifies int
	resumes    int           // RESUMED received
	invalid    int           // INVALID_SESSION received
	drops      []string      // why connections ended
	changed    chan struct{} // closed and replaced at every change
	stopping   bool
	done       chan struct{}
}

// chaosSession is what one gateway session (one READY) received.
type chaosSession struct {
	id      string
	gateway string // node it identified on
	lastSeq int64
	frames  []dispatch
}

func startChaosClient(t *testing.T, name, token string, gateways []string, intents uint64) *chaosClient {
	c := &chaosClient{name: name, token: token, gateways: gateways, intents: intents,
		changed: make(chan struct{}), done: make(chan struct{})}
	go c.run()
	t.Cleanup(c.stop)
	return c
}

func (c *chaosClient) stop() {
	c.mu.Lock()
	c.stopping = true
	ws := c.ws
	c.mu.Unlock()
	if ws != nil {
		ws.Close()
	}
	<-c.done
}

// notify wakes awaiters; c.mu must be held.
func (c *chaosClient) notify() {
	close(c.changed)
	c.changed = make(chan struct{})
}

// current is the session being resumed or run, nil before the first
// READY or after INVALID_SESSION; c.mu must be held.
func (c *chaosClient) current() *chaosSession {
	if len(c.sessions) == 0 {
		return nil
	}
	s := c.sessions[len(c.sessions)-1]
	if s.id == "" {
		return nil
	}
	return s
}

func (c *chaosClient) run() {
	defer close(c.done)
	for attempt := 0; ; attempt++ {
		c.mu.Lock()
		stopping := c.stopping
		resumeURL := c.resumeURL
		c.mu.Unlock()
		if stopping {
			return
		}
		// The resume URL first, then the gateway nodes in turn: a real
		// client behind a load balancer reaches whichever node is up.
		urls := []string{}
		if resumeURL != "" {
			urls = append(urls, resumeURL+"?v=10&encoding=json")
		}
		for i := range c.gateways {
			urls = append(urls, "ws://"+c.gateways[(attempt+i)%len(c.gateways)]+"/gateway?v=10&encoding=json")
		}
		var why string
		for _, u := range urls {
			err := c.connect(u)
			if err == nil {
				why = ""
				break
			}
			why = err.Error()
			if _, dial := err.(dialError); !dial {
				break // the connection was made and ended: start over
			}
		}
		c.mu.Lock()
		c.live = false
		if why != "" && !c.stopping {
			c.drops = append(c.drops, time.Now().Format("15:04:05.000")+" "+why)
		}
		c.notify()
		c.mu.Unlock()
		// Reconnect backoff with jitter, as libraries do (discord.py
		// waits 1–5 s after INVALID_SESSION; shorter here).
		time.Sleep(time.Duration(100+rand.IntN(300)) * time.Millisecond)
	}
}

// dialError is a connection that could not be made at all.
type dialError struct{ error }

// connect runs one connection until it ends; nil means it ended because
// the client is stopping.
func (c *chaosClient) connect(url string) error {
	d := websocket.Dialer{HandshakeTimeout: 5 * time.Second}
	ws, _, err := d.Dial(url, nil)
	if err != nil {
		return dialError{fmt.Errorf("dial %s: %w", url, err)}
	}
	defer ws.Close()
	writeMu := &sync.Mutex{}
	write := func(v any) error {
		writeMu.Lock()
		defer writeMu.Unlock()
		_ = ws.SetWriteDeadline(time.Now().Add(5 * time.Second))
		return ws.WriteJSON(v)
	}
	c.mu.Lock()
	if c.stopping {
		c.mu.Unlock()
		return nil
	}
	c.ws, c.writeMu = ws, writeMu
	cur := c.current()
	var sid string
	var seq int64
	if cur != nil {
		sid, seq = cur.id, cur.lastSeq
	}
	c.mu.Unlock()

	var hello struct {
		Op int `json:"op"`
		D  struct {
			HeartbeatInterval int `json:"heartbeat_interval"`
		} `json:"d"`
	}
	_ = ws.SetReadDeadline(time.Now().Add(10 * time.Second))
	if err := ws.ReadJSON(&hello); err != nil || hello.Op != 10 {
		return fmt.Errorf("HELLO from %s: %+v, %v", url, hello, err)
	}
	_ = ws.SetReadDeadline(time.Time{})
	identify := func() error {
		c.mu.Lock()
		c.identifies++
		c.mu.Unlock()
		return write(map[string]any{"op": 2, "d": map[string]any{
			"token": c.token, "intents": c.intents,
			"properties": map[string]string{"os": "linux", "browser": "concord-chaos", "device": "concord-chaos"}}})
	}
	if sid == "" {
		err = identify()
	} else {
		err = write(map[string]any{"op": 6, "d": map[string]any{"token": c.token, "session_id": sid, "seq": seq}})
	}
	if err != nil {
		return fmt.Errorf("identify/resume on %s: %w", url, err)
	}
	stopBeat := make(chan struct{})
	defer close(stopBeat)
	beat := func() error {
		c.mu.Lock()
		var s any
		if cur := c.current(); cur != nil && cur.lastSeq > 0 {
			s = cur.lastSeq
		}
		c.mu.Unlock()
		return write(map[string]any{"op": 1, "d": s})
	}
	go func() {
		tk := time.NewTicker(time.Duration(hello.D.HeartbeatInterval) * time.Millisecond)
		defer tk.Stop()
		for {
			select {
			case <-stopBeat:
				return
			case <-tk.C:
				if beat() != nil {
					return
				}
			}
		}
	}()
	for {
		var f struct {
			Op int             `json:"op"`
			T  string          `json:"t"`
			S  int64           `json:"s"`
			D  json.RawMessage `json:"d"`
		}
		if err := ws.ReadJSON(&f); err != nil {
			c.mu.Lock()
			stopping := c.stopping
			c.mu.Unlock()
			if stopping {
				return nil
			}
			return fmt.Errorf("connection to %s ended: %w", url, err)
		}
		switch f.Op {
		case 0:
			c.mu.Lock()
			if f.T == "READY" {
				var r struct {
					SessionID        string `json:"session_id"`
					ResumeGatewayURL string `json:"resume_gateway_url"`
				}
				_ = json.Unmarshal(f.D, &r)
				c.sessions = append(c.sessions, &chaosSession{id: r.SessionID, gateway: url})
				c.resumeURL = r.ResumeGatewayURL
				c.live, c.liveAt = true, time.Now()
			}
			if cur := c.current(); cur != nil {
				cur.frames = append(cur.frames, dispatch{Seq: f.S, Type: f.T, At: time.Now(), D: f.D})
				cur.lastSeq = f.S
			}
			if f.T == "RESUMED" {
				c.resumes++
				c.live, c.liveAt = true, time.Now()
			}
			c.notify()
			c.mu.Unlock()
		case 1:
			if err := beat(); err != nil {
				return fmt.Errorf("heartbeat on %s: %w", url, err)
			}
		case 7:
			// Reconnect: close with a code that keeps the session and
			// resume.
			writeMu.Lock()
			_ = ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(4000, "reconnect"), time.Now().Add(time.Second))
			writeMu.Unlock()
			return fmt.Errorf("op 7 from %s", url)
		case 9:
			var resumable bool
			_ = json.Unmarshal(f.D, &resumable)
			c.mu.Lock()
			c.invalid++
			if !resumable {
				// A new session: the old one's record stays, closed.
				c.sessions = append(c.sessions, &chaosSession{})
				c.resumeURL = ""
			}
			c.notify()
			c.mu.Unlock()
			return fmt.Errorf("INVALID_SESSION (resumable %v) from %s", resumable, url)
		}
	}
}

// send writes one frame on the current connection; it fails while the
// client is not live.
func (c *chaosClient) send(v any) error {
	c.mu.Lock()
	ws, mu, live := c.ws, c.writeMu, c.live
	c.mu.Unlock()
	if !live || ws == nil {
		return fmt.Errorf("%s: not connected", c.name)
	}
	mu.Lock()
	defer mu.Unlock()
	_ = ws.SetWriteDeadline(time.Now().Add(5 * time.Second))
	return ws.WriteJSON(v)
}

// await waits until cond holds under the client's lock, failing the test
// when the timeout passes.
func (c *chaosClient) await(t *testing.T, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.After(timeout)
	for {
		c.mu.Lock()
		ok, ch := cond(), c.changed
		c.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-ch:
		case <-deadline:
			c.mu.Lock()
			defer c.mu.Unlock()
			t.Fatalf("%s: no %s within %v (live %v, %d sessions, drops %v)", c.name, what, timeout, c.live, len(c.sessions), c.drops)
		}
	}
}

// currentFrames are the current session's dispatches; c.mu must be held.
func (c *chaosClient) currentFrames() []dispatch {
	if cur := c.current(); cur != nil {
		return cur.frames
	}
	return nil
}

// allFrames returns every dispatch of every session in order; c.mu must be
// held.
func (c *chaosClient) allFrames() []dispatch {
	var out []dispatch
	for _, s := range c.sessions {
		out = append(out, s.frames...)
	}
	return out
}
