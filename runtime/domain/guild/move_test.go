package guild

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/concord-chat/concord/runtime/adapters/store"
	"github.com/concord-chat/concord/runtime/domain/event"
)

// checkMoved checks one source's deliveries to a moved session: every
// message exactly once in want order, the first ones on the old node and
// the rest on the new one (never back), and the marker (with the move id)
// on the old node after the last message sent there. Messages may reach
// the new node before the marker reaches the old one: the successor
// queues them and stamps them after the old node's last.
func checkMoved(t *testing.T, ds []delivered, want []string, from, to, moveID string) {
	t.Helper()
	var got []string
	markers, lastOld, marker, onNew := 0, -1, -1, false
	for i, d := range ds {
		switch d.Type {
		case event.MoveMarker:
			markers++
			marker = i
			if d.Node != from || string(d.Payload) != `"`+moveID+`"` {
				t.Fatalf("marker to %s with %s, want %s with %q", d.Node, d.Payload, from, moveID)
			}
		case "MESSAGE_CREATE":
			var m struct{ Content string }
			if err := json.Unmarshal(d.Payload, &m); err != nil {
				t.Fatal(err)
			}
			switch d.Node {
			case from:
				if onNew {
					t.Fatalf("%s went back to %s", m.Content, from)
				}
				lastOld = i
			case to:
				onNew = true
			default:
				t.Fatalf("%s went to %s", m.Content, d.Node)
			}
			got = append(got, m.Content)
		}
	}
	if markers != 1 || marker < lastOld {
		t.Fatalf("%d markers, the last at %d, last message to the old node at %d", markers, marker, lastOld)
	}
	if !onNew {
		t.Fatal("no message reached the new node")
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("messages %v, want %v", got, want)
	}
}

// TestMoveSessionOrdering moves a session between gateway nodes while the
// guild and a DM deliver to it: each source sends everything before the
// move to the old node, then the marker, then everything to the new one.
// Each source is checked alone (the other one already switched, so it
// sends no marker), then both together.
func TestMoveSessionOrdering(t *testing.T) {
	for _, only := range []string{"guild", "private", "both"} {
		t.Run(only, func(t *testing.T) { testMove(t, only) })
	}
}

func testMove(t *testing.T, only string) {
	f := newFixture(t)
	owner := f.user("owner", false)
	peer := f.user("peer", false)
	g := must[GuildInfo](t)(f.svc.CreateGuild(bg, owner.ID, "moving"))
	text := must[store.Channel](t)(f.svc.Channels.Create(bg, owner.ID, g.Guild.ID, ChannelSpec{Name: "general", Type: store.ChannelText}))
	if _, _, err := f.svc.Members.Add(bg, g.Guild.ID, peer.ID); err != nil {
		t.Fatal(err)
	}
	dm := must[store.Channel](t)(f.svc.Private.CreateDM(bg, owner.ID, peer.ID))
	s := f.session(owner, "a1", IntentGuildMessages|IntentDirectMessages, 1)
	wantMarkers := 2
	switch only {
	case "guild":
		f.svc.mu.Lock()
		f.svc.sessions[s.ID].s.Node = "node-b"
		f.svc.mu.Unlock()
		wantMarkers = 1
	case "private":
		if err := f.svc.do(bg, g.Guild.ID, func(a *Actor) error { a.subs[s.ID].s.Node = "node-b"; return nil }); err != nil {
			t.Fatal(err)
		}
		wantMarkers = 1
	}

	var want, wantDM []string
	for i := range 40 {
		want = append(want, fmt.Sprintf("g%d", i))
		wantDM = append(wantDM, fmt.Sprintf("d%d", i))
	}
	// Half the messages are queued in the actor and the router before the
	// move, the rest while and after it runs.
	for i := range 20 {
		f.send(owner, text.ID, want[i])
		f.send(peer, dm.ID, wantDM[i])
	}
	moved := make(chan int, 1)
	go func() {
		n, err := f.svc.MoveSession(bg, g.Guild.ID, Move{Session: s.ID, To: "node-b", ID: "m1"})
		if err != nil {
			t.Error(err)
		}
		moved <- n
	}()
	for i := 20; i < 40; i++ {
		f.send(owner, text.ID, want[i])
		f.send(peer, dm.ID, wantDM[i])
	}
	if n := <-moved; n != wantMarkers {
		t.Fatalf("MoveSession sent %d markers, want %d", n, wantMarkers)
	}
	ds := f.sink.waitFor(t, s.ID, "every message", func(ds []delivered) bool { return count(ds, "MESSAGE_CREATE") == 80 })
	var guildDs, privDs []delivered
	for _, d := range ds {
		var m struct {
			GuildID *string `json:"guild_id"`
		}
		_ = json.Unmarshal(d.Payload, &m)
		switch {
		case d.Type == event.MoveMarker:
			if only != "private" {
				guildDs = append(guildDs, d)
			}
			if only != "guild" {
				privDs = append(privDs, d)
			}
		case d.Type != "MESSAGE_CREATE":
		case m.GuildID != nil:
			guildDs = append(guildDs, d)
		default:
			privDs = append(privDs, d)
		}
	}
	switch only {
	case "guild":
		checkMoved(t, guildDs, want, "node-a", "node-b", "m1")
	case "private":
		checkMoved(t, privDs, wantDM, "node-a", "node-b", "m1")
	default:
		if count(ds, event.MoveMarker) != 2 {
			t.Fatalf("%d markers, want 2", count(ds, event.MoveMarker))
		}
	}

	// A second move of the same session to the same node sends nothing.
	if n, err := f.svc.MoveSession(bg, g.Guild.ID, Move{Session: s.ID, To: "node-b", ID: "m2"}); err != nil || n != 0 {
		t.Fatalf("repeated move: %d markers, %v", n, err)
	}
	// A session the guild does not deliver to is refused.
	if _, err := f.svc.MoveSession(bg, g.Guild.ID, Move{Session: "zz", To: "node-b", ID: "m3"}); !errors.Is(err, ErrNotSubscribed) {
		t.Fatalf("move of an unknown session: %v", err)
	}
}
