package guild

import (
	"context"
	"encoding/json"
	"slices"
	"sync"
	"testing"

	"github.com/concord-chat/concord/runtime/adapters/store"
	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/event"
)

// fakeDirectory is a SessionDirectory over sessions on other gateway
// nodes, which never subscribed through this service.
type fakeDirectory struct {
	mu       sync.Mutex
	sessions []event.Session
	subs     map[event.SessionID][]snowflake.ID
}

func (d *fakeDirectory) UserSessions(_ context.Context, users []snowflake.ID) ([]event.Session, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []event.Session
	for _, s := range d.sessions {
		if slices.Contains(users, s.UserID) {
			out = append(out, s)
		}
	}
	return out, nil
}

func (d *fakeDirectory) SubscribeGuild(_ context.Context, s event.Session, g snowflake.ID) (bool, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.subs[s.ID] = append(d.subs[s.ID], g)
	return true, nil
}

func (d *fakeDirectory) subscribed(id event.SessionID) []snowflake.ID {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.subs[id])
}

// TestSessionDirectoryReach: with a session directory, events aimed at a
// user reach the user's sessions on other gateway nodes (which this
// service never saw subscribe), and a guild joined or created is
// subscribed through each session's gateway node instead of attached here.
func TestSessionDirectoryReach(t *testing.T) {
	f := newFixture(t)
	a, b := f.user("alice", false), f.user("bob", false)
	ra := event.Session{ID: "remote-a", UserID: a.ID, Intents: IntentDirectMessages, Node: "gw-2"}
	rb := event.Session{ID: "remote-b", UserID: b.ID, Intents: IntentDirectMessages, Node: "gw-3"}
	dir := &fakeDirectory{sessions: []event.Session{ra, rb}, subs: map[event.SessionID][]snowflake.ID{}}
	svc, err := NewService(Config{Now: f.clock.Now}, Deps{Store: f.store, Sink: f.sink, IDs: f.ids, Auth: f.auth, Sessions: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { svc.Close() })
	f.svc = svc

	g := must[GuildInfo](t)(svc.CreateGuild(bg, a.ID, "shared"))
	if got := dir.subscribed(ra.ID); !slices.Equal(got, []snowflake.ID{g.Guild.ID}) {
		t.Fatalf("the creator's remote session was asked to subscribe to %v, want [%d]", got, g.Guild.ID)
	}
	if _, _, err := svc.Members.Add(bg, g.Guild.ID, b.ID); err != nil {
		t.Fatal(err)
	}
	if got := dir.subscribed(rb.ID); !slices.Equal(got, []snowflake.ID{g.Guild.ID}) {
		t.Fatalf("the joiner's remote session was asked to subscribe to %v, want [%d]", got, g.Guild.ID)
	}
	if len(f.sink.of(rb.ID)) != 0 {
		t.Fatalf("the service attached the remote session itself: %v", types(f.sink.of(rb.ID)))
	}

	// A DM reaches both recipients' remote sessions, on their nodes.
	dm := must[store.Channel](t)(svc.Private.CreateDM(bg, a.ID, b.ID))
	f.send(a, dm.ID, "hi bob")
	for _, s := range []event.Session{ra, rb} {
		ds := f.sink.waitFor(t, s.ID, "the DM", func(ds []delivered) bool { return count(ds, "MESSAGE_CREATE") == 1 })
		for _, d := range ds {
			if d.Node != s.Node {
				t.Fatalf("%s's event went to node %q, want %q", s.ID, d.Node, s.Node)
			}
		}
	}
	// A dispatch to one user (MESSAGE_ACK) reaches bob's remote session.
	svc.DispatchToUser(bg, b.ID, "MESSAGE_ACK", json.RawMessage(`{"message_id":"1"}`))
	f.sink.waitFor(t, rb.ID, "MESSAGE_ACK", func(ds []delivered) bool { return count(ds, "MESSAGE_ACK") == 1 })
	if n := count(f.sink.of(ra.ID), "MESSAGE_ACK"); n != 0 {
		t.Fatalf("alice got %d acks of bob's", n)
	}
}
