package gateway

import (
	"encoding/binary"
	"encoding/json"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// maskedFrame is a client frame: op, fin and a masked payload.
func maskedFrame(op byte, fin bool, p []byte) []byte {
	b0 := op
	if fin {
		b0 |= 0x80
	}
	b := []byte{b0}
	switch n := len(p); {
	case n < 126:
		b = append(b, 0x80|byte(n))
	case n <= 0xFFFF:
		b = append(b, 0x80|126)
		b = binary.BigEndian.AppendUint16(b, uint16(n))
	default:
		b = append(b, 0x80|127)
		b = binary.BigEndian.AppendUint64(b, uint64(n))
	}
	key := [4]byte{0x12, 0x34, 0x56, 0x78}
	b = append(b, key[:]...)
	for i, c := range p {
		b = append(b, c^key[i&3])
	}
	return b
}

// rawWrite writes bytes to the client's socket in pieces of size step,
// each its own write, so the server sees frames split across reads.
func (c *client) rawWrite(b []byte, step int) {
	c.t.Helper()
	nc := c.ws.NetConn()
	for len(b) > 0 {
		n := min(step, len(b))
		if _, err := nc.Write(b[:n]); err != nil {
			c.t.Fatalf("raw write: %v", err)
		}
		b = b[n:]
		if step < 16 {
			time.Sleep(time.Millisecond) // separate segments, not a timing assertion
		}
	}
}

func TestPolledReaderIsUsed(t *testing.T) {
	g := newTestGateway(t, Config{})
	if g.node.poll == nil {
		t.Skip("no poller on this platform") // poll_other.go
	}
	c := g.dial(t, "")
	c.identify("tok-alice")
	g.node.cmu.Lock()
	defer g.node.cmu.Unlock()
	g.node.poll.mu.Lock() // ordered after ServeHTTP set polled (poller.add)
	defer g.node.poll.mu.Unlock()
	for cn := range g.node.conns {
		if !cn.polled {
			t.Fatal("a TCP connection is read by its own goroutine, not the poller")
		}
	}
}

// Frames split into small pieces, fragmented messages with a ping in
// their middle, and several frames in one write all reach the handler
// as the same payloads.
func TestPolledReaderFraming(t *testing.T) {
	g := newTestGateway(t, Config{})
	c := g.dial(t, "")
	c.hello()
	id, _ := json.Marshal(identifyFrame("tok-alice", 1, nil))
	// IDENTIFY fragmented in three frames, a ping between, all written a
	// few bytes at a time.
	var b []byte
	b = append(b, maskedFrame(wsText, false, id[:10])...)
	b = append(b, maskedFrame(9, true, []byte("pp"))...)
	b = append(b, maskedFrame(0, false, id[10:20])...)
	b = append(b, maskedFrame(0, true, id[20:])...)
	c.rawWrite(b, 3)
	c.ws.SetPongHandler(func(data string) error {
		if data != "pp" {
			t.Errorf("pong %q, want pp", data)
		}
		return nil
	})
	c.ready()
	// Three heartbeats in one write: three ACKs.
	hb := maskedFrame(wsText, true, []byte(`{"op":1,"d":1}`))
	c.rawWrite(append(append(append([]byte(nil), hb...), hb...), hb...), 1<<10)
	for range 3 {
		if f := c.read(); f.Op != OpHeartbeatACK {
			t.Fatalf("op %d, want heartbeat ACK", f.Op)
		}
	}
	// A payload with a 16-bit length, split.
	big := []byte(`{"op":1,"d":null,"pad":"` + string(make([]byte, 0)) + `"}`)
	for len(big) < 300 {
		big = append(big[:len(big)-2], `xxxxxxxxxx"}`...)
	}
	c.rawWrite(maskedFrame(wsText, true, big), 50)
	if f := c.read(); f.Op != OpHeartbeatACK {
		t.Fatalf("op %d, want heartbeat ACK", f.Op)
	}
}

func TestPolledReaderProtocolErrors(t *testing.T) {
	cases := []struct {
		name  string
		frame []byte
		code  int
	}{
		{"unmasked", []byte{0x81, 2, '{', '}'}, websocket.CloseProtocolError},
		{"reserved bit", append([]byte{0xC1}, maskedFrame(wsText, true, []byte("{}"))[1:]...), websocket.CloseProtocolError},
		{"continuation first", maskedFrame(0, true, []byte("{}")), websocket.CloseProtocolError},
		{"unknown opcode", maskedFrame(3, true, nil), websocket.CloseProtocolError},
		{"fragmented ping", maskedFrame(9, false, nil), websocket.CloseProtocolError},
		{"bad close code", maskedFrame(wsClose, true, []byte{0x03, 0xE7}), websocket.CloseProtocolError},
		{"fragments too large", append(maskedFrame(wsText, false, make([]byte, 3000)), maskedFrame(0, true, make([]byte, 3000))...), CloseDecodeError},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := newTestGateway(t, Config{})
			c := g.dial(t, "")
			c.hello()
			c.rawWrite(tc.frame, 1<<16)
			c.expectClose(tc.code)
		})
	}
}

