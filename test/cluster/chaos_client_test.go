//go:build integration && chaos

package cluster

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/concord-chat/concord/internal/gwtest"
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
	conn       *gwtest.Conn    // the current connection
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
	conn := c.conn
	c.mu.Unlock()
	if conn != nil {
		conn.Close()
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
			urls = append(urls, gwtest.URL(c.gateways[(attempt+i)%len(c.gateways)]))
		}
		var why string
		for _, u := range urls {
			err := c.connect(u)
			if err == nil {
				why = ""
				break
			}
			why = err.Error()
			var de *gwtest.DialError
			if !errors.As(err, &de) {
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

// connect runs one connection (a gwtest.Conn, which heartbeats) until it
// ends; nil means it ended because the client is stopping. A connection
// that could not be made at all is a *gwtest.DialError.
func (c *chaosClient) connect(url string) error {
	c.mu.Lock()
	if c.stopping {
		c.mu.Unlock()
		return nil
	}
	o := gwtest.Options{Name: c.name, Intents: c.intents, Timeout: 5 * time.Second}
	if cur := c.current(); cur != nil {
		o.Resume = &gwtest.Resume{SessionID: cur.id, Seq: cur.lastSeq}
	}
	c.mu.Unlock()
	// The reader hands every frame to record; op 7 and op 9 end the
	// connection, which the reader cannot do itself.
	end := make(chan ending, 1)
	o.OnFrame = func(op int, f gwtest.Frame) {
		if err := c.record(url, op, f); err != nil {
			select {
			case end <- ending{err: err, reconnect: op == 7}:
			default:
			}
		}
	}
	conn, err := gwtest.Dial(url, c.token, o)
	if err != nil {
		return err
	}
	c.mu.Lock()
	if o.Resume == nil {
		c.identifies++
	}
	c.conn = conn
	stopping := c.stopping
	c.mu.Unlock()
	if stopping {
		conn.Close()
		return nil
	}
	select {
	case e := <-end:
		if e.reconnect {
			// Op 7: close with a code that keeps the session, and
			// resume.
			conn.CloseWith(4000)
		} else {
			conn.Close()
		}
		return e.err
	case <-conn.Done():
		c.mu.Lock()
		stopping := c.stopping
		c.mu.Unlock()
		if stopping {
			return nil
		}
		select {
		case e := <-end: // the server closed right after op 7 or 9
			return e.err
		default:
		}
		return fmt.Errorf("connection to %s ended (close code %d)", url, conn.CloseCode())
	}
}

// ending is why a connection must end: an op 7 (reconnect) or op 9.
type ending struct {
	err       error
	reconnect bool
}

// record files one frame of the connection to url under the session it
// belongs to; an op 7 or op 9 returns why the connection must end.
func (c *chaosClient) record(url string, op int, f gwtest.Frame) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	defer c.notify()
	switch op {
	case 0:
		if f.Type == "READY" {
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
			cur.frames = append(cur.frames, f)
			cur.lastSeq = f.Seq
		}
		if f.Type == "RESUMED" {
			c.resumes++
			c.live, c.liveAt = true, time.Now()
		}
	case 7:
		return fmt.Errorf("op 7 from %s", url)
	case 9:
		var resumable bool
		_ = json.Unmarshal(f.D, &resumable)
		c.invalid++
		if !resumable {
			// A new session: the old one's record stays, closed.
			c.sessions = append(c.sessions, &chaosSession{})
			c.resumeURL = ""
		}
		return fmt.Errorf("INVALID_SESSION (resumable %v) from %s", resumable, url)
	}
	return nil
}

// send writes one frame on the current connection; it fails while the
// client is not live.
func (c *chaosClient) send(v any) error {
	c.mu.Lock()
	conn, live := c.conn, c.live
	c.mu.Unlock()
	if !live || conn == nil {
		return fmt.Errorf("%s: not connected", c.name)
	}
	return conn.Send(v)
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
