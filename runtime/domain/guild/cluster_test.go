package guild

import (
	"errors"
	"runtime"
	"slices"
	"testing"

	"github.com/concord-chat/concord/runtime/adapters/store"
	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/event"
)

// TestAttachDetachUnload covers what a guild node does for remote
// gateways: attach one session to one guild (GUILD_CREATE, then events),
// attach it again (a fresh GUILD_CREATE), detach it (no more events),
// refuse non-members, and unload a guild placed elsewhere: queued work
// then fails with ErrMoved and the next attach loads it afresh.
func TestAttachDetachUnload(t *testing.T) {
	f := newFixture(t)
	owner, member, stranger := f.user("owner", false), f.user("member", false), f.user("stranger", false)
	g := must[GuildInfo](t)(f.svc.CreateGuild(bg, owner.ID, "guild"))
	if _, _, err := f.svc.Members.Add(bg, g.Guild.ID, member.ID); err != nil {
		t.Fatal(err)
	}
	general := must[[]store.Channel](t)(f.svc.Channels.List(bg, owner.ID, g.Guild.ID))[0].ID

	s := event.Session{ID: "a-remote", UserID: member.ID, Node: "gateway-9"}
	if err := f.svc.AttachSession(bg, g.Guild.ID, s); err != nil {
		t.Fatal(err)
	}
	f.sink.waitFor(t, s.ID, "GUILD_CREATE", func(ds []delivered) bool { return count(ds, "GUILD_CREATE") == 1 })
	if ds := f.sink.of(s.ID); ds[0].Node != "gateway-9" {
		t.Fatalf("delivered to node %q, want the session's gateway-9", ds[0].Node)
	}
	m1 := f.send(owner, general, "one")
	f.sink.waitFor(t, s.ID, "MESSAGE_CREATE", func(ds []delivered) bool { return count(ds, "MESSAGE_CREATE") == 1 })

	// Attaching again sends a fresh GUILD_CREATE, ordered before later events.
	if err := f.svc.AttachSession(bg, g.Guild.ID, s); err != nil {
		t.Fatal(err)
	}
	m2 := f.send(owner, general, "two")
	ds := f.sink.waitFor(t, s.ID, "second MESSAGE_CREATE", func(ds []delivered) bool { return count(ds, "MESSAGE_CREATE") == 2 })
	if got, want := types(ds), []string{"GUILD_CREATE", "MESSAGE_CREATE", "GUILD_CREATE", "MESSAGE_CREATE"}; !slices.Equal(got, want) {
		t.Fatalf("deliveries %v, want %v", got, want)
	}
	if ms := messages(t, ds); ms[0].ID != m1.ID || ms[1].ID != m2.ID {
		t.Fatalf("messages %v, want %v then %v", ms, m1.ID, m2.ID)
	}

	// Non-members are refused.
	err := f.svc.AttachSession(bg, g.Guild.ID, event.Session{ID: "b-remote", UserID: stranger.ID, Node: "gateway-9"})
	if !errors.Is(err, ErrMissingAccess) {
		t.Fatalf("attach a stranger: %v, want ErrMissingAccess", err)
	}

	// Detached sessions get nothing more; a watcher session shows the
	// message was fanned out after the detach.
	w := event.Session{ID: "c-watch", UserID: owner.ID, Node: "gateway-8"}
	if err := f.svc.AttachSession(bg, g.Guild.ID, w); err != nil {
		t.Fatal(err)
	}
	if err := f.svc.DetachSession(bg, g.Guild.ID, s); err != nil {
		t.Fatal(err)
	}
	m3 := f.send(owner, general, "three")
	f.sink.waitFor(t, w.ID, "MESSAGE_CREATE three", func(ds []delivered) bool {
		ms := messages(t, ds)
		return len(ms) > 0 && ms[len(ms)-1].ID == m3.ID
	})
	if n := count(f.sink.of(s.ID), "MESSAGE_CREATE"); n != 2 {
		t.Fatalf("detached session got %d messages, want 2", n)
	}

	// Unload: the actor stops; the guild is not loaded until used again,
	// and an attach then loads it from the store with a fresh GUILD_CREATE.
	if err := f.svc.Unload(bg, g.Guild.ID); err != nil {
		t.Fatal(err)
	}
	if slices.Contains(f.svc.LoadedGuilds(), g.Guild.ID) {
		t.Fatal("guild still loaded after Unload")
	}
	before := count(f.sink.of(w.ID), "GUILD_CREATE")
	if err := f.svc.AttachSession(bg, g.Guild.ID, w); err != nil {
		t.Fatal(err)
	}
	f.sink.waitFor(t, w.ID, "GUILD_CREATE after reload", func(ds []delivered) bool { return count(ds, "GUILD_CREATE") == before+1 })
	m4 := f.send(owner, general, "four")
	f.sink.waitFor(t, w.ID, "MESSAGE_CREATE four", func(ds []delivered) bool {
		ms := messages(t, ds)
		return len(ms) > 0 && ms[len(ms)-1].ID == m4.ID
	})
	if err := f.svc.Unload(bg, 12345); err != nil {
		t.Fatalf("unload a guild that is not loaded: %v", err)
	}
}

