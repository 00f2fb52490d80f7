// Package gwtest is the gateway client the test packages share: a real
// WebSocket client of Concord's (Discord's) gateway that reads HELLO,
// identifies or resumes, heartbeats at the interval HELLO gives with the
// last sequence number (and at once when the server asks with op 1), and
// records every dispatch in arrival order so a test can await the one it
// expects instead of sleeping.
//
// A test awaits either a condition over every dispatch so far (Await) or
// the next dispatch of a type in order (Next), which also hands back the
// dispatches passed over: after a RESUME, Next("RESUMED") returns the
// replayed ones. Control opcodes (7 RECONNECT, 9 INVALID_SESSION) are
// counted and their payloads kept, so a client that resumes across
// connections can be built on one Conn per connection.
package gwtest

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"
)

// Frame is one dispatch (op 0) a session received.
type Frame struct {
	// Seq is the frame's sequence number (s).
	Seq int64
	// Type is the event name (t).
	Type string
	// At is when the client read it.
	At time.Time
	// D is the event's payload.
	D json.RawMessage
}

// Intents a session asks for when Options.Intents is zero: GUILDS,
// GUILD_MESSAGES and MESSAGE_CONTENT.
const DefaultIntents = 1<<0 | 1<<9 | 1<<15

// Options configure a session.
type Options struct {
	// Name labels the session in errors.
	Name string
	// Intents of the IDENTIFY; DefaultIntents when zero.
	Intents uint64
	// OS is IDENTIFY's properties.os ("linux" when empty): the client
	// class presence reports.
	OS string
	// Presence is IDENTIFY's initial presence, when set.
	Presence map[string]any
	// LargeThreshold is IDENTIFY's large_threshold, sent when non-zero.
	LargeThreshold int
	// Resume, when set, sends RESUME for that session instead of
	// IDENTIFY.
	Resume *Resume
	// Header is sent with the WebSocket handshake.
	Header http.Header
	// Timeout bounds the dial and HELLO; 10 s when zero.
	Timeout time.Duration
	// OnFrame, when set, is called from the reader for every frame the
	// server sends after HELLO, dispatch or not, before Await and Next see
	// it. It runs under the Conn's lock: it must not block and must not
	// call the Conn's methods.
	OnFrame func(op int, f Frame)
}

// URL is the gateway URL of the node at addr (host:port), API v10 with
// JSON frames, as bot libraries build it.
func URL(addr string) string { return "ws://" + addr + "/gateway?v=10&encoding=json" }

// DialError is a connection that could not be made at all (no HELLO was
// read); a client that tries several nodes moves on to the next.
type DialError struct{ Err error }

// Error is the underlying error's text.
func (e *DialError) Error() string { return e.Err.Error() }

// Unwrap returns the underlying error.
func (e *DialError) Unwrap() error { return e.Err }

// Resume names the session a RESUME continues.
type Resume struct {
	// SessionID is READY's session_id.
	SessionID string
	// Seq is the last sequence number the session received.
	Seq int64
}

// Conn is one gateway session.
type Conn struct {
	name    string
	ws      *websocket.Conn
	writeMu sync.Mutex

	mu        sync.Mutex
	frames    []Frame
	lastSeq   int64
	closeErr  error
	closeCode int
	acks      int                 // op 11 heartbeat ACKs
	next      int                 // index in frames where Next resumes
	last      [12]json.RawMessage // the last d of each control opcode
	ops       [12]atomic.Int64    // frames per opcode (readable inside an Await condition)
	onFrame   func(op int, f Frame)
	changed   chan struct{} // closed and replaced at every frame
	done      chan struct{}
}

