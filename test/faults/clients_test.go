//go:build faults

package faults

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/concord-chat/concord/internal/gwtest"
	"github.com/concord-chat/concord/internal/resttest"
	"github.com/concord-chat/concord/runtime/domain/live/sse"
	"github.com/concord-chat/concord/test/faults/history"
)

// api is the cluster's one public address, as a client sees it.
type api struct {
	base   string // http://host:port
	client *http.Client
}

func newAPI(front string) *api {
	return &api{base: "http://" + front, client: &http.Client{Timeout: 10 * time.Second}}
}

// must calls the REST API and fails the test unless it answers 2xx;
// setup retries a 5xx a few times (a cluster that just started may still
// be moving guilds).
func (a *api) must(t *testing.T, token, method, path string, body, out any) {
	t.Helper()
	var status int
	var raw []byte
	var err error
	for attempt := range 10 {
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		url := a.base + "/api/v10" + path
		if strings.HasPrefix(path, "/v1/") { // the live comments' API
			url = a.base + path
		}
		status, raw, err = resttest.Do(ctx, a.client, method, url, token, body, out)
		cancel()
		if err == nil && status/100 == 2 {
			return
		}
		if err == nil && status < 500 && status != 429 {
			break
		}
		time.Sleep(time.Duration(attempt+1) * 300 * time.Millisecond) // setup retry backoff
	}
	t.Fatalf("%s %s: %d %s %v", method, path, status, raw, err)
}

type user struct{ token, id string }

func (a *api) newUser(t *testing.T, prefix string) user {
	t.Helper()
	var reg struct {
		Token string `json:"token"`
	}
	a.must(t, "", "POST", "/auth/register", map[string]any{"username": fmt.Sprintf("%s_%x", prefix, rand.Uint32()), "password": "correct-horse-1"}, &reg)
	var me struct {
		ID string `json:"id"`
	}
	a.must(t, reg.Token, "GET", "/users/@me", nil, &me)
	return user{reg.Token, me.ID}
}

// wireMsg is a message as the REST API returns it.
type wireMsg struct {
	ID       string `json:"id"`
	Content  string `json:"content"`
	Mentions []struct {
		ID string `json:"id"`
	} `json:"mentions"`
}

func (m wireMsg) msg() history.Msg {
	h := history.Msg{ID: m.ID}
	if f := strings.Fields(m.Content); len(f) > 0 && strings.HasPrefix(f[0], "n:") {
		h.Nonce = strings.TrimPrefix(f[0], "n:")
	}
	for _, u := range m.Mentions {
		h.Mentions = append(h.Mentions, u.ID)
	}
	return h
}

// writer sends messages to channels in a loop, recording each send.
func (a *api) writer(ctx context.Context, rec *history.Recorder, client int, u user, chans []string, mention string, mentionIn string, pace time.Duration, stop *atomic.Bool, wg *sync.WaitGroup) {
	defer wg.Done()
	rng := rand.New(rand.NewPCG(uint64(client), 28))
	for i := 0; !stop.Load() && ctx.Err() == nil; i++ {
		ch := chans[rng.IntN(len(chans))]
		nonce := fmt.Sprintf("w%d-%d", client, i)
		content := "n:" + nonce
		if ch == mentionIn && i%3 == 0 {
			content += " <@" + mention + ">"
		}
		idx := rec.Begin(history.Op{Client: client, Kind: history.Send, Channel: ch, Nonce: nonce})
		var m wireMsg
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		status, raw, err := resttest.Do(rctx, a.client, "POST", a.base+"/api/v10/channels/"+ch+"/messages", u.token,
			map[string]any{"content": content}, &m)
		cancel()
		rec.End(idx, func(op *history.Op) {
			switch {
			case err == nil && status/100 == 2 && m.ID != "":
				op.OK, op.ID = true, m.ID
			case err != nil:
				op.Err = err.Error()
			default:
				op.Err = fmt.Sprintf("%d %s", status, truncate(string(raw), 120))
				// A 4xx other than a timeout or rate limit was refused
				// before anything was written.
				op.Definite = status/100 == 4 && status != 408
			}
		})
		// pace between sends (a chatty user, not a flood, keeps the
		// history checkable and the shared machine usable); a failing
		// client backs off a little more, as bots do.
		pause := pace
		if err != nil || status/100 != 2 {
			pause += 100 * time.Millisecond
		}
		time.Sleep(pause)
	}
}

