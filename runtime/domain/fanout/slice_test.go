package fanout

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"

	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/event"
	"github.com/concord-chat/concord/runtime/domain/permissions"
)

type countSink struct {
	mu sync.Mutex
	n  int
}

func (c *countSink) Deliver(_ context.Context, _ string, b event.Batch) {
	c.mu.Lock()
	c.n += len(b.Targets)
	c.mu.Unlock()
}

// TestSliceBehind: a slice delivers nothing before its first snapshot nor
// for an entry produced at another state version than it holds, and
// delivers again once a snapshot caught it up.
func TestSliceBehind(t *testing.T) {
	ctx := context.Background()
	const guild, channel, user snowflake.ID = 100, 200, 300
	sink := &countSink{}
	x := NewSlice(guild, sink)
	ev := &Event{Type: "MESSAGE_CREATE", Payloads: []json.RawMessage{json.RawMessage(`{}`)}, Kind: KindChannel, Intent: 1 << 9, Channel: channel}
	if err := x.Apply(ctx, &Entry{Guild: guild, Event: ev}); !errors.Is(err, ErrBehind) {
		t.Fatalf("event before a snapshot: %v, want ErrBehind", err)
	}
	snapshot := &Entry{Guild: guild, Version: 5, Reset: true, Members: 2,
		Changes: []permissions.Change{
			{Op: permissions.OpRole, ID: guild, Bits: permissions.ViewChannel},
			{Op: permissions.OpOverwrites, ID: channel},
		},
		Add: []Slot{{Session: event.Session{ID: "s", UserID: user, Node: "n"}, Member: &permissions.Member{UserID: user}}},
	}
	if err := x.Apply(ctx, snapshot); err != nil {
		t.Fatal(err)
	}
	if err := x.Apply(ctx, &Entry{Guild: guild, Version: 5, Event: ev}); err != nil || sink.n != 1 {
		t.Fatalf("event at the slice's version: err %v, %d deliveries, want 1", err, sink.n)
	}
	// Version 7 changes: the slice missed version 6.
	hide := &Entry{Guild: guild, Version: 7, Changes: []permissions.Change{{Op: permissions.OpRole, ID: guild}}}
	if err := x.Apply(ctx, hide); !errors.Is(err, ErrBehind) {
		t.Fatalf("a gap in versions: %v, want ErrBehind", err)
	}
	if err := x.Apply(ctx, &Entry{Guild: guild, Version: 7, Event: ev}); !errors.Is(err, ErrBehind) || sink.n != 1 {
		t.Fatalf("event while behind: err %v, %d deliveries, want ErrBehind and none", err, sink.n)
	}
	snapshot.Version = 7
	snapshot.Changes[0].Bits = 0 // the state at version 7: @everyone cannot view
	if err := x.Apply(ctx, snapshot); err != nil {
		t.Fatal(err)
	}
	if err := x.Apply(ctx, &Entry{Guild: guild, Version: 7, Event: ev}); err != nil || sink.n != 1 {
		t.Fatalf("after catching up to a state that hides the channel: err %v, %d deliveries, want 1 (no new one)", err, sink.n)
	}
}
