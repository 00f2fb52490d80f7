package gateway

import (
	"compress/zlib"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/concord-chat/concord/runtime/domain/event"
)

// dialSmallBuffer dials with a tiny receive buffer so a client that stops
// reading backs the server up quickly.
func (g *testGateway) dialSmallBuffer(t *testing.T) *client {
	t.Helper()
	return g.dialSmallBufferQuery(t, "")
}

func (g *testGateway) dialSmallBufferQuery(t *testing.T, query string) *client {
	t.Helper()
	// The buffer is set before connect so the window never shrinks.
	nd := &net.Dialer{Control: func(network, address string, rc syscall.RawConn) error {
		var serr error
		err := rc.Control(func(fd uintptr) {
			serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096)
		})
		if err != nil {
			return err
		}
		return serr
	}}
	d := websocket.Dialer{NetDialContext: nd.DialContext}
	ws, _, err := d.Dial(g.url(query), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.Close() })
	return &client{t: t, ws: ws}
}

// floodUntilClosed delivers payload to sid until the node closes the slow
// connection, checking Deliver never waits on the socket.
func floodUntilClosed(t *testing.T, g *testGateway, sid event.SessionID, payload string, limit int) int {
	t.Helper()
	start := time.Now()
	for i := 1; i <= limit; i++ {
		g.deliver("MESSAGE_CREATE", payload, sid)
		if testutil.ToFloat64(g.node.metrics.slowConsumerCloses) == 1 {
			if el := time.Since(start); el > 5*time.Second {
				t.Fatalf("%d deliveries took %v: Deliver waited on the socket", i, el)
			}
			return i
		}
	}
	t.Fatalf("no slow-consumer close after %d deliveries", limit)
	return 0
}

func TestSlowReaderClosedThenResumes(t *testing.T) {
	const sendQueue = 8
	g := newTestGateway(t, Config{SendQueue: sendQueue, SendQueueBytes: 1 << 30, ReplayMaxEvents: 100000, ReplayMaxBytes: 1 << 30})
	c := g.dialSmallBuffer(t)
	r := c.identify("tok-alice")
	sid := event.SessionID(r.SessionID)
	payload := fmt.Sprintf(`{"pad":"%s"}`, strings.Repeat("x", 16<<10))
	n := floodUntilClosed(t, g, sid, payload, 20000)
	// The session is detached: its queue is gone, its buffer holds it all.
	s := g.node.lookup(sid)
	s.mu.Lock()
	attached, held := s.conn != nil, s.replay.len()
	s.mu.Unlock()
	if attached || held != n+1 {
		t.Fatalf("after the close: attached %v, buffer %d frames, want detached with %d", attached, held, n+1)
	}
	// Later events are still buffered.
	g.deliver("MESSAGE_CREATE", `{"late":true}`, sid)
	// The client reads what reached it, sees the socket end, and resumes.
	last := readUntilClosed(t, c, 1, int64(n+1))
	c2 := g.dial(t, "")
	c2.hello()
	c2.send(resumeFrame("tok-alice", r.SessionID, last))
	for seq := last + 1; seq <= int64(n+1); seq++ {
		c2.readDispatch("MESSAGE_CREATE", seq)
	}
	if f := c2.readDispatch("MESSAGE_CREATE", int64(n+2)); string(f.D) != `{"late":true}` {
		t.Fatalf("late event %s", f.D)
	}
	c2.readDispatch("RESUMED", int64(n+3))
}

func TestSlowReaderMemoryBounded(t *testing.T) {
	const maxBytes = 256 << 10
	g := newTestGateway(t, Config{SendQueue: 8, ReplayMaxBytes: maxBytes})
	c := g.dialSmallBuffer(t)
	r := c.identify("tok-alice")
	sid := event.SessionID(r.SessionID)
	payload := fmt.Sprintf(`{"pad":"%s"}`, strings.Repeat("y", 4<<10))
	floodUntilClosed(t, g, sid, payload, 20000)
	// Keep delivering to the detached session: its buffer stays bounded.
	for range 2000 {
		g.deliver("MESSAGE_CREATE", payload, sid)
		if b := testutil.ToFloat64(g.node.metrics.replayBufferBytes); b > maxBytes {
			t.Fatalf("replay buffer at %v bytes, bound %d", b, maxBytes)
		}
	}
	s := g.node.lookup(sid)
	s.mu.Lock()
	held, bytes := s.replay.len(), s.replay.bytes
	s.mu.Unlock()
	if bytes > maxBytes || held > maxBytes/(4<<10) || held == 0 {
		t.Fatalf("buffer holds %d frames, %d bytes", held, bytes)
	}
	// The gap since READY is gone: INVALID_SESSION.
	c2 := g.dial(t, "")
	c2.hello()
	c2.send(resumeFrame("tok-alice", r.SessionID, 1))
	if f := c2.read(); f.Op != OpInvalidSession {
		t.Fatalf("op %d, want 9", f.Op)
	}
	waitSession(t, g.backend.discs, "disconnect")
	if b := testutil.ToFloat64(g.node.metrics.replayBufferBytes); b != 0 {
		t.Fatalf("replay gauge %v after the session ended", b)
	}
}

// noisyPayload is a payload deflate cannot shrink much, so it fills
// socket buffers even through zlib-stream.
func noisyPayload(i, n int) string {
	b := make([]byte, n)
	x := uint32(i*2654435761 + 1)
	for j := range b {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		b[j] = 'a' + byte(x%26)
	}
	return fmt.Sprintf(`{"i":%d,"pad":"%s"}`, i, b)
}

