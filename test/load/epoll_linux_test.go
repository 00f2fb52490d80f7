//go:build linux

package load

import (
	"bytes"
	"encoding/binary"
	"testing"
)

// serverFrame is an unmasked WebSocket frame, as a server sends it.
func serverFrame(op byte, fin bool, payload []byte) []byte {
	b0 := op
	if fin {
		b0 |= 0x80
	}
	var h []byte
	switch n := len(payload); {
	case n < 126:
		h = []byte{b0, byte(n)}
	case n < 1<<16:
		h = binary.BigEndian.AppendUint16([]byte{b0, 126}, uint16(n))
	default:
		h = binary.BigEndian.AppendUint64([]byte{b0, 127}, uint64(n))
	}
	return append(h, payload...)
}

// The epoll reader's frame scan gives back every message whole, however
// the bytes are split across reads: each length form, a fragmented
// message, a frame cut inside its header.
func TestFeedSplitsAndJoins(t *testing.T) {
	small, mid, big := []byte(`{"round":1,"ts":5}`), bytes.Repeat([]byte("m"), 300), bytes.Repeat([]byte("b"), 70000)
	var wire []byte
	wire = append(wire, serverFrame(0x1, true, small)...)
	wire = append(wire, serverFrame(0x1, true, mid)...)
	wire = append(wire, serverFrame(0x2, true, big)...)
	wire = append(wire, serverFrame(0x1, false, []byte("frag"))...)
	wire = append(wire, serverFrame(0x9, true, []byte("ping"))...) // control frames may interleave
	wire = append(wire, serverFrame(0x0, true, []byte("ment"))...)
	want := [][]byte{small, mid, big, []byte("fragment")}
	for _, step := range []int{1, 3, 7, 125, 4096, len(wire)} {
		c := &clientConn{}
		var got [][]byte
		for p := wire; len(p) > 0; {
			k := min(step, len(p))
			if _, err := c.feed(p[:k], 0, func(_ *clientConn, m []byte, _ int64) bool {
				got = append(got, bytes.Clone(m))
				return false
			}); err != nil {
				t.Fatalf("step %d: %v", step, err)
			}
			p = p[k:]
		}
		if len(got) != len(want) {
			t.Fatalf("step %d: %d messages, want %d", step, len(got), len(want))
		}
		for i := range want {
			if !bytes.Equal(got[i], want[i]) {
				t.Fatalf("step %d: message %d is %.20q (%d bytes), want %.20q (%d bytes)", step, i, got[i], len(got[i]), want[i], len(want[i]))
			}
		}
		if len(c.rest) != 0 {
			t.Fatalf("step %d: %d bytes left over", step, len(c.rest))
		}
	}
	c := &clientConn{}
	if _, err := c.feed([]byte{0x81, 0x85, 1, 2, 3, 4, 'x'}, 0, nil); err == nil {
		t.Fatal("a masked frame from the server was taken")
	}
}
