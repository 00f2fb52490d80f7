package gatewayrole

import (
	"context"
	"encoding/json"
	"log/slog"
	"slices"
	"testing"

	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/event"
)

// recordSink records the batches handed on.
type recordSink struct{ got []event.Batch }

func (r *recordSink) Deliver(_ context.Context, _ string, b event.Batch) { r.got = append(r.got, b) }

// A gateway node's index answers the directory for its sessions by user,
// and a GUILD_DELETE that takes a guild from a session (not an outage)
// makes the node stop following that guild for it.
func TestGatewaySessionIndexAndLeaving(t *testing.T) {
	b := newRingBackend(nil, nil, nil, nil, 0, nil, slog.New(slog.DiscardHandler))
	s1 := event.Session{ID: "s1", UserID: 7, Node: "gw-1"}
	s2 := event.Session{ID: "s2", UserID: 7, Node: "gw-1"}
	s3 := event.Session{ID: "s3", UserID: 8, Node: "gw-1"}
	for _, s := range []event.Session{s1, s2, s3} {
		b.users.put(s)
		b.bySess[s.ID] = []snowflake.ID{100, 200}
		for _, g := range []snowflake.ID{100, 200} {
			if b.byGuild[g] == nil {
				b.byGuild[g] = map[event.SessionID]*subscription{}
			}
			b.byGuild[g][s.ID] = &subscription{s: s, ok: true}
		}
	}
	got := b.UserSessions(context.Background(), []snowflake.ID{7})
	if len(got) != 2 || !slices.ContainsFunc(got, func(s event.Session) bool { return s.ID == "s1" }) ||
		!slices.ContainsFunc(got, func(s event.Session) bool { return s.ID == "s2" }) {
		t.Fatalf("sessions of user 7: %+v", got)
	}
	b.users.remove("s2")
	if got := b.UserSessions(context.Background(), []snowflake.ID{7, 8}); len(got) != 2 {
		t.Fatalf("after s2 ended: %+v", got)
	}

	next := &recordSink{}
	sink := leavingSink{next: next, backend: b}
	sink.Deliver(context.Background(), "gw-1", event.Batch{Type: "GUILD_DELETE",
		Payloads: []json.RawMessage{json.RawMessage(`{"id":"100","unavailable":false}`), json.RawMessage(`{"id":"200","unavailable":true}`)},
		Targets:  []event.Target{{Session: "s1", Variant: 0}, {Session: "s3", Variant: 1}}})
	if len(next.got) != 1 {
		t.Fatalf("the batch was not handed on: %d", len(next.got))
	}
	if _, ok := b.byGuild[100]["s1"]; ok || slices.Contains(b.bySess["s1"], 100) {
		t.Fatal("s1 still follows guild 100 after its GUILD_DELETE")
	}
	if _, ok := b.byGuild[200]["s3"]; !ok {
		t.Fatal("an unavailable guild (an outage) was dropped")
	}
	if _, ok := b.byGuild[100]["s3"]; !ok {
		t.Fatal("another session's guild was dropped")
	}
}