func TestBackedUpSocketKeepsOrder(t *testing.T) {
	for _, query := range []string{"?v=10&encoding=json", "?v=10&encoding=json&compress=zlib-stream"} {
		t.Run(query, func(t *testing.T) {
			g := newTestGateway(t, Config{ReplayMaxBytes: 64 << 20, SendQueueBytes: 64 << 20})
			c := g.dialSmallBufferQuery(t, query)
			stream := strings.Contains(query, "zlib")
			var next func() wireFrame
			if stream {
				sr := &streamReader{t: t, ws: c.ws}
				zr, err := zlib.NewReader(sr)
				if err != nil {
					t.Fatal(err)
				}
				dec := json.NewDecoder(zr)
				next = func() wireFrame {
					t.Helper()
					var f wireFrame
					if err := dec.Decode(&f); err != nil {
						t.Fatalf("decode: %v", err)
					}
					return f
				}
			} else {
				next = c.read
			}
			if f := next(); f.Op != OpHello {
				t.Fatalf("op %d", f.Op)
			}
			c.send(identifyFrame("tok-alice", 1, nil))
			f := next()
			var r readyD
			_ = json.Unmarshal(f.D, &r)
			sid := event.SessionID(r.SessionID)
			// Far more than the socket buffers hold: frames go partly
			// written to the writer goroutine, then through its queue.
			const count = 300
			for i := range count {
				g.deliver("MESSAGE_CREATE", noisyPayload(i, 16<<10), sid)
			}
			s := g.node.lookup(sid)
			s.mu.Lock()
			sc := s.conn
			s.mu.Unlock()
			sc.qmu.Lock()
			busy, queued := sc.busy, len(sc.queue)
			sc.qmu.Unlock()
			if !busy || queued == 0 {
				t.Fatalf("socket not backed up (busy %v, %d queued): the test does not reach the writer", busy, queued)
			}
			for i := range count {
				f := next()
				if f.S == nil || *f.S != int64(i+2) || string(f.D) != noisyPayload(i, 16<<10) {
					t.Fatalf("frame %d: seq %v, %d bytes of d", i, deref(f.S), len(f.D))
				}
			}
			// The socket is idle again: a heartbeat is answered inline.
			c.send(`{"op":1,"d":1}`)
			if f := next(); f.Op != OpHeartbeatACK {
				t.Fatalf("op %d", f.Op)
			}
		})
	}
}

func TestPingPong(t *testing.T) {
	g := newTestGateway(t, Config{})
	c := g.dial(t, "")
	c.hello()
	pong := make(chan string, 1)
	c.ws.SetPongHandler(func(data string) error {
		pong <- data
		return nil
	})
	if err := c.ws.WriteControl(websocket.PingMessage, []byte("are you there"), time.Now().Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	c.send(`{"op":1,"d":null}`)
	if f := c.read(); f.Op != OpHeartbeatACK { // control frames are handled while reading
		t.Fatalf("op %d", f.Op)
	}
	select {
	case d := <-pong:
		if d != "are you there" {
			t.Fatalf("pong %q", d)
		}
	default:
		t.Fatal("no pong before the ACK")
	}
}

// readUntilClosed reads the dispatches that reached a slow client after
// seq from, checking they are gap-free, until the server's resumable close
// (4000, or 1006 when the socket could not take the close frame); it
// returns the last seq read, which must be below total.
func readUntilClosed(t *testing.T, c *client, from, total int64) int64 {
	t.Helper()
	last := from
	_ = c.ws.SetReadDeadline(time.Now().Add(10 * time.Second))
	for {
		_, b, err := c.ws.ReadMessage()
		if err != nil {
			var ce *websocket.CloseError
			// A socket that cannot take the close frame in time is just
			// closed (1006); both are resumable for every library.
			if errors.As(err, &ce) && ce.Code != SlowConsumerCloseCode && ce.Code != websocket.CloseAbnormalClosure {
				t.Fatalf("closed with %d, want %d or 1006", ce.Code, SlowConsumerCloseCode)
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				t.Fatalf("socket not closed after reading up to seq %d of %d", last, total)
			}
			break
		}
		var f wireFrame
		if err := jsonUnmarshal(b, &f); err != nil {
			t.Fatal(err)
		}
		if *f.S != last+1 {
			t.Fatalf("seq %d after %d", *f.S, last)
		}
		last = *f.S
	}
	if last >= total {
		t.Fatalf("client read everything (%d): the test did not back up the socket", last)
	}
	return last
}

// TestSlowReaderCutWhileResumableAtDefaults checks the default bounds
// against each other: a reader that stops is cut while everything it has
// not read (writer batch, queue, socket buffer) still fits in the replay
// buffer, so a prompt RESUME gets every missed event.
func TestSlowReaderCutWhileResumableAtDefaults(t *testing.T) {
	g := newTestGateway(t, Config{})
	c := g.dialSmallBuffer(t)
	r := c.identify("tok-alice")
	sid := event.SessionID(r.SessionID)
	payload := fmt.Sprintf(`{"content":"%s"}`, strings.Repeat("m", 480))
	n := floodUntilClosed(t, g, sid, payload, 100000)
	last := readUntilClosed(t, c, 1, int64(n+1))
	c2 := g.dial(t, "")
	c2.hello()
	c2.send(resumeFrame("tok-alice", r.SessionID, last))
	for seq := last + 1; seq <= int64(n+1); seq++ {
		c2.readDispatch("MESSAGE_CREATE", seq)
	}
	c2.readDispatch("RESUMED", int64(n+2))
	t.Logf("cut after %d dispatches; the client had read %d; %d replayed", n, last-1, int64(n+1)-last)
}
