package memberlist_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/event"
	"github.com/concord-chat/concord/runtime/domain/memberlist"
	"github.com/concord-chat/concord/runtime/domain/presence"
)

type allVisible struct{}

func (allVisible) CanView(_, _ snowflake.ID) bool { return true }

// guildSide is what a guild actor does with a presence change: update its
// member lists and pick PRESENCE_UPDATE recipients by size.
type guildSide struct {
	lists    *memberlist.Guild
	audience presence.Audience
	members  int
	users    []event.Session
	bots     []event.Session
	names    map[snowflake.ID]string

	listDeliveries map[event.SessionID]int
	presenceTo     []event.SessionID
}

func (g *guildSide) Broadcast(_ context.Context, userID snowflake.ID, p presence.Presence, _ []snowflake.ID) {
	m := memberlist.Member{UserID: userID, Name: g.names[userID], Status: string(p.Status),
		Data: json.RawMessage(fmt.Sprintf(`{"user":{"id":"%s"},"roles":[],"presence":%s}`, userID, p.Event(userID, 0)))}
	d := g.lists.Upsert(m)
	for _, v := range d.Variants {
		for _, s := range v.Sessions {
			g.listDeliveries[s.ID]++
		}
	}
	for _, s := range g.audience.Select(g.members, g.users, g.bots, g.lists.Viewers(userID)) {
		g.presenceTo = append(g.presenceTo, s.ID)
	}
}

// TestPresenceToMemberList wires the presence service to a large guild's
// member lists: an idle change reaches, after the coalescing window, the
// sessions showing the member's row (one UPDATE) and bots with
// GUILD_PRESENCES, and nobody else.
func TestPresenceToMemberList(t *testing.T) {
	ctx := context.Background()
	const guildID, channel snowflake.ID = 1, 10
	g := &guildSide{
		lists:          memberlist.NewGuild(guildID, allVisible{}, nil, memberlist.GuildConfig{}),
		audience:       presence.Audience{LargeThreshold: 250},
		members:        1000,
		names:          map[snowflake.ID]string{},
		listDeliveries: map[event.SessionID]int{},
	}
	g.lists.SetChannel(channel, memberlist.EveryoneList)
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	svc, err := presence.New(presence.Config{Now: func() time.Time { return now }, Logger: slog.New(slog.DiscardHandler)}, g, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 300; i++ {
		id := snowflake.ID(i)
		g.names[id] = fmt.Sprintf("m%03d", i)
		sid := event.SessionID(fmt.Sprint("s", i))
		g.users = append(g.users, event.Session{ID: sid, UserID: id, Node: "gw"})
		if err := svc.Connect(ctx, presence.SessionState{Session: sid, UserID: id, Node: "gw", Status: presence.Online}); err != nil {
			t.Fatal(err)
		}
	}
	g.bots = []event.Session{{ID: "bot-presences", Bot: true, Intents: presence.IntentGuildPresences, Node: "gw"}, {ID: "bot-plain", Bot: true, Node: "gw"}}
	now = now.Add(5 * time.Second)
	svc.Tick(ctx)
	if g.lists.List(channel).OnlineCount() != 300 {
		t.Fatalf("online = %d", g.lists.List(channel).OnlineCount())
	}
	top := event.Session{ID: "s1", UserID: 1, Node: "gw"}
	far := event.Session{ID: "s2", UserID: 2, Node: "gw"}
	for s, r := range map[event.Session]memberlist.Range{top: {0, 99}, far: {200, 299}} {
		if _, err := g.lists.Subscribe(s, map[snowflake.ID][]memberlist.Range{channel: {r}}); err != nil {
			t.Fatal(err)
		}
	}
	clear(g.listDeliveries)
	g.presenceTo = nil

	// Member 50 (row 50) goes idle; a game started and stopped meanwhile
	// is coalesced away.
	op3 := func(d string) {
		u, err := presence.ParseUpdate(json.RawMessage(d))
		if err != nil {
			t.Fatal(err)
		}
		if err := svc.Update(ctx, "s50", u); err != nil {
			t.Fatal(err)
		}
	}
	op3(`{"status":"online","activities":[{"name":"Doom","type":0}],"afk":false,"since":null}`)
	now = now.Add(time.Second)
	op3(`{"status":"idle","activities":[],"afk":true,"since":0}`)
	now = now.Add(4 * time.Second)
	svc.Tick(ctx)
	if len(g.listDeliveries) != 1 || g.listDeliveries["s1"] != 1 {
		t.Fatalf("list deliveries = %v, want one to s1", g.listDeliveries)
	}
	slices.Sort(g.presenceTo)
	if !slices.Equal(g.presenceTo, []event.SessionID{"bot-presences", "s1"}) {
		t.Fatalf("PRESENCE_UPDATE to %v", g.presenceTo)
	}
}
