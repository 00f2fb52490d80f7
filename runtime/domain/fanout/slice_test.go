package fanout

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

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

// TestRelaySliceOwnership: a guild that moved to another guild node has a
// new owner, whose snapshot takes the relay's slice over; the old owner's
// entries that reach the relay later (its Drop included, on another
// stream) neither deliver nor drop the successor's slice, and the
// successor's Drop removes the slice from the relay.
func TestRelaySliceOwnership(t *testing.T) {
	ctx := context.Background()
	const guild, channel, user snowflake.ID = 100, 200, 300
	sink := &countSink{}
	r := NewRelay(sink)
	snapshot := func(owner string) *Entry {
		return &Entry{Guild: guild, Owner: owner, Version: 1, Reset: true, Members: 2,
			Changes: []permissions.Change{
				{Op: permissions.OpRole, ID: guild, Bits: permissions.ViewChannel},
				{Op: permissions.OpOverwrites, ID: channel},
			},
			Add: []Slot{{Session: event.Session{ID: "s", UserID: user, Node: "n"}, Member: &permissions.Member{UserID: user}}},
		}
	}
	ev := &Event{Type: "CHANNEL_UPDATE", Payloads: []json.RawMessage{json.RawMessage(`{}`)}, Kind: KindChannel, Channel: channel}
	if err := r.Apply(ctx, snapshot("old")); err != nil {
		t.Fatal(err)
	}
	if err := r.Apply(ctx, snapshot("new")); err != nil {
		t.Fatal(err)
	}
	if err := r.Apply(ctx, &Entry{Guild: guild, Owner: "old", Version: 1, Event: ev}); !errors.Is(err, ErrSuperseded) || sink.n != 0 {
		t.Fatalf("old owner's event after the takeover: err %v, %d deliveries, want ErrSuperseded and none", err, sink.n)
	}
	if err := r.Apply(ctx, &Entry{Guild: guild, Owner: "old", Version: 1, Drop: true}); !errors.Is(err, ErrSuperseded) {
		t.Fatalf("old owner's drop after the takeover: %v, want ErrSuperseded", err)
	}
	if got := r.Guilds(); len(got) != 1 || r.Slice(guild).Sessions() != 1 {
		t.Fatalf("the old owner's drop removed the successor's slice: guilds %v", got)
	}
	if err := r.Apply(ctx, &Entry{Guild: guild, Owner: "new", Version: 1, Event: ev}); err != nil || sink.n != 1 {
		t.Fatalf("successor's event: err %v, %d deliveries, want 1", err, sink.n)
	}
	if err := r.Apply(ctx, &Entry{Guild: guild, Owner: "new", Version: 1, Drop: true}); err != nil {
		t.Fatal(err)
	}
	if got := r.Guilds(); len(got) != 0 {
		t.Fatalf("slices after the owner dropped its own: %v, want none", got)
	}
	// A drop for a guild the relay holds nothing of leaves nothing behind.
	if err := r.Apply(ctx, &Entry{Guild: guild + 1, Owner: "x", Drop: true}); err != nil || len(r.Guilds()) != 0 {
		t.Fatalf("drop of an unknown guild: err %v, slices %v", err, r.Guilds())
	}
}

// typeSink counts the deliveries of one dispatch type.
type typeSink struct {
	typ string
	mu  sync.Mutex
	n   int
}

func (c *typeSink) Deliver(_ context.Context, _ string, b event.Batch) {
	c.mu.Lock()
	if b.Type == c.typ {
		c.n += len(b.Targets)
	}
	c.mu.Unlock()
}

func (c *typeSink) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

// TestSliceEveryoneSplit: an @everyone MESSAGE_CREATE reaches a session
// active in the channel and, by the mention exception, a passive one;
// only the latter counts as Mentioned. A plain message reaches only the
// active one.
func TestSliceEveryoneSplit(t *testing.T) {
	ctx := context.Background()
	const guild, channel snowflake.ID = 100, 200
	sink := &typeSink{typ: "MESSAGE_CREATE"} // the passive flush runs on its own timer
	x := NewSlice(guild, sink)
	snap := &Entry{Guild: guild, Owner: "o", Version: 1, Reset: true, Members: 1000,
		Changes: []permissions.Change{
			{Op: permissions.OpRole, ID: guild, Bits: permissions.ViewChannel},
			{Op: permissions.OpOverwrites, ID: channel},
		},
		Add: []Slot{
			{Session: event.Session{ID: "active", UserID: 1, Node: "n"}, Member: &permissions.Member{UserID: 1}, HasActive: true, Active: []snowflake.ID{channel}},
			{Session: event.Session{ID: "passive", UserID: 2, Node: "n"}, Member: &permissions.Member{UserID: 2}},
		},
	}
	if err := x.Apply(ctx, snap); err != nil {
		t.Fatal(err)
	}
	msg := func(id snowflake.ID, everyone bool) *Entry {
		return &Entry{Guild: guild, Owner: "o", Version: 1, Event: &Event{Type: "MESSAGE_CREATE", Payloads: []json.RawMessage{json.RawMessage(`{}`)},
			Kind: KindMessage, Intent: 1 << 9, Channel: channel, Create: true, MessageID: id, MentionEveryone: everyone}}
	}
	if err := x.Apply(ctx, msg(10, false)); err != nil || sink.count() != 1 || x.Stats().Mentioned != 0 {
		t.Fatalf("plain message: err %v, %d deliveries, %d mentioned; want 1 and 0", err, sink.count(), x.Stats().Mentioned)
	}
	if err := x.Apply(ctx, msg(11, true)); err != nil || sink.count() != 3 || x.Stats().Mentioned != 1 {
		t.Fatalf("@everyone: err %v, %d deliveries in all, %d mentioned; want 3 and 1", err, sink.count(), x.Stats().Mentioned)
	}
}

