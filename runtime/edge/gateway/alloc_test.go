package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"syscall"
	"testing"
	"unsafe"

	"github.com/concord-chat/concord/runtime/domain/event"
)

// socketSessions attaches n sessions to real loopback TCP sockets whose
// client ends are drained by reader goroutines (a fixed buffer each, so
// they allocate nothing), and returns a batch targeting all of them.
func socketSessions(tb testing.TB, node *Node, n int, comp compression) event.Batch {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer ln.Close()
	batch := event.Batch{Type: "MESSAGE_CREATE", Payloads: []json.RawMessage{json.RawMessage(`{"id":"1","channel_id":"2","content":"hello, world","author":{"id":"3","username":"alice"}}`)}}
	for i := range n {
		cl, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			tb.Fatal(err)
		}
		sv, err := ln.Accept()
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() { cl.Close(); sv.Close() })
		go func() { _, _ = io.Copy(io.Discard, struct{ io.Reader }{cl}) }()
		c := newConn(node, nil, 10, comp, "")
		c.nc = sv
		raw, err := sv.(syscall.Conn).SyscallConn()
		if err != nil {
			tb.Fatal(err)
		}
		c.setRaw(raw)
		s := &session{node: node, info: event.Session{ID: event.SessionID(fmt.Sprintf("%032x", i))}, conn: c}
		node.addSession(s)
		batch.Targets = append(batch.Targets, event.Target{Session: s.info.ID})
	}
	return batch
}

// Delivering a batch allocates its shared body and nothing per session:
// stamping, the replay buffer and the socket write (each an inline
// non-blocking write to an idle socket) reuse what they hold. Replay
// buffers are first filled to their bound, the steady state.
func TestDeliverAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts mean nothing under the race detector (sync.Pool drops items at random, more escapes); run without -race")
	}
	for _, tc := range []struct {
		name string
		comp compression
		n    int
	}{
		{"none/100", compressNone, 100},
		{"none/600", compressNone, 600},
		{"zlib-stream/100", compressStream, 100},
		{"zstd-stream/100", compressZstdStream, 100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			node, err := NewNode(Config{Node: testNode, ReplayMaxEvents: 32}, idleBackend{})
			if err != nil {
				t.Fatal(err)
			}
			defer node.Close()
			batch := socketSessions(t, node, tc.n, tc.comp)
			for range 100 {
				node.Deliver(context.Background(), testNode, batch)
			}
			allocs := testing.AllocsPerRun(50, func() {
				node.Deliver(context.Background(), testNode, batch)
			})
			// One for the batch's body. (AllocsPerRun runs with
			// GOMAXPROCS 1, so Deliver does not split the batch over
			// goroutines here.)
			const limit = 1.0
			t.Logf("%.1f allocations per batch of %d deliveries", allocs, tc.n)
			if allocs > limit {
				t.Fatalf("%.1f allocations per batch of %d deliveries, want at most %v (none per delivery)", allocs, tc.n, limit)
			}
		})
	}
}

