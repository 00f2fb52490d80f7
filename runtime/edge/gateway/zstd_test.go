package gateway

import (
	"bytes"
	"encoding/json"
	"io"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/klauspost/compress/zstd"

	"github.com/concord-chat/concord/runtime/domain/event"
)

// zstdMagic starts every zstd frame.
var zstdMagic = []byte{0x28, 0xb5, 0x2f, 0xfd}

// readBinary returns c's next message, which must be binary.
func (c *client) readBinary() []byte {
	c.t.Helper()
	_ = c.ws.SetReadDeadline(time.Now().Add(5 * time.Second))
	mt, b, err := c.ws.ReadMessage()
	if err != nil {
		c.t.Fatalf("read: %v", err)
	}
	if mt != websocket.BinaryMessage {
		c.t.Fatalf("message type %d, want binary: %q", mt, b)
	}
	return b
}

// zstdSession is what one zstd-stream session put on the wire: the binary
// messages of each of its connections in order, and the payloads they
// must decode to, one per message.
type zstdSession struct {
	conns [][][]byte
	want  [][]string
}

// recordZstdSession runs a session over zstd-stream through a RESUME: a
// connection identifies and receives three equal dispatches, drops
// without a close frame, two more dispatches are published, and a second
// connection resumes and receives them. It returns every message.
func recordZstdSession(t *testing.T) zstdSession {
	t.Helper()
	g := newTestGateway(t, Config{})
	var rec zstdSession
	c := g.dial(t, "?v=10&encoding=json&compress=zstd-stream")
	var msgs [][]byte
	msgs = append(msgs, c.readBinary()) // HELLO
	c.send(identifyFrame("tok-alice", 1, nil))
	ready := c.readBinary()
	msgs = append(msgs, ready)
	sid := sessionOf(t, msgs)
	payload := `{"content":"the same words over and over, the same words over and over"}`
	for range 3 {
		g.deliver("MESSAGE_CREATE", payload, event.SessionID(sid))
	}
	for range 3 {
		msgs = append(msgs, c.readBinary())
	}
	rec.conns = append(rec.conns, msgs)
	rec.want = append(rec.want, []string{"HELLO", "READY", payload, payload, payload})

	c.ws.UnderlyingConn().Close()
	g.deliver("MESSAGE_CREATE", `{"n":5}`, event.SessionID(sid))
	g.deliver("MESSAGE_CREATE", `{"n":6}`, event.SessionID(sid))
	c2 := g.dial(t, "?v=10&encoding=json&compress=zstd-stream")
	msgs = [][]byte{c2.readBinary()}
	c2.send(resumeFrame("tok-alice", sid, 4))
	for range 3 {
		msgs = append(msgs, c2.readBinary())
	}
	rec.conns = append(rec.conns, msgs)
	rec.want = append(rec.want, []string{"HELLO", `{"n":5}`, `{"n":6}`, "RESUMED"})
	return rec
}

// sessionOf decodes the session id from the READY among a connection's
// first messages.
func sessionOf(t *testing.T, msgs [][]byte) string {
	t.Helper()
	frames := decodeZstdPrefix(t, msgs)
	var r readyD
	if err := json.Unmarshal(frames[len(frames)-1].D, &r); err != nil || r.SessionID == "" {
		t.Fatalf("READY %s: %v", frames[len(frames)-1].D, err)
	}
	return r.SessionID
}

// decodeZstdPrefix decodes the concatenation of msgs, a stream that has
// not ended, into its frames.
func decodeZstdPrefix(t *testing.T, msgs [][]byte) []wireFrame {
	t.Helper()
	zr, err := zstd.NewReader(bytes.NewReader(bytes.Join(msgs, nil)), zstd.WithDecoderConcurrency(1))
	if err != nil {
		t.Fatal(err)
	}
	defer zr.Close()
	out, err := io.ReadAll(zr)
	if err != nil && err != io.ErrUnexpectedEOF {
		t.Fatalf("zstd decode: %v", err)
	}
	dec := json.NewDecoder(bytes.NewReader(out))
	var frames []wireFrame
	for {
		var f wireFrame
		if err := dec.Decode(&f); err == io.EOF {
			return frames
		} else if err != nil {
			t.Fatalf("decoded stream %q: %v", out, err)
		}
		frames = append(frames, f)
	}
}

// matches reports whether f is the payload want names: an op's or
// dispatch's name, or a dispatch's exact data.
func (f wireFrame) matches(want string) bool {
	switch {
	case want == "HELLO":
		return f.Op == OpHello
	case want == "HEARTBEAT_ACK":
		return f.Op == OpHeartbeatACK
	case f.T != nil && *f.T == want:
		return true
	default:
		return f.T != nil && string(f.D) == want
	}
}

func TestZstdStream(t *testing.T) {
	rec := recordZstdSession(t)
	for ci, msgs := range rec.conns {
		if !bytes.HasPrefix(msgs[0], zstdMagic) {
			t.Fatalf("connection %d: first message % x does not open a zstd frame", ci, msgs[0][:4])
		}
		// Each message completes exactly one more payload: decoding the
		// first i messages yields exactly i frames.
		for i := range msgs {
			frames := decodeZstdPrefix(t, msgs[:i+1])
			if len(frames) != i+1 {
				t.Fatalf("connection %d: %d messages decode to %d frames", ci, i+1, len(frames))
			}
			if want := rec.want[ci][i]; !frames[i].matches(want) {
				t.Fatalf("connection %d message %d: op %d t %v d %s, want %s", ci, i, frames[i].Op, deref(frames[i].T), frames[i].D, want)
			}
			if i > 0 && bytes.HasPrefix(msgs[i], zstdMagic) {
				t.Fatalf("connection %d message %d starts a new frame: one frame per connection", ci, i)
			}
		}
	}
	// Sequence numbers continue across the RESUME.
	frames := decodeZstdPrefix(t, rec.conns[1])
	for i, want := range []int64{5, 6, 7} {
		if s := frames[i+1].S; s == nil || *s != want {
			t.Fatalf("resumed frame %d seq %v, want %d", i+1, deref(s), want)
		}
	}
	// The shared context: the third equal payload costs less than the first.
	first, third := rec.conns[0][2], rec.conns[0][4]
	if len(third) >= len(first) {
		t.Fatalf("third equal dispatch %d bytes, first %d: the stream shares no context", len(third), len(first))
	}
}

func TestParseCompress(t *testing.T) {
	for in, want := range map[string]compression{"": compressNone, "zlib-stream": compressStream,
		"zstd-stream": compressZstdStream, "gzip": compressNone, "ZSTD-STREAM": compressNone} {
		if got := parseCompress(in); got != want {
			t.Errorf("parseCompress(%q) = %d, want %d", in, got, want)
		}
	}
}
