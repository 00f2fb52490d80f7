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

// fakeRelays relays the guilds it was told about into relayed, except
// for the node it is told fails, which it hands back.
type fakeRelays struct {
	mu      sync.Mutex
	guilds  map[snowflake.ID]bool
	fail    string
	relayed *recordingSink
	calls   map[string][][]string // dispatch type → node sets, per call
}

func (r *fakeRelays) Relay(ctx context.Context, gid snowflake.ID, typ string, payloads []json.RawMessage, byNode map[string][]event.Target) (bool, []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.guilds[gid] {
		return false, nil
	}
	var nodes, failed []string
	for n, ts := range byNode {
		nodes = append(nodes, n)
		if n == r.fail {
			failed = append(failed, n)
			continue
		}
		r.relayed.Deliver(ctx, n, event.Batch{Type: typ, Payloads: payloads, Targets: ts})
	}
	slices.Sort(nodes)
	r.calls[typ] = append(r.calls[typ], nodes)
	return true, failed
}

func (r *fakeRelays) set(gid snowflake.ID) {
	r.mu.Lock()
	r.guilds[gid] = true
	r.mu.Unlock()
}

func TestGuildWithRelaysSendsOneRequestPerDispatch(t *testing.T) {
	f := newFixture(t)
	relays := &fakeRelays{guilds: map[snowflake.ID]bool{}, fail: "node-b", relayed: newRecordingSink(), calls: map[string][][]string{}}
	svc, err := NewService(Config{Now: f.clock.Now}, Deps{Store: f.store, Sink: f.sink, IDs: f.ids, Auth: f.auth, Relays: relays})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { svc.Close() })
	f.svc = svc
	big := f.secretGuild()
	small := must[GuildInfo](t)(f.svc.CreateGuild(bg, big.owner.ID, "small guild"))
	smallGeneral := must[[]store.Channel](t)(f.svc.Channels.List(bg, big.owner.ID, small.Guild.ID))[0]
	relays.set(big.guild.Guild.ID)

	// Sessions on two gateway nodes; node-b's relay is down.
	subscribe := func(id string, u store.User) event.Session {
		s := event.Session{ID: event.SessionID(id), UserID: u.ID, Node: "node-" + id[:1]}
		if err := f.svc.Subscribe(bg, s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	sa := subscribe("a1", big.owner)
	sb := subscribe("b1", big.member)
	// a1: the big guild's GUILD_CREATE through the relay, the small one's
	// directly; b1 (relay failed): directly.
	relays.relayed.waitFor(t, sa.ID, "GUILD_CREATE", func(ds []delivered) bool { return count(ds, "GUILD_CREATE") == 1 })
	f.sink.waitFor(t, sa.ID, "GUILD_CREATE", func(ds []delivered) bool { return count(ds, "GUILD_CREATE") == 1 })
	f.sink.waitFor(t, sb.ID, "GUILD_CREATE", func(ds []delivered) bool { return count(ds, "GUILD_CREATE") == 1 })
	f.send(big.owner, big.general.ID, "to the big guild")
	f.send(big.owner, smallGeneral.ID, "to the small guild")

	// node-a gets the big guild's message from the relay; node-b, whose
	// relay failed, directly; the small guild (no relays) goes directly.
	relays.relayed.waitFor(t, sa.ID, "relayed message", func(ds []delivered) bool { return count(ds, "MESSAGE_CREATE") == 1 })
	f.sink.waitFor(t, sb.ID, "direct fallback", func(ds []delivered) bool { return count(ds, "MESSAGE_CREATE") == 1 })
	f.sink.waitFor(t, sa.ID, "small guild direct", func(ds []delivered) bool { return count(ds, "MESSAGE_CREATE") == 1 })
	if n := count(relays.relayed.of(sb.ID), "MESSAGE_CREATE"); n != 0 {
		t.Fatalf("node-b got %d messages through its failed relay", n)
	}
	relays.mu.Lock()
	defer relays.mu.Unlock()
	if got := relays.calls["MESSAGE_CREATE"]; len(got) != 1 || !slices.Equal(got[0], []string{"node-a", "node-b"}) {
		t.Fatalf("relay calls for MESSAGE_CREATE = %v, want one call for both nodes", got)
	}
	// The big guild's GUILD_CREATE for a1 went through the relay too: one
	// path per guild keeps its order.
	if len(relays.calls["GUILD_CREATE"]) == 0 {
		t.Fatalf("GUILD_CREATE did not take the relay path")
	}
}