// reader reads the newest messages of channels in a loop, recording each
// read.
func (a *api) reader(ctx context.Context, rec *history.Recorder, client int, u user, chans []string, stop *atomic.Bool, wg *sync.WaitGroup) {
	defer wg.Done()
	for i := 0; !stop.Load() && ctx.Err() == nil; i++ {
		ch := chans[i%len(chans)]
		const limit = 50
		idx := rec.Begin(history.Op{Client: client, Kind: history.Read, Channel: ch, Limit: limit})
		var page []wireMsg
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		status, raw, err := resttest.Do(rctx, a.client, "GET", a.base+"/api/v10/channels/"+ch+"/messages?limit="+strconv.Itoa(limit), u.token, nil, &page)
		cancel()
		rec.End(idx, func(op *history.Op) {
			if err != nil || status != 200 {
				op.Err = fmt.Sprintf("%d %s %v", status, truncate(string(raw), 120), err)
				return
			}
			op.OK = true
			for j := len(page) - 1; j >= 0; j-- { // newest first on the wire
				op.Msgs = append(op.Msgs, page[j].msg())
			}
		})
		time.Sleep(150 * time.Millisecond) // a client scrolling now and then, paced like the writers
	}
}

// fullHistory pages through channel ch's whole history (before=, 100 at a
// time), oldest first.
func (a *api) fullHistory(ctx context.Context, token, ch string) ([]history.Msg, error) {
	var out []history.Msg
	before := ""
	for {
		q := "/api/v10/channels/" + ch + "/messages?limit=100"
		if before != "" {
			q += "&before=" + before
		}
		var page []wireMsg
		status, raw, err := resttest.Do(ctx, a.client, "GET", a.base+q, token, nil, &page)
		if err != nil || status != 200 {
			return nil, fmt.Errorf("GET %s: %d %s %v", q, status, raw, err)
		}
		for _, m := range page {
			out = append(out, m.msg())
		}
		if len(page) < 100 {
			break
		}
		before = page[len(page)-1].ID
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out, nil
}

// commenter posts live comments in a loop, recording each.
func (a *api) commenter(ctx context.Context, rec *history.Recorder, client int, u user, stream string, stop *atomic.Bool, wg *sync.WaitGroup) {
	defer wg.Done()
	for i := 0; !stop.Load() && ctx.Err() == nil; i++ {
		nonce := fmt.Sprintf("k%d-%d", client, i)
		idx := rec.Begin(history.Op{Client: client, Kind: history.Comment, Channel: stream, Nonce: nonce})
		var c struct {
			ID string `json:"id"`
		}
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		status, raw, err := resttest.Do(rctx, a.client, "POST", a.base+"/v1/streams/"+stream+"/comments", u.token,
			map[string]any{"text": nonce, "video_ts_ms": i}, &c)
		cancel()
		rec.End(idx, func(op *history.Op) {
			if err == nil && status == 201 && c.ID != "" {
				op.OK, op.ID = true, c.ID
				return
			}
			op.Err = fmt.Sprintf("%d %s %v", status, truncate(string(raw), 120), err)
			op.Definite = err == nil && status/100 == 4 && status != 408
		})
		time.Sleep(2100 * time.Millisecond) // the stream's default slow mode: one comment per 2 s per viewer
	}
}

// archive pages through a stream's stored comments (before=seq).
func (a *api) archive(ctx context.Context, stream string) ([]string, error) {
	var ids []string
	before := ""
	for {
		q := "/v1/streams/" + stream + "/comments?limit=100"
		if before != "" {
			q += "&before=" + before
		}
		var page []struct {
			ID  string `json:"id"`
			Seq int64  `json:"seq"`
		}
		status, raw, err := resttest.Do(ctx, a.client, "GET", a.base+q, "", nil, &page)
		if err != nil || status != 200 {
			return nil, fmt.Errorf("GET %s: %d %s %v", q, status, raw, err)
		}
		for _, c := range page {
			ids = append(ids, c.ID)
		}
		if len(page) < 100 {
			return ids, nil
		}
		before = strconv.FormatInt(page[len(page)-1].Seq, 10)
	}
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}

// session is a gateway client that survives its connection's loss as bot
// libraries do: it resumes through the balancer, and identifies again on
// INVALID_SESSION. Every MESSAGE_CREATE it receives is recorded.
type session struct {
	name, front string
	u           user
	rec         *history.Recorder

	mu         sync.Mutex
	conn       *gwtest.Conn
	sessionID  string
	seq        int64
	resumed    []time.Time // RESUMED received
	identified []time.Time // READY received after the first
	lost       []time.Time // the connection ended (not by stop)
	back       []time.Time // READY or RESUMED after a loss
	stopped    bool
	done       chan struct{}
}

func startSession(rec *history.Recorder, name, front string, u user) *session {
	s := &session{name: name, front: front, u: u, rec: rec, done: make(chan struct{})}
	go s.run()
	return s
}

func (s *session) onFrame(op int, f gwtest.Frame) {
	if op != 0 {
		return
	}
	s.mu.Lock()
	if f.Seq > s.seq {
		s.seq = f.Seq
	}
	sid := s.sessionID
	switch f.Type {
	case "READY":
		var d struct {
			SessionID string `json:"session_id"`
		}
		_ = json.Unmarshal(f.D, &d)
		if s.sessionID != "" {
			s.identified = append(s.identified, f.At)
		}
		if len(s.lost) > len(s.back) {
			s.back = append(s.back, f.At)
		}
		s.sessionID = d.SessionID
	case "RESUMED":
		s.resumed = append(s.resumed, f.At)
		if len(s.lost) > len(s.back) {
			s.back = append(s.back, f.At)
		}
	}
	s.mu.Unlock()
	if f.Type == "MESSAGE_CREATE" {
		var d struct {
			ID        string `json:"id"`
			ChannelID string `json:"channel_id"`
		}
		_ = json.Unmarshal(f.D, &d)
		s.rec.Deliver(history.Delivery{User: s.u.id, Session: sid, Channel: d.ChannelID, Message: d.ID})
	}
}

func (s *session) run() {
	defer close(s.done)
	for {
		s.mu.Lock()
		if s.stopped {
			s.mu.Unlock()
			return
		}
		o := gwtest.Options{Name: s.name, OnFrame: s.onFrame}
		if s.sessionID != "" {
			o.Resume = &gwtest.Resume{SessionID: s.sessionID, Seq: s.seq}
		}
		s.mu.Unlock()
		c, err := gwtest.Dial(gwtest.URL(s.front), s.u.token, o)
		if err != nil {
			time.Sleep(500 * time.Millisecond) // reconnect backoff, as client libraries do
			continue
		}
		s.mu.Lock()
		s.conn = c
		stopped := s.stopped
		s.mu.Unlock()
		if stopped {
			c.Close()
			return
		}
		<-c.Done()
		s.mu.Lock()
		if !s.stopped && len(s.lost) == len(s.back) {
			s.lost = append(s.lost, time.Now())
		}
		if c.InvalidSession() {
			s.sessionID, s.seq = "", 0 // identify afresh
			s.identified = append(s.identified, time.Now())
		}
		s.mu.Unlock()
		time.Sleep(time.Duration(200+rand.IntN(300)) * time.Millisecond) // reconnect jitter
	}
}

func (s *session) stop() {
	s.mu.Lock()
	s.stopped = true
	c := s.conn
	s.mu.Unlock()
	if c != nil {
		c.Close()
	}
	<-s.done
}

// outage is the longest time the session was without a connection
// among the losses in [from, to), the loss's end being its next READY or
// RESUMED (or until, when it never came back).
func (s *session) outage(from, to, until time.Time) (lost int, longest time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, at := range s.lost {
		if at.Before(from) || !at.Before(to) {
			continue
		}
		lost++
		end := until
		if i < len(s.back) {
			end = s.back[i]
		}
		longest = max(longest, end.Sub(at))
	}
	return
}

// counts are the resumes and re-identifies in [from, to).
func (s *session) counts(from, to time.Time) (resumed, identified int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, at := range s.resumed {
		if !at.Before(from) && at.Before(to) {
			resumed++
		}
	}
	for _, at := range s.identified {
		if !at.Before(from) && at.Before(to) {
			identified++
		}
	}
	return
}

// readState is the mention count READY reports to a new session of u for
// channel ch (-1 when READY has no entry for it).
func readState(front string, u user, ch string) (int, error) {
	c, err := gwtest.Dial(gwtest.URL(front), u.token, gwtest.Options{Name: "read-state probe"})
	if err != nil {
		return 0, err
	}
	defer c.Close()
	var d struct {
		ReadState struct {
			Entries []struct {
				ID           string `json:"id"`
				MentionCount int    `json:"mention_count"`
			} `json:"entries"`
		} `json:"read_state"`
	}
	err = c.Await("READY", 20*time.Second, func(fs []gwtest.Frame) bool {
		for _, f := range fs {
			if f.Type == "READY" {
				return json.Unmarshal(f.D, &d) == nil
			}
		}
		return false
	})
	if err != nil {
		return 0, err
	}
	for _, e := range d.ReadState.Entries {
		if e.ID == ch {
			return e.MentionCount, nil
		}
	}
	return -1, nil
}

// viewer watches a live stream over SSE through the balancer as a Go
// viewer would, until run ends: when its connection drops it reconnects
// with Last-Event-ID, the last comment's sequence. Every comment it
// receives is recorded.
func (a *api) viewer(run context.Context, rec *history.Recorder, name, token, stream string, wg *sync.WaitGroup) {
	defer wg.Done()
	last := ""
	for run.Err() == nil {
		h := http.Header{"Authorization": {token}}
		if last != "" {
			h.Set("Last-Event-ID", last)
		}
		s, err := sse.Dial(run, &http.Client{}, a.base+"/v1/streams/"+stream+"/live", h)
		if err == nil {
			for {
				ev, err := s.Next()
				if err != nil {
					break
				}
				if ev.Type != "comment" {
					continue
				}
				var c struct {
					ID  string `json:"id"`
					Seq int64  `json:"seq"`
				}
				if json.Unmarshal(ev.Data, &c) != nil {
					continue
				}
				rec.Receive(history.Receipt{Viewer: name, Stream: stream, Comment: c.ID, Seq: c.Seq})
				last = strconv.FormatInt(c.Seq, 10)
			}
			s.Close()
		}
		time.Sleep(time.Duration(200+rand.IntN(300)) * time.Millisecond) // reconnect jitter, as EventSource does
	}
}

// acker moves u's read marker in channel ch about once a second to the
// newest message it reads there (a read of one message, recorded as a
// read), recording each ack.
func (a *api) acker(ctx context.Context, rec *history.Recorder, client int, u user, ch string, stop *atomic.Bool, wg *sync.WaitGroup) {
	defer wg.Done()
	for !stop.Load() && ctx.Err() == nil {
		idx := rec.Begin(history.Op{Client: client, Kind: history.Read, Channel: ch, Limit: 1})
		var page []wireMsg
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		status, raw, err := resttest.Do(rctx, a.client, "GET", a.base+"/api/v10/channels/"+ch+"/messages?limit=1", u.token, nil, &page)
		cancel()
		rec.End(idx, func(op *history.Op) {
			if err != nil || status != 200 {
				op.Err = fmt.Sprintf("%d %s %v", status, truncate(string(raw), 120), err)
				return
			}
			op.OK = true
			for _, m := range page {
				op.Msgs = append(op.Msgs, m.msg())
			}
		})
		if err == nil && status == 200 && len(page) == 1 {
			idx := rec.Begin(history.Op{Client: client, Kind: history.Ack, User: u.id, Channel: ch, ID: page[0].ID})
			rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			status, raw, err := resttest.Do(rctx, a.client, "POST", a.base+"/api/v10/channels/"+ch+"/messages/"+page[0].ID+"/ack", u.token,
				map[string]any{"token": nil}, nil)
			cancel()
			rec.End(idx, func(op *history.Op) {
				if err == nil && status/100 == 2 {
					op.OK = true
					return
				}
				op.Err = fmt.Sprintf("%d %s %v", status, truncate(string(raw), 120), err)
				op.Definite = err == nil && status/100 == 4 && status != 408
			})
		}
		time.Sleep(time.Second) // a reader glancing at the channel now and then
	}
}

// readMarker is u's read marker in channel ch as READY reports it to a
// new session ("" when READY has no entry for it).
func readMarker(front string, u user, ch string) (string, error) {
	c, err := gwtest.Dial(gwtest.URL(front), u.token, gwtest.Options{Name: "read-marker probe"})
	if err != nil {
		return "", err
	}
	defer c.Close()
	var d struct {
		ReadState struct {
			Entries []struct {
				ID            string `json:"id"`
				LastMessageID string `json:"last_message_id"`
			} `json:"entries"`
		} `json:"read_state"`
	}
	err = c.Await("READY", 20*time.Second, func(fs []gwtest.Frame) bool {
		for _, f := range fs {
			if f.Type == "READY" {
				return json.Unmarshal(f.D, &d) == nil
			}
		}
		return false
	})
	if err != nil {
		return "", err
	}
	for _, e := range d.ReadState.Entries {
		if e.ID == ch {
			return e.LastMessageID, nil
		}
	}
	return "", nil
}