// A client's close is echoed with its code, and the session ends (1000)
// or stays resumable (4000), as with the goroutine reader.
func TestPolledReaderClientClose(t *testing.T) {
	for _, code := range []int{1000, 4000} {
		g := newTestGateway(t, Config{})
		c := g.dial(t, "")
		c.identify("tok-alice")
		c.rawWrite(maskedFrame(wsClose, true, binary.BigEndian.AppendUint16(nil, uint16(code))), 1<<10)
		c.expectClose(code)
		deadline := time.Now().Add(5 * time.Second)
		for {
			n := g.node.Sessions()
			if code == 1000 && n == 0 || code == 4000 && n == 1 && detached(g.node) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("close %d: %d sessions left", code, n)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
}

func TestIsHeartbeat(t *testing.T) {
	yes := []string{`{"op":1,"d":null}`, `{"op":1,"d":42}`, `{"d":7,"op":1}`, ` { "op" : 1 , "d" : -3 } `, "{\"op\":1,\n\"d\":0}"}
	no := []string{`{"op":1}`, `{"op":1,"d":"x"}`, `{"op":2,"d":1}`, `{"op":1,"d":1,"s":2}`, `{"op":1,"op":1}`, `{"op":1,"d":01}`,
		`{"op":1,"d":1}x`, `{"op":11,"d":1}`, `{"op":1,"d":1234567890123456789}`, `[]`, ``, `{"op":1,"d":nul}`}
	for _, s := range yes {
		if !isHeartbeat([]byte(s)) {
			t.Errorf("isHeartbeat(%s) = false", s)
		}
		if f, err := decodeFrame([]byte(s)); err != nil || f.Op != OpHeartbeat {
			t.Errorf("decodeFrame(%s) disagrees: %v %v", s, f.Op, err)
		}
	}
	for _, s := range no {
		if isHeartbeat([]byte(s)) {
			t.Errorf("isHeartbeat(%s) = true", s)
		}
	}
}

// detached reports whether the node's only session has no connection.
func detached(n *Node) bool {
	ss := n.snapshot()
	if len(ss) != 1 {
		return false
	}
	ss[0].mu.Lock()
	defer ss[0].mu.Unlock()
	return ss[0].conn == nil
}

// The goroutine reader (Config.GoroutineReader, and connections that are
// not plain TCP) still identifies, heartbeats and echoes a close.
func TestGoroutineReader(t *testing.T) {
	g := newTestGateway(t, Config{GoroutineReader: true})
	c := g.dial(t, "")
	c.identify("tok-alice")
	c.send(`{"op":1,"d":1}`)
	if f := c.read(); f.Op != OpHeartbeatACK {
		t.Fatalf("op %d, want heartbeat ACK", f.Op)
	}
	g.node.cmu.Lock()
	for cn := range g.node.conns {
		if cn.polled {
			t.Error("connection polled although Config.GoroutineReader is set")
		}
	}
	g.node.cmu.Unlock()
	c.rawWrite(maskedFrame(wsClose, true, binary.BigEndian.AppendUint16(nil, 4000)), 1<<10)
	c.expectClose(4000)
}
