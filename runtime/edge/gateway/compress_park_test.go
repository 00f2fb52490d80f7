package gateway

import (
	"bytes"
	"compress/zlib"
	"encoding/json"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/klauspost/compress/flate"
	"github.com/klauspost/compress/zstd"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/concord-chat/concord/runtime/domain/event"
)

// decodeStream decodes the concatenation of msgs, one transport stream
// that has not ended, with one decoder of the mode (Go's compress/zlib
// for zlib-stream, an independent implementation from the encoder's; the
// klauspost decoder for zstd-stream), and returns its output so far.
func decodeStream(t testing.TB, comp compression, msgs [][]byte) []byte {
	t.Helper()
	in := bytes.NewReader(bytes.Join(msgs, nil))
	var r io.Reader
	switch comp {
	case compressStream:
		zr, err := zlib.NewReader(in)
		if err != nil {
			t.Fatalf("zlib header: %v", err)
		}
		r = zr
	case compressZstdStream:
		zr, err := zstd.NewReader(in, zstd.WithDecoderConcurrency(1))
		if err != nil {
			t.Fatal(err)
		}
		defer zr.Close()
		r = zr
	}
	out, err := io.ReadAll(r)
	if err != nil && err != io.ErrUnexpectedEOF {
		t.Fatalf("decode: %v after %q", err, out)
	}
	return out
}

// parkScript drives one stream context: each step sends a dispatch or a
// control frame, or parks the encoder. It returns the messages and the
// bytes a decoder must produce after each.
type parkStep struct {
	park bool
	ctl  bool
	msg  []byte
}

func runParkScript(t testing.TB, comp compression, steps []parkStep) (msgs [][]byte, want [][]byte, firstAfterPark []int) {
	t.Helper()
	sc := newStreamCompressor(comp)
	zs, isZstd := sc.(*zstdStream)
	var acc []byte
	parkedSince := -1
	for _, st := range steps {
		if st.park {
			if sc.park() || parkedSince < 0 {
				parkedSince = len(msgs)
			}
			continue
		}
		// A zstd context that re-acquires an encoder inside its open frame
		// decodes to zstdRepResetSpaces spaces before the message.
		respace := isZstd && zs.started && sc.parked() && (!st.ctl)
		var z []byte
		var err error
		if st.ctl {
			z, err = sc.control(st.msg)
		} else {
			z, err = sc.compress(st.msg)
		}
		if err != nil {
			t.Fatal(err)
		}
		if parkedSince >= 0 && parkedSince == len(msgs) {
			firstAfterPark = append(firstAfterPark, len(msgs))
		}
		if respace {
			acc = append(acc, bytes.Repeat([]byte{' '}, zstdRepResetSpaces)...)
		}
		acc = append(acc, st.msg...)
		msgs = append(msgs, bytes.Clone(z))
		want = append(want, bytes.Clone(acc))
	}
	return msgs, want, firstAfterPark
}

// checkParkScript decodes msgs with one decoder, message by message, and
// the part after each park on its own: a fresh decoder (raw deflate with
// no history; a zstd frame header and nothing before) must decode it to
// the same bytes, which proves the blocks after a park refer to nothing
// the stream carried before it.
func checkParkScript(t testing.TB, comp compression, msgs, want [][]byte, after []int) {
	t.Helper()
	for i := range msgs {
		got := decodeStream(t, comp, msgs[:i+1])
		if !bytes.Equal(got, want[i]) {
			t.Fatalf("after message %d: decoded %q, want %q", i, got, want[i])
		}
	}
	for _, k := range after {
		if k == 0 {
			continue
		}
		prefix := want[k-1]
		tail := bytes.Join(msgs[k:], nil)
		var got []byte
		var err error
		switch comp {
		case compressStream:
			got, err = io.ReadAll(flate.NewReader(bytes.NewReader(tail)))
		case compressZstdStream:
			hl, herr := zstdFrameHeaderLen(msgs[0])
			if herr != nil {
				t.Fatal(herr)
			}
			zr, zerr := zstd.NewReader(bytes.NewReader(append(bytes.Clone(msgs[0][:hl]), tail...)), zstd.WithDecoderConcurrency(1))
			if zerr != nil {
				t.Fatal(zerr)
			}
			got, err = io.ReadAll(zr)
			zr.Close()
		}
		if err != nil && err != io.ErrUnexpectedEOF {
			t.Fatalf("the messages from %d on, decoded alone: %v", k, err)
		}
		if wantTail := want[len(want)-1][len(prefix):]; !bytes.Equal(got, wantTail) {
			t.Fatalf("the messages from %d on, decoded alone: %q, want %q", k, got, wantTail)
		}
	}
}