// Dial connects to the gateway at url (ws://host/gateway?v=10&encoding=json)
// and identifies with token, or resumes per o.Resume.
func Dial(url, token string, o Options) (*Conn, error) {
	if o.Intents == 0 {
		o.Intents = DefaultIntents
	}
	if o.Timeout == 0 {
		o.Timeout = 10 * time.Second
	}
	if o.Name == "" {
		o.Name = "session"
	}
	d := websocket.Dialer{HandshakeTimeout: o.Timeout}
	ws, _, err := d.Dial(url, o.Header)
	if err != nil {
		return nil, &DialError{fmt.Errorf("%s: dial %s: %w", o.Name, url, err)}
	}
	c := &Conn{name: o.Name, ws: ws, onFrame: o.OnFrame, changed: make(chan struct{}), done: make(chan struct{})}
	var hello struct {
		Op int `json:"op"`
		D  struct {
			HeartbeatInterval int `json:"heartbeat_interval"`
		} `json:"d"`
	}
	_ = ws.SetReadDeadline(time.Now().Add(o.Timeout))
	if err := ws.ReadJSON(&hello); err != nil || hello.Op != 10 || hello.D.HeartbeatInterval <= 0 {
		ws.Close()
		return nil, &DialError{fmt.Errorf("%s: HELLO from %s: %+v, %v", o.Name, url, hello, err)}
	}
	_ = ws.SetReadDeadline(time.Time{})
	if o.OS == "" {
		o.OS = "linux"
	}
	identify := map[string]any{
		"token":      token,
		"intents":    o.Intents,
		"properties": map[string]string{"os": o.OS, "browser": "concord-test", "device": "concord-test"},
	}
	if o.Presence != nil {
		identify["presence"] = o.Presence
	}
	if o.LargeThreshold != 0 {
		identify["large_threshold"] = o.LargeThreshold
	}
	var first any = map[string]any{"op": 2, "d": identify}
	if o.Resume != nil {
		c.lastSeq = o.Resume.Seq
		first = map[string]any{"op": 6, "d": map[string]any{"token": token, "session_id": o.Resume.SessionID, "seq": o.Resume.Seq}}
	}
	if err := c.Send(first); err != nil {
		ws.Close()
		return nil, err
	}
	go c.read()
	go c.heartbeat(time.Duration(hello.D.HeartbeatInterval) * time.Millisecond)
	return c, nil
}

// Send writes one frame.
func (c *Conn) Send(v any) error {
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	_ = c.ws.SetWriteDeadline(time.Now().Add(5 * time.Second))
	if err := c.ws.WriteJSON(v); err != nil {
		return fmt.Errorf("%s: send: %w", c.name, err)
	}
	return nil
}

func (c *Conn) read() {
	defer close(c.done)
	for {
		var f struct {
			Op int             `json:"op"`
			T  string          `json:"t"`
			S  int64           `json:"s"`
			D  json.RawMessage `json:"d"`
		}
		err := c.ws.ReadJSON(&f)
		c.mu.Lock()
		if err != nil {
			c.closeErr = err
			var ce *websocket.CloseError
			if errors.As(err, &ce) {
				c.closeCode = ce.Code
			}
			close(c.changed)
			c.mu.Unlock()
			return
		}
		fr := Frame{Seq: f.S, Type: f.T, At: time.Now(), D: f.D}
		if c.onFrame != nil {
			c.onFrame(f.Op, fr)
		}
		switch f.Op {
		case 0:
			c.frames = append(c.frames, fr)
			c.lastSeq = f.S
		case 11:
			c.acks++
		}
		if f.Op >= 0 && f.Op < len(c.ops) {
			if f.Op != 0 {
				c.last[f.Op] = f.D
			}
			c.ops[f.Op].Add(1)
		}
		close(c.changed)
		c.changed = make(chan struct{})
		c.mu.Unlock()
		if f.Op == 1 {
			// The server asks for a heartbeat now.
			go func() { _ = c.Send(map[string]any{"op": 1, "d": c.Seq()}) }()
		}
	}
}

// heartbeat sends op 1 with the last sequence number at every interval.
func (c *Conn) heartbeat(every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-c.done:
			return
		case <-t.C:
			if err := c.Send(map[string]any{"op": 1, "d": c.Seq()}); err != nil {
				return
			}
		}
	}
}

// Await waits until cond, evaluated under the session's lock on its
// frames, holds. It returns an error naming what when the connection
// ends first or timeout passes.
func (c *Conn) Await(what string, timeout time.Duration, cond func(frames []Frame) bool) error {
	deadline := time.After(timeout)
	for {
		c.mu.Lock()
		ok := cond(c.frames)
		ch, cerr := c.changed, c.closeErr
		c.mu.Unlock()
		if ok {
			return nil
		}
		if cerr != nil {
			return fmt.Errorf("%s: connection ended while waiting for %s: %w", c.name, what, cerr)
		}
		select {
		case <-ch:
		case <-deadline:
			return fmt.Errorf("%s: no %s within %v", c.name, what, timeout)
		}
	}
}

// HasType is an Await condition: a dispatch of type typ has arrived.
func HasType(typ string) func([]Frame) bool {
	return func(fs []Frame) bool {
		for _, f := range fs {
			if f.Type == typ {
				return true
			}
		}
		return false
	}
}