// TestUnloadFailsQueuedWork checks that operations queued behind Unload
// fail with ErrMoved (so callers retry on the new owner) instead of
// running on a stale actor.
func TestUnloadFailsQueuedWork(t *testing.T) {
	f := newFixture(t)
	owner := f.user("owner", false)
	g := must[GuildInfo](t)(f.svc.CreateGuild(bg, owner.ID, "guild"))
	a, err := f.svc.actor(g.Guild.ID)
	if err != nil {
		t.Fatal(err)
	}
	// Hold the actor so that Unload and the next operation queue up.
	release := make(chan struct{})
	held := make(chan struct{})
	if err := a.enqueue(bg, func(*Actor) { close(held); <-release }); err != nil {
		t.Fatal(err)
	}
	<-held
	unloaded := make(chan error, 1)
	go func() { unloaded <- f.svc.Unload(bg, g.Guild.ID) }()
	// Wait until Unload's operation is in the mailbox, then queue one more.
	for len(a.mailbox) == 0 {
		select {
		case err := <-unloaded:
			t.Fatalf("Unload returned early: %v", err)
		default:
		}
		waitScheduler()
	}
	queued := make(chan error, 1)
	go func() {
		_, err := f.svc.GuildInfo(bg, owner.ID, g.Guild.ID)
		queued <- err
	}()
	for len(a.mailbox) < 2 {
		waitScheduler()
	}
	close(release)
	if err := <-unloaded; err != nil {
		t.Fatal(err)
	}
	if err := <-queued; !errors.Is(err, ErrMoved) || !errors.Is(err, ErrUnavailable) {
		t.Fatalf("operation queued behind Unload: %v, want ErrMoved (an ErrUnavailable)", err)
	}
}

// waitScheduler lets the goroutines the test waits on run.
func waitScheduler() { runtime.Gosched() }