// BenchmarkDeliverSockets is Deliver to idle sessions over real loopback
// sockets: stamp, replay buffer, encode and one non-blocking write each.
//
//	go test -run '^$' -bench DeliverSockets -benchmem ./runtime/edge/gateway/
func BenchmarkDeliverSockets(b *testing.B) {
	for _, comp := range []compression{compressNone, compressStream, compressZstdStream} {
		b.Run(fmt.Sprintf("comp=%d", comp), func(b *testing.B) {
			node, err := NewNode(Config{Node: testNode, ReplayMaxEvents: 32}, idleBackend{})
			if err != nil {
				b.Fatal(err)
			}
			defer node.Close()
			const n = 200
			batch := socketSessions(b, node, n, comp)
			for range 100 { // compression contexts made, replay buffers full
				node.Deliver(context.Background(), testNode, batch)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				node.Deliver(context.Background(), testNode, batch)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/delivery")
		})
	}
}

// BenchmarkDeliverManySockets is Deliver to 8,000 idle sessions on real
// loopback sockets, uncompressed: enough sessions that their state no
// longer sits in cache between batches, as at a real node's scale. With
// GOMAXPROCS 1 (one goroutine writes every socket) and a CPU profile,
// Deliver's own work is deliverTargets less the system call:
//
//	GOMAXPROCS=1 taskset -c 0 go test -run '^$' -bench DeliverManySockets -benchtime 150x -cpuprofile /tmp/d.prof ./runtime/edge/gateway/
//	go tool pprof -top -focus=deliverTargets /tmp/d.prof | grep -E 'deliverTargets$|RawSyscall6$'
func BenchmarkDeliverManySockets(b *testing.B) {
	const n = 8000 // two descriptors each, under the 20,000 a process may hold here
	node, err := NewNode(Config{Node: testNode, ReplayMaxEvents: 32}, idleBackend{})
	if err != nil {
		b.Fatal(err)
	}
	defer node.Close()
	batch := socketSessions(b, node, n, compressNone)
	for range 50 {
		node.Deliver(context.Background(), testNode, batch)
	}
	var r0, r1 syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &r0)
	b.ResetTimer()
	for range b.N {
		node.Deliver(context.Background(), testNode, batch)
	}
	b.StopTimer()
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &r1)
	d := float64(b.N * n)
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/d, "ns/delivery")
	// The process's: the reader goroutines draining the client ends too.
	b.ReportMetric(float64(r1.Utime.Nano()-r0.Utime.Nano())/d, "user-ns/delivery")
	b.ReportMetric(float64(r1.Stime.Nano()-r0.Stime.Nano())/d, "sys-ns/delivery")
}

// The fields a delivery reads lie in the first two cache lines of the
// session and of its connection, which deliverTargets warms for a chunk
// before writing (session.warm). A field added above them, or one of
// them moved down, spreads a delivery over more lines: the cost the
// chunking measured away (docs/benchmarks.md, issue 27, session 19).
// Where an object starts within its line is the allocator's: a conn is
// big enough to carry an 8-byte type header before it.
func TestDeliveryFieldsLeadTheStructs(t *testing.T) {
	type field struct {
		name      string
		off, size uintptr
	}
	var s session
	var c conn
	sessionFields := []field{
		{"mu", unsafe.Offsetof(s.mu), unsafe.Sizeof(s.mu)},
		{"seq", unsafe.Offsetof(s.seq), unsafe.Sizeof(s.seq)},
		{"conn", unsafe.Offsetof(s.conn), unsafe.Sizeof(s.conn)},
		{"ended", unsafe.Offsetof(s.ended), 1},
		{"frozen", unsafe.Offsetof(s.frozen), 1},
		{"incoming", unsafe.Offsetof(s.incoming), 1},
		{"replay", unsafe.Offsetof(s.replay), unsafe.Sizeof(s.replay)},
		{"node", unsafe.Offsetof(s.node), unsafe.Sizeof(s.node)},
	}
	connFields := []field{
		{"qmu", unsafe.Offsetof(c.qmu), unsafe.Sizeof(c.qmu)},
		{"busy", unsafe.Offsetof(c.busy), 1},
		{"held", unsafe.Offsetof(c.held), 1},
		{"closing", unsafe.Offsetof(c.closing), 1},
		{"comp", unsafe.Offsetof(c.comp), unsafe.Sizeof(c.comp)},
		{"raw", unsafe.Offsetof(c.raw), unsafe.Sizeof(c.raw)},
		{"node", unsafe.Offsetof(c.node), unsafe.Sizeof(c.node)},
		{"fd", unsafe.Offsetof(c.fd), unsafe.Sizeof(c.fd)},
	}
	check := func(what string, addr uintptr, fields []field) {
		t.Helper()
		for _, f := range fields {
			if end := addr%64 + f.off + f.size; end > 128 {
				t.Errorf("%s.%s ends %d bytes into the line the %s starts in (allocated at %#x), want within two lines (128)", what, f.name, end, what, addr)
			}
		}
	}
	for range 64 {
		ps, pc := new(session), new(conn)
		heapSink = append(heapSink, ps, pc) // on the heap, as the node's are
		check("session", uintptr(unsafe.Pointer(ps)), sessionFields)
		check("conn", uintptr(unsafe.Pointer(pc)), connFields)
	}
	heapSink = nil
	t.Logf("session %d bytes, conn %d bytes", unsafe.Sizeof(s), unsafe.Sizeof(c))
}

// heapSink makes TestDeliveryFieldsLeadTheStructs' structs escape.
var heapSink []any