// TestRelaySliceExpiresWithOwnerProcess: a guild node killed outright
// sends no Drop. Its slice on a relay is dropped once its process has no
// stream open to the relay, and an entry it (or a reconnect of it) sends
// afterwards is refused with ErrBehind, asking for a snapshot. A process
// that reconnected keeps its slice when its old stream's end is noticed,
// and a slice a successor took over stays when the dead owner's stream
// ends.
func TestRelaySliceExpiresWithOwnerProcess(t *testing.T) {
	ctx := context.Background()
	const guild, channel, user snowflake.ID = 100, 200, 300
	snapshot := func(owner string) *Entry {
		return &Entry{Guild: guild, Owner: owner, Version: 1, Reset: true, Members: 2,
			Changes: []permissions.Change{
				{Op: permissions.OpRole, ID: guild, Bits: permissions.ViewChannel},
				{Op: permissions.OpOverwrites, ID: channel},
			},
			Add: []Slot{{Session: event.Session{ID: "s", UserID: user, Node: "n"}, Member: &permissions.Member{UserID: user}}},
		}
	}
	ev := func(owner string) *Entry {
		return &Entry{Guild: guild, Owner: owner, Version: 1, Event: &Event{Type: "CHANNEL_UPDATE", Payloads: []json.RawMessage{json.RawMessage(`{}`)}, Kind: KindChannel, Channel: channel}}
	}

	t.Run("killed owner", func(t *testing.T) {
		r := NewRelay(&countSink{})
		a := r.Open("node-a")
		if err := a.Apply(ctx, snapshot("a/1")); err != nil {
			t.Fatal(err)
		}
		a.End(0)
		if r.Len() != 0 || r.Expired() != 1 {
			t.Fatalf("after the owner's only stream ended: %d slices, %d expired; want 0 and 1", r.Len(), r.Expired())
		}
		again := r.Open("node-a")
		if err := again.Apply(ctx, ev("a/1")); !errors.Is(err, ErrBehind) || r.Len() != 0 {
			t.Fatalf("the owner's event after its slice expired: err %v, %d slices; want ErrBehind and none", err, r.Len())
		}
	})

	t.Run("reconnected owner", func(t *testing.T) {
		sink := &countSink{}
		r := NewRelay(sink)
		old := r.Open("node-a")
		if err := old.Apply(ctx, snapshot("a/1")); err != nil {
			t.Fatal(err)
		}
		fresh := r.Open("node-a") // the owner's next send opened a new stream
		old.End(0)
		if r.Len() != 1 {
			t.Fatalf("the old stream of a reconnected owner ended: %d slices, want 1", r.Len())
		}
		if err := fresh.Apply(ctx, ev("a/1")); err != nil || sink.n != 1 {
			t.Fatalf("event on the new stream: err %v, %d deliveries; want 1", err, sink.n)
		}
		fresh.End(0)
		if r.Len() != 0 {
			t.Fatalf("the owner's last stream ended: %d slices, want 0", r.Len())
		}
	})

	t.Run("successor took over", func(t *testing.T) {
		sink := &countSink{}
		r := NewRelay(sink)
		a := r.Open("node-a")
		if err := a.Apply(ctx, snapshot("a/1")); err != nil {
			t.Fatal(err)
		}
		b := r.Open("node-b")
		if err := b.Apply(ctx, snapshot("b/1")); err != nil {
			t.Fatal(err)
		}
		a.End(0)
		if r.Len() != 1 || r.Expired() != 0 {
			t.Fatalf("the dead owner's stream ended after the successor's snapshot: %d slices, %d expired; want 1 and 0", r.Len(), r.Expired())
		}
		if err := b.Apply(ctx, ev("b/1")); err != nil || sink.n != 1 {
			t.Fatalf("successor's event: err %v, %d deliveries; want 1", err, sink.n)
		}
	})

	t.Run("lease", func(t *testing.T) {
		r := NewRelay(&countSink{})
		a := r.Open("node-a")
		if err := a.Apply(ctx, snapshot("a/1")); err != nil {
			t.Fatal(err)
		}
		a.End(time.Hour)
		back := r.Open("node-a") // back within the lease
		back.End(20 * time.Millisecond)
		deadline := time.Now().Add(10 * time.Second)
		for r.Len() != 0 {
			if time.Now().After(deadline) {
				t.Fatal("the slice outlived its owner's lease")
			}
			<-time.After(5 * time.Millisecond) // polling the timer's effect
		}
	})
}