// TestGuildPlacedElsewhereIsReadAfresh: a node that is not a guild's
// owner (Config.Owns) keeps no copy of it after serving a request that
// touched it (POST /guilds on any node creates it there), so a later
// request sees what the owner wrote meanwhile — here a member who joined
// on the owner — instead of the copy's stale member list.
func TestGuildPlacedElsewhereIsReadAfresh(t *testing.T) {
	f := newFixture(t)
	other := f.newService(Config{Owns: func(snowflake.ID) bool { return false }})
	alice, bob := f.user("alice", false), f.user("bob", false)
	g := must[GuildInfo](t)(other.CreateGuild(bg, alice.ID, "placed elsewhere"))
	gid := g.Guild.ID
	if slices.Contains(other.LoadedGuilds(), gid) {
		t.Fatal("the non-owner kept the guild it created loaded")
	}
	// f.svc owns every guild: bob joins there.
	if _, _, err := f.svc.Members.Add(bg, gid, bob.ID); err != nil {
		t.Fatal(err)
	}
	info, err := other.GuildInfo(bg, bob.ID, gid)
	if err != nil {
		t.Fatalf("the non-owner answered bob's GuildInfo with %v: it read a stale copy", err)
	}
	if info.Guild.ID != gid {
		t.Fatalf("GuildInfo = %+v", info.Guild)
	}
	if slices.Contains(other.LoadedGuilds(), gid) {
		t.Fatal("the non-owner kept the guild loaded after a query")
	}
}

// TestDetachSessionWaitsForQueuedEvents: DetachSession returns only once
// the actor has dropped the subscriber, so the events queued before it
// have reached the sink by then and none comes after. A revocation sends
// GUILD_DELETE right after the detach; with a detach that only queued the
// removal, a message already in the mailbox reached the session after
// that GUILD_DELETE.
func TestDetachSessionWaitsForQueuedEvents(t *testing.T) {
	f := newFixture(t)
	owner, member := f.user("owner", false), f.user("member", false)
	g := must[GuildInfo](t)(f.svc.CreateGuild(bg, owner.ID, "guild"))
	if _, _, err := f.svc.Members.Add(bg, g.Guild.ID, member.ID); err != nil {
		t.Fatal(err)
	}
	general := must[[]store.Channel](t)(f.svc.Channels.List(bg, owner.ID, g.Guild.ID))[0].ID
	s := event.Session{ID: "a-remote", UserID: member.ID, Node: "gateway-9"}
	if err := f.svc.AttachSession(bg, g.Guild.ID, s); err != nil {
		t.Fatal(err)
	}
	grant, err := f.svc.Messages.AuthorizeSend(bg, SendRequest{UserID: owner.ID, ChannelID: general})
	if err != nil {
		t.Fatal(err)
	}
	a, err := f.svc.actor(g.Guild.ID)
	if err != nil {
		t.Fatal(err)
	}
	// Hold the actor so that a message and the detach queue up behind it.
	release, held := make(chan struct{}), make(chan struct{})
	if err := a.enqueue(bg, func(*Actor) { close(held); <-release }); err != nil {
		t.Fatal(err)
	}
	<-held
	queued := f.publish(owner, grant, "queued before the detach")
	detached := make(chan error, 1)
	go func() { detached <- f.svc.DetachSession(bg, g.Guild.ID, s) }()
	for len(a.mailbox) < 2 {
		select {
		case err := <-detached:
			t.Fatalf("DetachSession returned (%v) while the actor had not run it", err)
		default:
		}
		waitScheduler()
	}
	close(release)
	if err := <-detached; err != nil {
		t.Fatal(err)
	}
	// Nothing is awaited here: what the session got is fixed once
	// DetachSession returned.
	at := messages(t, f.sink.of(s.ID))
	if len(at) != 1 || at[0].ID != queued.ID {
		t.Fatalf("messages when DetachSession returned %v, want the queued %v", at, queued.ID)
	}
	w := event.Session{ID: "c-watch", UserID: owner.ID, Node: "gateway-8"}
	if err := f.svc.AttachSession(bg, g.Guild.ID, w); err != nil {
		t.Fatal(err)
	}
	later := f.send(owner, general, "after the detach")
	f.sink.waitFor(t, w.ID, "the later message", func(ds []delivered) bool {
		ms := messages(t, ds)
		return len(ms) > 0 && ms[len(ms)-1].ID == later.ID
	})
	if n := count(f.sink.of(s.ID), "MESSAGE_CREATE"); n != 1 {
		t.Fatalf("detached session got %d messages, want 1", n)
	}
}
