package gateway

import (
	"bytes"
	"io"
	"net"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"unsafe"
)

// A socket's due frames are gathered as segments of one write: the
// envelopes in the scratch buffer, merged where they touch, and each
// shared payload referenced where it lies, never copied.
func TestWriteScratchSegments(t *testing.T) {
	d := []byte(`{"content":"` + strings.Repeat("x", 3*sharedCopyBelow) + `"}`)
	shared := &body{t: "MESSAGE_CREATE", d: d}
	small := &body{t: "TYPING_START", d: []byte(`{"user_id":"1"}`)}
	ctl := &body{raw: controlFrame(OpHeartbeatACK, "null")}
	frames := []frame{{seq: 7, b: shared}, {seq: 8, b: shared}, {seq: 9, b: small}, {b: ctl}, {seq: 10, b: shared}}

	var want []byte
	for _, f := range frames {
		if f.b.raw != nil {
			want = appendFrameHeader(want, wsText, len(f.b.raw))
			want = append(want, f.b.raw...)
			continue
		}
		want = appendFrameHeader(want, wsText, dispatchSize(f.b.t, f.seq, f.b.d))
		want = appendDispatch(want, f.b.t, f.seq, f.b.d)
	}

	c := &conn{}
	ws := &writeScratch{buf: make([]byte, 0, 1024)} // as getScratch makes them
	for i := range frames {
		if err := c.appendFrame(ws, &frames[i], compressNone, true); err != nil {
			t.Fatal(err)
		}
	}
	if got := ws.appendTo(nil); !bytes.Equal(got, want) {
		t.Fatalf("segments join to\n%q\nwant\n%q", got, want)
	}
	if ws.total != len(want) {
		t.Fatalf("total %d, want %d", ws.total, len(want))
	}
	aliased := 0
	for _, s := range ws.segs {
		if unsafe.SliceData(s) == unsafe.SliceData(d) {
			if len(s) != len(d) {
				t.Fatalf("shared payload segment has %d bytes, want %d", len(s), len(d))
			}
			aliased++
		}
	}
	if aliased != 3 {
		t.Fatalf("the shared payload is referenced by %d segments, want 3 (one per frame carrying it, uncopied)", aliased)
	}
	// envelope, d, "}"+envelope, d, "}"+the small frame whole (its
	// payload is short, so copied)+the control frame, d, "}".
	if len(ws.segs) != 7 {
		t.Fatalf("%d segments, want 7: adjacent owned bytes must share one", len(ws.segs))
	}

	// A partial write leaves exactly the unwritten tail, wherever it cuts.
	for n := 0; n <= len(want); n += 13 {
		cp := &writeScratch{segs: append([][]byte(nil), ws.segs...), total: ws.total}
		cp.consume(n)
		if got := cp.appendTo(nil); !bytes.Equal(got, want[n:]) || cp.total != len(want)-n {
			t.Fatalf("after consuming %d bytes: %d left (total %d), want %d", n, len(got), cp.total, len(want)-n)
		}
	}
}

// writeBatch puts every queued frame on a real socket in order, byte for
// byte, through the writev path (the blocking one the writer goroutine
// uses), including batches larger than one write.
func TestWriteBatchWritev(t *testing.T) {
	node, err := NewNode(Config{Node: testNode}, idleBackend{})
	if err != nil {
		t.Fatal(err)
	}
	defer node.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	cl, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	sv, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer sv.Close()
	c := newConn(node, nil, 10, compressNone, "")
	c.nc = sv
	raw, err := sv.(syscall.Conn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	c.setRaw(raw)

	d := []byte(`{"content":"` + strings.Repeat("y", 1500) + `"}`)
	b := &body{t: "MESSAGE_CREATE", d: d}
	var batch []frame
	var want []byte
	pending := []byte("tail of an earlier frame")
	want = append(want, pending...)
	for i := range 300 { // ~460 KB: several writes of maxWriteBatch
		f := frame{seq: int64(i + 1), b: b}
		batch = append(batch, f)
		want = appendFrameHeader(want, wsText, dispatchSize(b.t, f.seq, d))
		want = appendDispatch(want, b.t, f.seq, d)
	}
	got := make(chan []byte)
	go func() {
		buf := make([]byte, len(want))
		n, _ := io.ReadFull(cl, buf)
		got <- buf[:n]
	}()
	if err := c.writeBatch(pending, batch, compressNone); err != nil {
		t.Fatal(err)
	}
	if g := <-got; !bytes.Equal(g, want) {
		t.Fatalf("client read %d bytes, want %d (first difference at %d)", len(g), len(want), firstDiff(g, want))
	}
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// BenchmarkWriteFrame is one dispatch written to an idle loopback socket
// the way writeNow does it, against the way it was done before: the
// frame assembled in one buffer (the payload copied) and written with
// one system call. Both use the same scratch and system call path, so the
// difference is the copy against the iovec entries. The process's user
// and system CPU per write are reported beside the wall time.
//
//	go test -run '^$' -bench WriteFrame -count 5 ./runtime/edge/gateway/
func BenchmarkWriteFrame(b *testing.B) {
	for _, size := range []int{256, 1024, 4096} {
		for _, mode := range []string{"copy", "writev"} {
			b.Run(mode+"/payload="+strconv.Itoa(size), func(b *testing.B) {
				ln, err := net.Listen("tcp", "127.0.0.1:0")
				if err != nil {
					b.Fatal(err)
				}
				defer ln.Close()
				cl, err := net.Dial("tcp", ln.Addr().String())
				if err != nil {
					b.Fatal(err)
				}
				defer cl.Close()
				sv, err := ln.Accept()
				if err != nil {
					b.Fatal(err)
				}
				defer sv.Close()
				go func() { _, _ = io.Copy(io.Discard, struct{ io.Reader }{cl}) }()
				raw, err := sv.(syscall.Conn).SyscallConn()
				if err != nil {
					b.Fatal(err)
				}
				c := &conn{nc: sv}
				c.setRaw(raw)
				bd := &body{t: "MESSAGE_CREATE", d: []byte(`{"content":"` + strings.Repeat("z", size-14) + `"}`)}
				ws := &writeScratch{buf: make([]byte, 0, 8192)}
				flat := &writeScratch{buf: make([]byte, 0, 8192)}
				var ru0, ru1 syscall.Rusage
				_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
				b.ResetTimer()
				for i := range b.N {
					f := frame{seq: int64(i + 1), b: bd}
					if err := c.appendFrame(ws, &f, compressNone, false); err != nil {
						b.Fatal(err)
					}
					w := ws
					if mode == "copy" {
						flat.buf = ws.appendTo(flat.buf[:0])
						flat.segs = append(flat.segs[:0], flat.buf)
						flat.total = len(flat.buf)
						w = flat
					}
					for w.total > 0 { // a full socket buffer: wait for the reader
						if _, err := c.tryWrite(w); err != nil {
							b.Fatal(err)
						}
					}
					ws.reset()
				}
				b.StopTimer()
				_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
				b.ReportMetric(float64(ru1.Utime.Nano()-ru0.Utime.Nano())/float64(b.N), "user-ns/op")
				b.ReportMetric(float64(ru1.Stime.Nano()-ru0.Stime.Nano())/float64(b.N), "sys-ns/op")
			})
		}
	}
}
