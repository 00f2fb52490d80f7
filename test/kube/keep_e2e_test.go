//go:build e2e

package kube

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/concord-chat/concord/internal/gwtest"
	"github.com/concord-chat/concord/internal/resttest"
)

// keptSession is a gateway session kept alive the way a bot library keeps
// one through rolling restarts: on op 7 (RECONNECT) or a dropped
// connection it reconnects through the Service and RESUMEs with its
// session id and last sequence number, retrying with backoff while the
// connection ends before RESUMED. An INVALID_SESSION (the server refusing
// the RESUME, which would make a library re-identify and lose what was
// sent meanwhile) ends it with an error. It records the id of every
// MESSAGE_CREATE it received over all its connections.
type keptSession struct {
	name, token, id string

	mu      sync.Mutex
	cur     *gwtest.Conn
	seq     int64
	seen    map[string]bool
	resumes int
	err     error
	moved   chan struct{} // closed and replaced when cur or err changes

	stop chan struct{}
	done chan struct{}
}

// keepSession identifies as token and keeps the session until the test
// ends.
func keepSession(t *testing.T, token, name string) *keptSession {
	t.Helper()
	c := dial(t, token, name)
	k := &keptSession{name: name, token: token, id: c.SessionID(), cur: c, seen: map[string]bool{},
		moved: make(chan struct{}), stop: make(chan struct{}), done: make(chan struct{})}
	if k.id == "" {
		t.Fatalf("%s: READY carried no session_id", name)
	}
	go k.run()
	t.Cleanup(k.close)
	return k
}

// absorb records what c received.
func (k *keptSession) absorb(c *gwtest.Conn) {
	frames := c.Frames()
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, f := range frames {
		if f.Type == "MESSAGE_CREATE" {
			var m struct{ ID string }
			if json.Unmarshal(f.D, &m) == nil {
				k.seen[m.ID] = true
			}
		}
	}
	k.seq = max(k.seq, c.Seq())
}

func (k *keptSession) run() {
	defer close(k.done)
	for {
		k.mu.Lock()
		c := k.cur
		k.mu.Unlock()
		// Until the server says RECONNECT or the connection ends (Await
		// returns an error then); close stops it by closing c.
		_ = c.Await("RECONNECT", 24*time.Hour, func([]gwtest.Frame) bool { return c.Ops(7) > 0 })
		select {
		case <-k.stop:
			return
		default:
		}
		k.absorb(c)
		c.Close()
		r, err := k.resume()
		k.mu.Lock()
		close(k.moved)
		k.moved = make(chan struct{})
		if err != nil {
			k.err = err
			k.mu.Unlock()
			return
		}
		k.cur = r
		k.resumes++
		k.mu.Unlock()
	}
}

// resume reconnects through the Service until a RESUME is answered with
// RESUMED, backing off between attempts as a library does.
func (k *keptSession) resume() (*gwtest.Conn, error) {
	deadline := time.Now().Add(2 * time.Minute)
	for attempt := 1; ; attempt++ {
		k.mu.Lock()
		seq := k.seq
		k.mu.Unlock()
		r, err := gwtest.Dial(gwtest.URL(router), k.token, gwtest.Options{Name: k.name, Resume: &gwtest.Resume{SessionID: k.id, Seq: seq}})
		if err == nil {
			if _, _, err = r.Next("RESUMED", 30*time.Second, nil); err == nil {
				return r, nil
			}
			r.Close()
			if r.InvalidSession() {
				return nil, fmt.Errorf("%s: RESUME of session %s at seq %d refused with INVALID_SESSION (attempt %d): %w", k.name, k.id, seq, attempt, err)
			}
			k.absorb(r)
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("%s: session %s not resumed within 2 minutes: %w", k.name, k.id, err)
		}
		select {
		case <-k.stop:
			return nil, errors.New("stopped")
		case <-time.After(200 * time.Millisecond * time.Duration(min(attempt, 10))): // a library's backoff between reconnects
		}
	}
}

// close stops the session and its connection.
func (k *keptSession) close() {
	select {
	case <-k.stop:
		return
	default:
	}
	close(k.stop)
	k.mu.Lock()
	c := k.cur
	k.mu.Unlock()
	c.Close()
	<-k.done
}