// TestStreamParkContinues sends messages, parks the encoder (as an idle
// session does), sends control frames while parked and dispatches after,
// and decodes the whole stream with one decoder.
func TestStreamParkContinues(t *testing.T) {
	steps := parkTestSteps()
	for _, comp := range []compression{compressStream, compressZstdStream} {
		name := map[compression]string{compressStream: "zlib-stream", compressZstdStream: "zstd-stream"}[comp]
		t.Run(name, func(t *testing.T) {
			msgs, want, after := runParkScript(t, comp, steps)
			if len(after) != 4 {
				t.Fatalf("%d parks seen, want 4", len(after))
			}
			checkParkScript(t, comp, msgs, want, after)
		})
	}
}

// parkTestSteps: four rounds of five dispatches and a park, heartbeat ACKs
// while parked in two of them, a message of runs after the later parks,
// and one last dispatch.
func parkTestSteps() []parkStep {
	msg := func(i int) []byte {
		return fmt.Appendf(nil, `{"t":"MESSAGE_CREATE","s":%d,"op":0,"d":{"id":"%d","content":"the same words over and over, the same words over and over"}}`, i, 1000+i)
	}
	ack := []byte(`{"op":11,"d":null}`)
	// runs: a fresh encoder codes these with repeat offsets from its very
	// first sequences (1, then 4, then 8), which decode wrongly unless the
	// decoder's repeat offsets were reset to a frame's initial ones.
	runs := []byte(`{"d":"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxabcdabcdabcdabcdabcdabcd1234567812345678123456781234567800000000"}`)
	var steps []parkStep
	n := 0
	for round := range 4 {
		for range 5 {
			n++
			steps = append(steps, parkStep{msg: msg(n)})
		}
		steps = append(steps, parkStep{park: true})
		if round%2 == 0 {
			steps = append(steps, parkStep{ctl: true, msg: ack}, parkStep{ctl: true, msg: ack})
		}
		if round >= 2 {
			steps = append(steps, parkStep{msg: runs})
		}
	}
	n++
	return append(steps, parkStep{msg: msg(n)})
}

// FuzzStreamPark runs arbitrary sequences of dispatches, control frames
// and parks through both stream modes and decodes them with one decoder.
func FuzzStreamPark(f *testing.F) {
	f.Add([]byte("\x08{\"a\":1}\x02\x05{\"op\":11}\x08{\"a\":1}"))
	f.Add(bytes.Repeat([]byte("\x10abcdabcdabcdabcd\x02"), 8))
	f.Fuzz(func(t *testing.T, data []byte) {
		var steps []parkStep
		for len(data) > 0 && len(steps) < 64 {
			op := data[0]
			data = data[1:]
			if op&3 == 2 {
				steps = append(steps, parkStep{park: true})
				continue
			}
			n := min(int(op>>2), len(data))
			if n == 0 {
				continue
			}
			steps = append(steps, parkStep{ctl: op&3 == 1, msg: data[:n]})
			data = data[n:]
		}
		if len(steps) == 0 {
			return
		}
		for _, comp := range []compression{compressStream, compressZstdStream} {
			msgs, want, after := runParkScript(t, comp, steps)
			if len(msgs) == 0 {
				continue
			}
			checkParkScript(t, comp, msgs, want, after)
		}
	})
}

