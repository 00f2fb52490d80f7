package transport_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/concord-chat/concord/runtime/domain/event"
	"github.com/concord-chat/concord/runtime/services/transport"
)

func batch(typ string, sessions ...string) event.Batch {
	b := event.Batch{Type: typ, Payloads: []json.RawMessage{json.RawMessage(`{"v":0}`), json.RawMessage(`{"v":1}`)}}
	for i, s := range sessions {
		b.Targets = append(b.Targets, event.Target{Session: event.SessionID(s), Variant: i % 2})
	}
	return b
}

func TestDeliverRoutesToTheNamedNode(t *testing.T) {
	a, sinkA, _ := gatewayNode(t, "gw-a")
	b, sinkB, _ := gatewayNode(t, "gw-b")
	dir := &staticDir{}
	dir.set(a)
	dir.set(b)
	c := transport.NewGatewayClient(transport.ClientConfig{}, dir)
	defer c.Close()
	ctx := context.Background()

	// Batches for each node arrive there, whole and in order.
	for i := range 50 {
		c.Deliver(ctx, "gw-a", batch(fmt.Sprintf("A%d", i), "s1", "s2", "s3"))
		c.Deliver(ctx, "gw-b", batch(fmt.Sprintf("B%d", i), "s9"))
	}
	for i := range 50 {
		d := sinkA.next(t)
		if d.node != "gw-a" || d.b.Type != fmt.Sprintf("A%d", i) {
			t.Fatalf("gw-a got %s for %s, want A%d", d.b.Type, d.node, i)
		}
		if len(d.b.Targets) != 3 || d.b.Targets[1] != (event.Target{Session: "s2", Variant: 1}) ||
			string(d.b.Payloads[d.b.Targets[1].Variant]) != `{"v":1}` {
			t.Fatalf("gw-a batch mangled: %+v", d.b)
		}
		d = sinkB.next(t)
		if d.node != "gw-b" || d.b.Type != fmt.Sprintf("B%d", i) || len(d.b.Targets) != 1 || d.b.Targets[0].Session != "s9" {
			t.Fatalf("gw-b got %+v for %s, want B%d", d.b, d.node, i)
		}
	}
	sinkA.none(t)
	sinkB.none(t)
}

// logRecords is a slog.Handler that hands records to a channel.
type logRecords chan slog.Record

func (l logRecords) Enabled(context.Context, slog.Level) bool { return true }
func (l logRecords) Handle(_ context.Context, r slog.Record) error {
	select {
	case l <- r:
	default:
	}
	return nil
}
func (l logRecords) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l logRecords) WithGroup(string) slog.Handler      { return l }

// await waits for a record with message msg whose attributes mention text.
func (l logRecords) await(t *testing.T, msg, text string, poke func()) {
	t.Helper()
	// The client learns of a refused stream only on a later send, so poke
	// until the record shows up (a poll with a deadline).
	deadline := time.After(10 * time.Second)
	for {
		poke()
		select {
		case <-time.After(20 * time.Millisecond):
		case r := <-l:
			if r.Message != msg {
				continue
			}
			found := false
			r.Attrs(func(a slog.Attr) bool {
				found = found || strings.Contains(a.Value.String(), text)
				return true
			})
			if found {
				return
			}
		case <-deadline:
			t.Fatalf("no %q log mentioning %q", msg, text)
		}
	}
}

func TestDeliverRejectedByTheWrongNode(t *testing.T) {
	x, sink, _ := gatewayNode(t, "gw-x")
	dir := &staticDir{}
	dir.set(x)
	// The directory's gw-a entry points at gw-x's server, which must
	// refuse gw-a's batches instead of handing them to its sessions.
	misrouted := x
	misrouted.Name = "gw-a"
	dir.set(misrouted)
	logs := make(logRecords, 64)
	c := transport.NewGatewayClient(transport.ClientConfig{Logger: slog.New(logs)}, dir)
	defer c.Close()
	ctx := context.Background()
	// The refusal ends the stream; the client sees it on its next send.
	logs.await(t, "deliver stream ended", "another node", func() {
		c.Deliver(ctx, "gw-a", batch("MISROUTED", "s1"))
	})
	c.Deliver(ctx, "gw-x", batch("ROUTED", "s1"))
	if d := sink.next(t); d.b.Type != "ROUTED" {
		t.Fatalf("gw-x delivered %s", d.b.Type)
	}
	sink.none(t)
}

func TestDeliverToADeadNodeFailsFastAndRecovers(t *testing.T) {
	a, sinkA, srvA := gatewayNode(t, "gw-a")
	dir := &staticDir{}
	dir.set(a)
	c := transport.NewGatewayClient(transport.ClientConfig{}, dir)
	defer c.Close()
	ctx := context.Background()
	c.Deliver(ctx, "gw-a", batch("FIRST", "s1"))
	if d := sinkA.next(t); d.b.Type != "FIRST" {
		t.Fatalf("got %s", d.b.Type)
	}
	srvA.Stop()
	// Every Deliver to the dead node returns promptly (dropping).
	start := time.Now()
	for range 20 {
		c.Deliver(ctx, "gw-a", batch("LOST", "s1"))
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("20 deliveries to a dead node took %s", d)
	}
	// The node comes back under the same name at a new address.
	b, sinkB, _ := gatewayNode(t, "gw-a")
	dir.set(b)
	c.Deliver(ctx, "gw-a", batch("AGAIN", "s1"))
	if d := sinkB.next(t); d.b.Type != "AGAIN" {
		t.Fatalf("restarted node got %s", d.b.Type)
	}
	// An unknown node is dropped without a connection attempt.
	start = time.Now()
	c.Deliver(ctx, "gw-nowhere", batch("X", "s1"))
	if d := time.Since(start); d > time.Second {
		t.Fatalf("delivery to an unknown node took %s", d)
	}
}