// missing waits until the session has received every message in ids
// (or it failed, or timeout passed) and returns those it has not, sorted,
// and how many times it resumed.
func (k *keptSession) missing(ids []string, timeout time.Duration) ([]string, int, error) {
	deadline := time.Now().Add(timeout)
	lacking := func(frames []gwtest.Frame) []string {
		got := map[string]bool{}
		for _, f := range frames {
			if f.Type == "MESSAGE_CREATE" {
				var m struct{ ID string }
				if json.Unmarshal(f.D, &m) == nil {
					got[m.ID] = true
				}
			}
		}
		k.mu.Lock()
		defer k.mu.Unlock()
		var out []string
		for _, id := range ids {
			if !k.seen[id] && !got[id] {
				out = append(out, id)
			}
		}
		return out
	}
	for {
		k.mu.Lock()
		c, err, moved, resumes := k.cur, k.err, k.moved, k.resumes
		k.mu.Unlock()
		if err != nil || time.Now().After(deadline) {
			out := lacking(c.Frames())
			sort.Strings(out)
			return out, resumes, err
		}
		if c.Await("the messages", time.Until(deadline), func(fs []gwtest.Frame) bool { return len(lacking(fs)) == 0 }) == nil {
			return nil, resumes, nil
		}
		// The connection ended (the keeper resumes the session) or the
		// time is up: look again once the keeper has moved on.
		select {
		case <-moved:
		case <-time.After(time.Until(deadline)):
		}
	}
}

// poster posts to a channel once a second (the route's rate limit) until
// stopped, retrying a failed request as discord.js's REST client does
// (429: after retry_after; 5xx or no answer: up to three more tries), and
// records the id of every message the API acknowledged and every message
// it could not post at all.
type poster struct {
	mu     sync.Mutex
	acked  []string
	at     map[string]time.Time // when each acknowledgement arrived
	failed []string
	stop   context.CancelFunc
	done   chan struct{}
}

func startPoster(token, channel, prefix string) *poster {
	ctx, cancel := context.WithCancel(context.Background())
	p := &poster{at: map[string]time.Time{}, stop: cancel, done: make(chan struct{})}
	go func() {
		defer close(p.done)
		for i := 0; ctx.Err() == nil; i++ {
			content := fmt.Sprintf("%s %d", prefix, i)
			id, err := postRetrying(ctx, token, channel, content)
			p.mu.Lock()
			switch {
			case err == nil:
				p.acked = append(p.acked, id)
				p.at[id] = time.Now()
			case ctx.Err() == nil:
				p.failed = append(p.failed, fmt.Sprintf("%s: %v", content, err))
			}
			p.mu.Unlock()
			select {
			case <-ctx.Done():
			case <-time.After(time.Until(time.Now().Truncate(time.Second).Add(time.Second))):
			}
		}
	}()
	return p
}

// ackedAt is when the API acknowledged message id, for failure messages.
func (p *poster) ackedAt(id string) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.at[id].UTC().Format("15:04:05.000")
}

// finish stops the poster and returns the acknowledged ids and the
// failures.
func (p *poster) finish() (acked, failed []string) {
	p.stop()
	<-p.done
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.acked...), append([]string(nil), p.failed...)
}

func postRetrying(ctx context.Context, token, channel, content string) (string, error) {
	var last error
	for tries := 0; tries < 4; {
		rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		var m struct{ ID string }
		var rl struct {
			RetryAfter float64 `json:"retry_after"`
		}
		code, raw, err := resttest.Do(rctx, nil, http.MethodPost, "http://"+router+"/api/v10/channels/"+channel+"/messages", token,
			map[string]string{"content": content}, &m)
		cancel()
		switch {
		case err == nil && code/100 == 2 && m.ID != "":
			return m.ID, nil
		case code == http.StatusTooManyRequests && json.Unmarshal(raw, &rl) == nil:
			last = fmt.Errorf("429 retry_after %v", rl.RetryAfter)
			select {
			case <-ctx.Done():
				return "", ctx.Err()
			case <-time.After(time.Duration(rl.RetryAfter * float64(time.Second))):
			}
			continue
		case err != nil:
			last = err
		case code/100 == 5:
			last = fmt.Errorf("%d %s", code, raw)
		default:
			return "", fmt.Errorf("%d %s", code, raw)
		}
		tries++
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(time.Second * time.Duration(tries)): // discord.js's backoff between retries of a 5xx
		}
	}
	return "", last
}

// history returns the ids of every message in the channel, paging back
// from the newest with ?before=.
func history(t *testing.T, token, channel string) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	before := ""
	for {
		path := "/channels/" + channel + "/messages?limit=100"
		if before != "" {
			path += "&before=" + before
		}
		var page []struct{ ID string }
		resttest.Call(t, router, token, "GET", path, nil, &page)
		for _, m := range page {
			out[m.ID] = true
		}
		if len(page) < 100 {
			return out
		}
		before = page[len(page)-1].ID
	}
}
