package gateway

import (
	"bytes"
	"compress/zlib"
	"encoding/json"
	"io"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/concord-chat/concord/runtime/domain/event"
)

// streamReader feeds a zlib-stream connection's binary messages to one
// inflater, checking each ends with the Z_SYNC_FLUSH marker.
type streamReader struct {
	t    *testing.T
	ws   *websocket.Conn
	rest []byte
	msgs int
}

func (s *streamReader) Read(p []byte) (int, error) {
	for len(s.rest) == 0 {
		_ = s.ws.SetReadDeadline(time.Now().Add(5 * time.Second))
		mt, b, err := s.ws.ReadMessage()
		if err != nil {
			return 0, err
		}
		if mt != websocket.BinaryMessage {
			s.t.Errorf("zlib-stream message type %d, want binary", mt)
		}
		if !bytes.HasSuffix(b, []byte{0, 0, 0xff, 0xff}) {
			s.t.Errorf("message %d does not end with Z_SYNC_FLUSH: % x", s.msgs, b[max(0, len(b)-8):])
		}
		s.msgs++
		s.rest = b
	}
	n := copy(p, s.rest)
	s.rest = s.rest[n:]
	return n, nil
}

func TestZlibStream(t *testing.T) {
	g := newTestGateway(t, Config{})
	c := g.dial(t, "?v=10&encoding=json&compress=zlib-stream")
	sr := &streamReader{t: t, ws: c.ws}
	zr, err := zlib.NewReader(sr)
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(zr)
	next := func() wireFrame {
		t.Helper()
		var f wireFrame
		if err := dec.Decode(&f); err != nil {
			t.Fatalf("decode: %v", err)
		}
		return f
	}
	if f := next(); f.Op != OpHello {
		t.Fatalf("first frame op %d", f.Op)
	}
	c.send(identifyFrame("tok-alice", 1, nil))
	f := next()
	if f.Op != OpDispatch || *f.T != "READY" || *f.S != 1 {
		t.Fatalf("got op %d, want READY", f.Op)
	}
	var r readyD
	if err := json.Unmarshal(f.D, &r); err != nil {
		t.Fatal(err)
	}
	c.send(`{"op":1,"d":1}`)
	if f := next(); f.Op != OpHeartbeatACK {
		t.Fatalf("op %d, want ACK", f.Op)
	}
	// Repeated payloads shrink through the shared context.
	payload := `{"content":"the same words over and over, the same words over and over"}`
	for range 3 {
		g.deliver("MESSAGE_CREATE", payload, event.SessionID(r.SessionID))
	}
	for i := int64(2); i <= 4; i++ {
		f := next()
		if *f.S != i || string(f.D) != payload {
			t.Fatalf("seq %d d %s", *f.S, f.D)
		}
	}
	if sr.msgs != 6 {
		t.Fatalf("%d messages for 6 frames: each frame must be one message", sr.msgs)
	}
}

func TestPayloadCompression(t *testing.T) {
	g := newTestGateway(t, Config{})
	c := g.dial(t, "?v=9&encoding=json")
	c.hello()
	c.send(identifyFrame("Bot tok-alice", 1, map[string]any{"compress": true}))
	inflate := func() wireFrame {
		t.Helper()
		_ = c.ws.SetReadDeadline(time.Now().Add(5 * time.Second))
		mt, b, err := c.ws.ReadMessage()
		if err != nil {
			t.Fatal(err)
		}
		if mt != websocket.BinaryMessage {
			t.Fatalf("message type %d, want binary", mt)
		}
		// Each binary frame is a complete zlib stream on its own (discordgo).
		zr, err := zlib.NewReader(bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		raw, err := io.ReadAll(zr)
		if err != nil {
			t.Fatalf("frame is not a complete zlib stream: %v", err)
		}
		var f wireFrame
		if err := json.Unmarshal(raw, &f); err != nil {
			t.Fatal(err)
		}
		return f
	}
	f := inflate()
	if f.Op != OpDispatch || *f.T != "READY" {
		t.Fatalf("op %d", f.Op)
	}
	var r readyD
	_ = json.Unmarshal(f.D, &r)
	g.deliver("MESSAGE_CREATE", `{"content":"hi"}`, event.SessionID(r.SessionID))
	g.deliver("MESSAGE_CREATE", `{"content":"hi"}`, event.SessionID(r.SessionID))
	for i := int64(2); i <= 3; i++ {
		if f := inflate(); *f.S != i || string(f.D) != `{"content":"hi"}` {
			t.Fatalf("seq %v d %s", deref(f.S), f.D)
		}
	}
	// Control frames stay text.
	c.send(`{"op":1,"d":3}`)
	if f := c.read(); f.Op != OpHeartbeatACK {
		t.Fatalf("op %d", f.Op)
	}
}
