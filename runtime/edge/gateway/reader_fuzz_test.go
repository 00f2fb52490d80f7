package gateway

import (
	"encoding/binary"
	"testing"
)

// FuzzConsume drives the polled reader's frame parser (conn.consume) with
// arbitrary client bytes, split in two reads, inline (the poller's
// goroutine) and not: no input panics, and the parser never claims to
// have used more bytes than it was given.
func FuzzConsume(f *testing.F) {
	f.Add(maskedFrame(wsText, true, []byte(`{"op":1,"d":null}`)), 3, false)
	f.Add(maskedFrame(wsText, true, []byte(`{"op":1,"d":null}`)), 0, true)
	f.Add(append(maskedFrame(9, true, []byte("ping")), maskedFrame(wsClose, true, []byte{3, 232})...), 7, true)
	f.Add(append(maskedFrame(wsText, false, []byte(`{"op":`)), maskedFrame(0, true, []byte(`1}`))...), 5, false)
	// A continuation whose 64-bit length wraps around the message so far.
	huge := make([]byte, 14)
	huge[0], huge[1] = 0x80, 0x80|127
	binary.BigEndian.PutUint64(huge[2:], ^uint64(0)-1)
	f.Add(append(maskedFrame(wsText, false, []byte(`{"op":1,`)), huge...), 0, false)
	n, err := NewNode(Config{Node: testNode, RateLimit: 6}, newFakeBackend())
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { n.Close() })
	f.Fuzz(func(t *testing.T, in []byte, split int, inline bool) {
		c := newConn(n, nil, 10, compressNone, "ws://127.0.0.1/gateway")
		defer c.cancel()
		if split < 0 || split > len(in) {
			split = len(in) / 2
		}
		rest := in
		for _, part := range [][]byte{in[:split], in} {
			buf := append([]byte(nil), part...)
			used, action, _ := c.consume(buf, inline)
			if used < 0 || used > len(buf) {
				t.Fatalf("used %d of %d bytes", used, len(buf))
			}
			if action == pumpEnd {
				break
			}
			rest = buf[used:]
		}
		_ = rest
		if c.sess != nil {
			c.sess.end(t.Context())
		}
	})
}
