package gatewayrole

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/concord-chat/concord/runtime/adapters/store"
	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/event"
	"github.com/concord-chat/concord/runtime/services/transport"
)

// oneGuildStore answers every user's guilds with one guild.
type oneGuildStore struct {
	store.Guilds
	g snowflake.ID
}

func (s oneGuildStore) UserGuilds(context.Context, snowflake.ID) ([]snowflake.ID, error) {
	return []snowflake.ID{s.g}, nil
}

// heldGuilds is a guild client whose Subscribe waits until the test
// answers it, so the test sees the subscription while its call is in
// flight.
type heldGuilds struct {
	transport.GuildClient
	started chan struct{}
	answer  chan error
}

func (h heldGuilds) Subscribe(context.Context, snowflake.ID, event.Session) error {
	h.started <- struct{}{}
	return <-h.answer
}

// A subscription whose Subscribe is in flight is not one the retry loop
// sends again (that attached a session twice under load and sent it two
// GUILD_CREATEs); once the call failed it is, and a ring move makes an
// in-flight call of the old owner not count.
func TestSubscriptionInFlightIsNotRetried(t *testing.T) {
	const g = snowflake.ID(42)
	guilds := heldGuilds{started: make(chan struct{}), answer: make(chan error)}
	b := newRingBackend(nil, oneGuildStore{g: g}, guilds, nil, time.Minute, nil, slog.New(slog.DiscardHandler))
	s := event.Session{ID: "s1", UserID: 7, Node: "n1"}
	done := make(chan error, 1)
	go func() { done <- b.Subscribe(t.Context(), s) }()

	waiting := func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		return b.byGuild[g][s.ID].waiting()
	}
	<-guilds.started
	if waiting() {
		t.Fatal("a subscription whose first Subscribe is in flight is waiting for a retry")
	}
	b.mu.Lock()
	b.byGuild[g][s.ID].gen++ // the ring moved the guild during the call
	b.mu.Unlock()
	if !waiting() {
		t.Fatal("after a ring move, the old owner's call in flight still counts")
	}
	guilds.answer <- errors.New("owner unreachable")
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if !waiting() {
		t.Fatal("a subscription whose call failed is not waiting for a retry")
	}

	// The retry: in flight again while it runs, subscribed after.
	retried := make(chan struct{})
	go func() { b.subscribe(t.Context(), g, s); close(retried) }()
	<-guilds.started
	if waiting() {
		t.Fatal("a retry in flight is waiting for another")
	}
	guilds.answer <- nil
	<-retried
	b.mu.Lock()
	sub := b.byGuild[g][s.ID]
	b.mu.Unlock()
	if !sub.ok || sub.waiting() {
		t.Fatalf("after the retry succeeded: %+v", *sub)
	}
}

// callsGuilds is a guild client that records which subscribe each call
// was and answers with the next error of errs (nil once they run out).
type callsGuilds struct {
	transport.GuildClient
	calls []string
	errs  []error
}

func (c *callsGuilds) answer(call string) error {
	c.calls = append(c.calls, call)
	if len(c.errs) == 0 {
		return nil
	}
	err := c.errs[0]
	c.errs = c.errs[1:]
	return err
}

func (c *callsGuilds) Subscribe(context.Context, snowflake.ID, event.Session) error {
	return c.answer("subscribe")
}

func (c *callsGuilds) SubscribeMoved(_ context.Context, _ snowflake.ID, _ event.Session, refresh bool) error {
	if refresh {
		return c.answer("moved+refresh")
	}
	return c.answer("moved")
}

// A session attached on one owner is subscribed on the next one flagged
// as moved, so that owner replays what it dispatched before the call
// arrived, asking for GUILD_CREATE too until it succeeds once the old
// owner left the cluster; a subscription that never succeeded, and a
// guild the user joined again, are plain subscribes (the session needs
// GUILD_CREATE).
func TestMovedGuildIsResubscribedFlagged(t *testing.T) {
	const g = snowflake.ID(42)
	guilds := &callsGuilds{errs: []error{errors.New("owner unreachable")}}
	b := newRingBackend(nil, oneGuildStore{g: g}, guilds, nil, time.Minute, nil, slog.New(slog.DiscardHandler))
	s := event.Session{ID: "s1", UserID: 7, Node: "n1"}
	if err := b.Subscribe(t.Context(), s); err != nil {
		t.Fatal(err)
	}
	b.subscribe(t.Context(), g, s) // the retry after the failure
	// What follow does for a guild the ring moved; gone: its old owner
	// left the cluster.
	move := func(gone bool) {
		b.mu.Lock()
		defer b.mu.Unlock()
		sub := b.byGuild[g][s.ID]
		sub.ok = false
		sub.gen++
		sub.refresh = sub.refresh || gone
	}
	move(false)
	b.subscribe(t.Context(), g, s)
	move(false)
	guilds.errs = []error{errors.New("new owner unreachable")}
	b.subscribe(t.Context(), g, s)
	b.subscribe(t.Context(), g, s) // its retry: still a move's
	move(true)                     // the owner died
	guilds.errs = []error{errors.New("new owner unreachable")}
	b.subscribe(t.Context(), g, s)
	move(false) // moved again before the resubscription succeeded
	b.subscribe(t.Context(), g, s)
	move(false) // the refresh was had: a plain move again
	b.subscribe(t.Context(), g, s)
	b.users.put(s)
	if _, err := b.SubscribeGuild(t.Context(), s.ID, g); err != nil { // joined again
		t.Fatal(err)
	}
	want := []string{"subscribe", "subscribe", "moved", "moved", "moved",
		"moved+refresh", "moved+refresh", "moved", "subscribe"}
	if !slices.Equal(guilds.calls, want) {
		t.Fatalf("calls %v, want %v", guilds.calls, want)
	}
}
