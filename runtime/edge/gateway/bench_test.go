package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/concord-chat/concord/runtime/domain/event"
)

// BenchmarkDeliverStamp measures Deliver's own work per delivery (lookup,
// sequence stamp, replay buffer) for detached sessions: no socket writes.
// test/load measures the whole path over real WebSockets.
func BenchmarkDeliverStamp(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("sessions=%d", n), func(b *testing.B) {
			node, err := NewNode(Config{Node: testNode}, newFakeBackend())
			if err != nil {
				b.Fatal(err)
			}
			batch := event.Batch{Type: "MESSAGE_CREATE", Payloads: []json.RawMessage{json.RawMessage(`{"content":"hello"}`)}}
			for i := range n {
				s := &session{node: node, info: event.Session{ID: event.SessionID(fmt.Sprintf("%032x", i))}}
				node.addSession(s)
				batch.Targets = append(batch.Targets, event.Target{Session: s.info.ID})
			}
			b.ResetTimer()
			for range b.N {
				node.Deliver(context.Background(), testNode, batch)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/delivery")
		})
	}
}