// parkedSession is what a stream-compressed session put on the wire across
// idle parks, and the payloads its messages must decode to.
type parkedSession struct {
	msgs [][]byte
	want []string
}

// waitParks waits until the node has parked at least n encoders: the
// connection went idle for Config.CompressIdle and the wheel took its
// encoder.
func waitParks(t *testing.T, g *testGateway, n float64) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for testutil.ToFloat64(g.node.metrics.compressorParks) < n {
		if time.Now().After(deadline) {
			t.Fatalf("no idle park within 5 s (%v parks, want %v)", testutil.ToFloat64(g.node.metrics.compressorParks), n)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// recordParkedSession runs a session whose encoder the node parks while it
// is idle: READY and three dispatches, idle until parked, a heartbeat
// answered while parked (the ACK must not take an encoder), three more
// dispatches, idle until parked again, one more dispatch.
func recordParkedSession(t *testing.T, mode string) parkedSession {
	t.Helper()
	g := newTestGateway(t, Config{CompressIdle: 20 * time.Millisecond})
	c := g.dial(t, "?v=10&encoding=json&compress="+mode)
	var rec parkedSession
	rec.msgs = append(rec.msgs, c.readBinary()) // HELLO
	c.send(identifyFrame("tok-alice", 1, nil))
	rec.msgs = append(rec.msgs, c.readBinary())
	sid := sessionOfStream(t, parseCompress(mode), rec.msgs)
	rec.want = []string{"HELLO", "READY"}
	payload := func(i int) string {
		return fmt.Sprintf(`{"id":"%d","content":"the same words over and over, the same words over and over"}`, i)
	}
	for i := range 3 {
		g.deliver("MESSAGE_CREATE", payload(i), event.SessionID(sid))
		rec.msgs = append(rec.msgs, c.readBinary())
		rec.want = append(rec.want, payload(i))
	}
	waitParks(t, g, 1)
	parks := testutil.ToFloat64(g.node.metrics.compressorParks)
	c.send(map[string]any{"op": OpHeartbeat, "d": 5})
	rec.msgs = append(rec.msgs, c.readBinary())
	rec.want = append(rec.want, "HEARTBEAT_ACK")
	if got := testutil.ToFloat64(g.node.metrics.compressorsActive); got != 0 {
		t.Fatalf("a heartbeat ACK to a parked connection took an encoder (%v active)", got)
	}
	for i := 3; i < 6; i++ {
		g.deliver("MESSAGE_CREATE", payload(i), event.SessionID(sid))
		rec.msgs = append(rec.msgs, c.readBinary())
		rec.want = append(rec.want, payload(i))
	}
	waitParks(t, g, parks+1)
	g.deliver("MESSAGE_CREATE", payload(6), event.SessionID(sid))
	rec.msgs = append(rec.msgs, c.readBinary())
	rec.want = append(rec.want, payload(6))
	return rec
}

// sessionOfStream decodes the session id from READY, the last of msgs.
func sessionOfStream(t *testing.T, comp compression, msgs [][]byte) string {
	t.Helper()
	frames := decodeFrames(t, decodeStream(t, comp, msgs))
	var r readyD
	if err := jsonUnmarshal(frames[len(frames)-1].D, &r); err != nil || r.SessionID == "" {
		t.Fatalf("READY %s: %v", frames[len(frames)-1].D, err)
	}
	return r.SessionID
}

// decodeFrames splits decoded stream output into its JSON payloads.
func decodeFrames(t *testing.T, out []byte) []wireFrame {
	t.Helper()
	var frames []wireFrame
	dec := json.NewDecoder(bytes.NewReader(out))
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

// TestStreamParkThroughNode: through a real socket and the node's idle
// check, every message of a parked-and-resumed stream completes exactly
// one more payload for one decoder.
func TestStreamParkThroughNode(t *testing.T) {
	for _, mode := range []string{"zlib-stream", "zstd-stream"} {
		t.Run(mode, func(t *testing.T) {
			rec := recordParkedSession(t, mode)
			comp := parseCompress(mode)
			for i := range rec.msgs {
				frames := decodeFrames(t, decodeStream(t, comp, rec.msgs[:i+1]))
				if len(frames) != i+1 {
					t.Fatalf("the first %d messages decode to %d payloads", i+1, len(frames))
				}
				if !frames[i].matches(rec.want[i]) {
					t.Fatalf("message %d: op %d t %v d %s, want %s", i, frames[i].Op, deref(frames[i].T), frames[i].D, rec.want[i])
				}
			}
		})
	}
}

// repScramble is three hand-made zstd blocks that leave the decoder's
// repeat offsets at 5, 6, 7 (not a frame's initial 1, 4, 8): 8 literals
// "ABCDEFGH", then matches at new offsets 7, 6 and 5, all length 3, each
// block one sequence in RLE mode (as zstdRepReset). Output:
// "ABCDEFGHBCDFGHCDF".
var repScramble = []byte{
	0x7c, 0, 0, 0x40, 'A', 'B', 'C', 'D', 'E', 'F', 'G', 'H', 0x01, 0x54, 0x08, 0x03, 0x00, 0x0a,
	0x3c, 0, 0, 0x00, 0x01, 0x54, 0x00, 0x03, 0x00, 0x09,
	0x3c, 0, 0, 0x00, 0x01, 0x54, 0x00, 0x03, 0x00, 0x08,
}

// repProbe is a block that reads the third repeat offset: 8 literals
// "12345678", then one match of length 3 at repeat offset 3 (offset value
// 3 with a non-zero literal length). It decodes to "12345678123" when the
// decoder's third repeat offset is 8, as at a frame's start.
var repProbe = []byte{
	0x7c, 0, 0, 0x40, '1', '2', '3', '4', '5', '6', '7', '8',
	// LL code 8, OF code 1 (offset values 2-3, one extra bit), ML code 0
	0x01, 0x54, 0x08, 0x01, 0x00,
	// marker bit 1, extra bit 1: offset value 3
	0x03,
}

// zstdRepResetStream is a zstd stream that scrambles the repeat offsets,
// resets them with zstdRepReset, probes them, and continues with a fresh
// encoder's blocks for msg. Its output must be repResetWant(msg).
func zstdRepResetStream(t testing.TB, msg []byte) []byte {
	t.Helper()
	var out bytes.Buffer
	zw, err := newZstdEncoder(&out)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := zw.Write(msg); err != nil {
		t.Fatal(err)
	}
	if err := zw.Flush(); err != nil {
		t.Fatal(err)
	}
	fresh := out.Bytes()
	hl, err := zstdFrameHeaderLen(fresh)
	if err != nil {
		t.Fatal(err)
	}
	s := bytes.Clone(fresh[:hl])
	s = append(s, repScramble...)
	s = append(s, zstdRepReset...)
	s = append(s, repProbe...)
	return append(s, fresh[hl:]...)
}

func repResetWant(msg []byte) []byte {
	return append([]byte("ABCDEFGHBCDFGHCDF                 12345678123"), msg...)
}

// TestZstdRepReset checks the repeat-offset reset on its own: after blocks
// that leave the decoder's repeat offsets anywhere, zstdRepReset puts them
// back to 1, 4, 8 (the probe reads the third), and a fresh encoder's
// blocks follow it correctly.
func TestZstdRepReset(t *testing.T) {
	msg := []byte(`{"d":"xxxxxxxxxxxxxxxxxxxxxxxxabcdabcdabcdabcd1234567812345678123456780000"}`)
	got := decodeStream(t, compressZstdStream, [][]byte{zstdRepResetStream(t, msg)})
	if want := repResetWant(msg); !bytes.Equal(got, want) {
		t.Fatalf("decoded %q, want %q", got, want)
	}
}
