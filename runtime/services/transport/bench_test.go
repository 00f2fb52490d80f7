package transport_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/concord-chat/concord/runtime/adapters/registry"
	"github.com/concord-chat/concord/runtime/domain/event"
	"github.com/concord-chat/concord/runtime/services/transport"
)

// countingSink counts batches and closes done at the want-th.
type countingSink struct {
	n    atomic.Int64
	want int64
	done chan struct{}
}

func (s *countingSink) Deliver(_ context.Context, _ string, b event.Batch) {
	if s.n.Add(1) == s.want {
		close(s.done)
	}
}

// benchBatch is one dispatch with a 1 KB payload for 100 sessions.
func benchBatch() event.Batch {
	payload := fmt.Sprintf(`{"id":"1234567890123456789","channel_id":"1234567890123456789","content":%q}`, strings.Repeat("x", 1024-80))
	b := event.Batch{Type: "MESSAGE_CREATE", Payloads: []json.RawMessage{json.RawMessage(payload)}}
	for i := range 100 {
		b.Targets = append(b.Targets, event.Target{Session: event.SessionID(fmt.Sprintf("session-%026d", i))})
	}
	return b
}

// BenchmarkDeliver compares delivering a 1 KB, 100-target batch to a
// gateway node's sink over loopback gRPC with calling the sink directly.
// The gRPC case waits until the server has handed every batch to its
// sink, so ns/op is end-to-end throughput.
func BenchmarkDeliver(b *testing.B) {
	batch := benchBatch()
	ctx := context.Background()
	b.Run("direct", func(b *testing.B) {
		sink := &countingSink{want: int64(b.N), done: make(chan struct{})}
		var s event.Sink = sink
		b.ReportAllocs()
		b.SetBytes(1024)
		for range b.N {
			s.Deliver(ctx, "gw-a", batch)
		}
		<-sink.done
	})
	b.Run("grpc", func(b *testing.B) {
		sink := &countingSink{done: make(chan struct{})}
		srv, err := transport.NewServer(transport.ServerConfig{}, transport.Services{Node: "gw-a", Gateway: sink})
		if err != nil {
			b.Fatal(err)
		}
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		go srv.Serve(lis)
		defer srv.Stop()
		dir := &staticDir{}
		dir.set(registry.Node{Name: "gw-a", Addr: lis.Addr().String()})
		c := transport.NewGatewayClient(transport.ClientConfig{}, dir)
		defer c.Close()
		// Warm the connection and stream up outside the timing.
		sink.want = 1
		c.Deliver(ctx, "gw-a", batch)
		<-sink.done
		sink.n.Store(0)
		sink.want = int64(b.N)
		sink.done = make(chan struct{})
		b.ReportAllocs()
		b.SetBytes(1024)
		b.ResetTimer()
		for range b.N {
			c.Deliver(ctx, "gw-a", batch)
		}
		<-sink.done
	})
}
