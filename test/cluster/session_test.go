package cluster

import (
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// dispatch is one op 0 frame a session received.
type dispatch struct {
	seq int64
	typ string
	at  time.Time
	d   json.RawMessage
}

// wsSession is a real gateway client: HELLO, IDENTIFY, heartbeats at the
// interval HELLO gives, and every dispatch recorded in arrival order.
type wsSession struct {
	name    string
	gateway string
	ws      *websocket.Conn
	writeMu sync.Mutex

	mu       sync.Mutex
	frames   []dispatch
	lastSeq  int64
	closeErr error
	changed  chan struct{} // closed and replaced at every frame
	done     chan struct{}
}

// dial connects a session to a gateway node and identifies with token
// (intents GUILDS, GUILD_MESSAGES and MESSAGE_CONTENT).
func dial(t *testing.T, name, gatewayAddr, token string) *wsSession {
	t.Helper()
	return dialIntents(t, name, gatewayAddr, token, 1<<0|1<<9|1<<15)
}

// dialIntents is dial with the given intents.
func dialIntents(t *testing.T, name, gatewayAddr, token string, intents uint64) *wsSession {
	t.Helper()
	ws, _, err := websocket.DefaultDialer.Dial("ws://"+gatewayAddr+"/gateway?v=10&encoding=json", nil)
	if err != nil {
		t.Fatalf("%s: dial %s: %v", name, gatewayAddr, err)
	}
	s := &wsSession{name: name, gateway: gatewayAddr, ws: ws, changed: make(chan struct{}), done: make(chan struct{})}
	t.Cleanup(func() { ws.Close(); <-s.done })
	var hello struct {
		Op int `json:"op"`
		D  struct {
			HeartbeatInterval int `json:"heartbeat_interval"`
		} `json:"d"`
	}
	_ = ws.SetReadDeadline(time.Now().Add(10 * time.Second))
	if err := ws.ReadJSON(&hello); err != nil || hello.Op != 10 || hello.D.HeartbeatInterval <= 0 {
		t.Fatalf("%s: HELLO: %+v, %v", name, hello, err)
	}
	_ = ws.SetReadDeadline(time.Time{})
	s.send(t, map[string]any{"op": 2, "d": map[string]any{
		"token":      token,
		"intents":    intents,
		"properties": map[string]string{"os": "linux", "browser": "concord-test", "device": "concord-test"},
	}})
	go s.read()
	go s.heartbeat(time.Duration(hello.D.HeartbeatInterval) * time.Millisecond)
	return s
}

func (s *wsSession) send(t *testing.T, v any) {
	if err := s.write(v); err != nil {
		t.Fatalf("%s: send: %v", s.name, err)
	}
}

func (s *wsSession) write(v any) error {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	_ = s.ws.SetWriteDeadline(time.Now().Add(5 * time.Second))
	return s.ws.WriteJSON(v)
}

func (s *wsSession) read() {
	defer close(s.done)
	for {
		var f struct {
			Op int             `json:"op"`
			T  string          `json:"t"`
			S  int64           `json:"s"`
			D  json.RawMessage `json:"d"`
		}
		err := s.ws.ReadJSON(&f)
		s.mu.Lock()
		if err != nil {
			s.closeErr = err
			close(s.changed)
			s.mu.Unlock()
			return
		}
		if f.Op == 0 {
			s.frames = append(s.frames, dispatch{seq: f.S, typ: f.T, at: time.Now(), d: f.D})
			s.lastSeq = f.S
		}
		close(s.changed)
		s.changed = make(chan struct{})
		s.mu.Unlock()
	}
}

// heartbeat sends op 1 with the last sequence number at every interval.
func (s *wsSession) heartbeat(every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-s.done:
			return
		case <-t.C:
			s.mu.Lock()
			seq := s.lastSeq
			s.mu.Unlock()
			if err := s.write(map[string]any{"op": 1, "d": seq}); err != nil {
				return
			}
		}
	}
}

// await waits until cond, evaluated under the session's lock on its
// frames, holds; it fails the test when the connection ends first or
// the timeout passes.
func (s *wsSession) await(t *testing.T, what string, timeout time.Duration, cond func(frames []dispatch) bool) {
	t.Helper()
	deadline := time.After(timeout)
	for {
		s.mu.Lock()
		ok := cond(s.frames)
		ch, cerr := s.changed, s.closeErr
		s.mu.Unlock()
		if ok {
			return
		}
		if cerr != nil {
			t.Fatalf("%s: connection ended while waiting for %s: %v", s.name, what, cerr)
		}
		select {
		case <-ch:
		case <-deadline:
			t.Fatalf("%s: no %s within %v", s.name, what, timeout)
		}
	}
}

// snapshot returns a copy of the frames received so far.
func (s *wsSession) snapshot() []dispatch {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]dispatch(nil), s.frames...)
}

// guildCreates returns the arrival times of GUILD_CREATE for guild id.
func guildCreates(frames []dispatch, id string) []time.Time {
	var out []time.Time
	for _, f := range frames {
		if f.typ != "GUILD_CREATE" {
			continue
		}
		var g struct {
			ID string `json:"id"`
		}
		if json.Unmarshal(f.d, &g) == nil && g.ID == id {
			out = append(out, f.at)
		}
	}
	return out
}

// message is the part of MESSAGE_CREATE the test checks.
type message struct {
	ID        string `json:"id"`
	ChannelID string `json:"channel_id"`
	Content   string `json:"content"`
}

// messages returns the MESSAGE_CREATEs in arrival order.
func messages(frames []dispatch) []message {
	var out []message
	for _, f := range frames {
		if f.typ != "MESSAGE_CREATE" {
			continue
		}
		var m message
		if json.Unmarshal(f.d, &m) == nil {
			out = append(out, m)
		}
	}
	return out
}

// checkSeq reports the first gap or repeat in a session's sequence
// numbers, which must run 1, 2, 3, ...
func checkSeq(frames []dispatch) error {
	for i, f := range frames {
		if f.seq != int64(i+1) {
			return fmt.Errorf("dispatch %d (%s) has seq %d, want %d", i, f.typ, f.seq, i+1)
		}
	}
	return nil
}