// Frames returns a copy of the dispatches received so far.
func (c *Conn) Frames() []Frame {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]Frame(nil), c.frames...)
}

// Seq is the last sequence number received.
func (c *Conn) Seq() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lastSeq
}

// SessionID is READY's session_id, or "" before READY.
func (c *Conn) SessionID() string {
	for _, f := range c.Frames() {
		if f.Type == "READY" {
			var r struct {
				SessionID string `json:"session_id"`
			}
			_ = json.Unmarshal(f.D, &r)
			return r.SessionID
		}
	}
	return ""
}

// Done is closed when the connection has ended.
func (c *Conn) Done() <-chan struct{} { return c.done }

// CloseCode is the close code the server sent, 0 while open or when the
// connection ended without a close frame.
func (c *Conn) CloseCode() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closeCode
}

// InvalidSession reports whether the server sent op 9 INVALID_SESSION;
// an Await condition may call it.
func (c *Conn) InvalidSession() bool { return c.Ops(9) > 0 }

// Ops is how many frames of opcode op (0–11) the server sent after
// HELLO; an Await condition may call it (Ops(7) > 0: RECONNECT came).
func (c *Conn) Ops(op int) int64 {
	if op < 0 || op >= len(c.ops) {
		return 0
	}
	return c.ops[op].Load()
}

// Last is the payload (d) of the last frame of control opcode op (1–11),
// nil when none came: Last(9) is INVALID_SESSION's resumable flag.
func (c *Conn) Last(op int) json.RawMessage {
	if op <= 0 || op >= len(c.last) {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.last[op]
}

// Next waits for the first dispatch named typ, among those no earlier
// Next has passed, for which match (nil: any) holds. It returns that
// dispatch and the ones it passed over in arrival order; the next call
// starts after it. After a RESUME, Next("RESUMED") passes over the
// replayed dispatches.
func (c *Conn) Next(typ string, timeout time.Duration, match func(d json.RawMessage) bool) (Frame, []Frame, error) {
	deadline := time.After(timeout)
	for {
		c.mu.Lock()
		for i := c.next; i < len(c.frames); i++ {
			if f := c.frames[i]; f.Type == typ && (match == nil || match(f.D)) {
				passed := append([]Frame(nil), c.frames[c.next:i]...)
				c.next = i + 1
				c.mu.Unlock()
				return f, passed, nil
			}
		}
		ch, cerr := c.changed, c.closeErr
		c.mu.Unlock()
		if cerr != nil {
			return Frame{}, nil, fmt.Errorf("%s: connection ended while waiting for %s: %w", c.name, typ, cerr)
		}
		select {
		case <-ch:
		case <-deadline:
			return Frame{}, nil, fmt.Errorf("%s: no %s within %v", c.name, typ, timeout)
		}
	}
}

// Settle sends a heartbeat and waits for its ACK: the server handles one
// op at a time per connection, so every op sent before has been handled
// once it arrives.
func (c *Conn) Settle(timeout time.Duration) error {
	c.mu.Lock()
	want := c.acks + 1
	c.mu.Unlock()
	if err := c.Send(map[string]any{"op": 1, "d": c.Seq()}); err != nil {
		return err
	}
	deadline := time.After(timeout)
	for {
		c.mu.Lock()
		got, ch, cerr := c.acks, c.changed, c.closeErr
		c.mu.Unlock()
		if got >= want {
			return nil
		}
		if cerr != nil {
			return fmt.Errorf("%s: connection ended while waiting for a heartbeat ACK: %w", c.name, cerr)
		}
		select {
		case <-ch:
		case <-deadline:
			return fmt.Errorf("%s: no heartbeat ACK within %v", c.name, timeout)
		}
	}
}

// CloseNormally ends the session with close code 1000, which the server
// takes as the end of the session (no resume), and waits for the reader.
func (c *Conn) CloseNormally() { c.CloseWith(websocket.CloseNormalClosure) }

// CloseWith sends a close frame with code and waits for the reader: a
// code other than 1000 and 1001 (4000, as discord.py and discordgo send
// before they resume) keeps the session resumable.
func (c *Conn) CloseWith(code int) {
	c.writeMu.Lock()
	_ = c.ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(code, ""), time.Now().Add(time.Second))
	c.writeMu.Unlock()
	c.ws.Close()
	<-c.done
}

// Close ends the connection without a close frame (as a dropped network
// would, so the session stays resumable) and waits for the reader.
func (c *Conn) Close() {
	c.ws.Close()
	<-c.done
}
