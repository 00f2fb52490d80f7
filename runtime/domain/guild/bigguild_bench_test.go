package guild

import (
	"context"
	"flag"
	"fmt"
	"runtime"
	"sort"
	"syscall"
	"testing"
	"time"

	"github.com/concord-chat/concord/runtime/adapters/store"
	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/event"
	"github.com/concord-chat/concord/runtime/domain/fanout"
	"github.com/concord-chat/concord/runtime/domain/permissions"
	"github.com/concord-chat/concord/runtime/domain/wire"
)

// Issue 26's figures for the 100,000-online guild, measured in process:
// the guild's owner actor with simulated sessions (no sockets), delivering
// to a counting sink, once filtering every session itself and once
// handing them to 7 in-process relays (fanout.Local), in the same run.
//
//	go test ./runtime/domain/guild -run XXX -bench BenchmarkBigGuild -benchtime=1x \
//	  [-bigguild.sessions=100000 -bigguild.members=1000000 -bigguild.viewers=0.1]
var (
	bigSessions = flag.Int("bigguild.sessions", 100000, "online sessions of the big guild")
	bigMembers  = flag.Int("bigguild.members", 1000000, "members of the big guild")
	bigViewers  = flag.Float64("bigguild.viewers", 0.1, "share of user sessions whose op 14 names the channel the messages go to")
	bigEvents   = flag.Int("bigguild.events", 20, "messages timed per mode")
	// The busy minute's bytes per session do not depend on how many
	// sessions share them; it runs on a smaller guild to stay short.
	bigMinuteSessions = flag.Int("bigguild.minute-sessions", 10000, "online sessions of the busy-minute guilds")
)

const bigChannels = 10

// bigGuild is one service holding the big guild.
type bigGuild struct {
	f      *fixture
	sink   *countingSink
	local  *fanout.Local
	guild  snowflake.ID
	owner  store.User
	chans  []snowflake.ID
	member *wire.Member
}

func newBigGuild(b *testing.B, sliced, allActive bool) *bigGuild {
	return newBigGuildN(b, *bigSessions, sliced, allActive)
}

func newBigGuildN(b *testing.B, sessions int, sliced, allActive bool) *bigGuild {
	g := &bigGuild{sink: &countingSink{}}
	g.f = newFixtureWithSink(b, g.sink)
	deps := Deps{Store: g.f.store, Sink: g.sink, IDs: g.f.ids, Auth: g.f.auth}
	if sliced {
		g.local = fanout.NewLocal(g.sink, 7, 1<<16)
		b.Cleanup(g.local.Close)
		deps.Slices = g.local
	}
	svc, err := NewService(Config{ShadowEvery: -1}, deps)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { svc.Close() })
	g.f.svc = svc
	g.owner = g.f.user("owner", false)
	g.guild = must[GuildInfo](b)(svc.CreateGuild(bg, g.owner.ID, "big")).Guild.ID
	for i := range bigChannels {
		c := must[store.Channel](b)(svc.Channels.Create(bg, g.owner.ID, g.guild, ChannelSpec{Name: fmt.Sprintf("c%d", i), Type: store.ChannelText}))
		g.chans = append(g.chans, c.ID)
	}
	grant := must[SendGrant](b)(svc.Messages.AuthorizeSend(bg, SendRequest{UserID: g.owner.ID, ChannelID: g.chans[0]}))
	g.member = grant.Member
	// Members and sessions go straight into the actor: the store and
	// IDENTIFY are not what is measured.
	now := time.Now()
	err = svc.do(bg, g.guild, func(a *Actor) error {
		for i := range *bigMembers {
			uid := snowflake.ID(1<<50 + i)
			m := &store.Member{GuildID: g.guild, UserID: uid, JoinedAt: now}
			a.members[uid] = m
			a.engine.SetMember(engineMember(*m))
		}
		viewEvery := int(1 / *bigViewers)
		for i := range sessions {
			s := event.Session{ID: event.SessionID(fmt.Sprintf("s%06d", i)), UserID: snowflake.ID(1<<50 + i),
				Bot: i%100 == 0, Intents: IntentGuilds | IntentGuildMessages, Node: fmt.Sprintf("gw-%d", i%8)}
			if i%200 == 0 {
				s.Intents |= IntentMessageContent
			}
			a.addSub(&subscriber{s: s, visible: a.visibleChannels(s.UserID)})
			switch {
			case s.Bot:
			case allActive:
				a.setActive(s, g.chans)
			case i%viewEvery == 1:
				a.setActive(s, g.chans[:1])
			default:
				a.setActive(s, nil)
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	g.settle(b)
	return g
}

func (g *bigGuild) settle(b *testing.B) {
	if _, err := g.f.svc.Channels.List(bg, g.owner.ID, g.guild); err != nil {
		b.Fatal(err)
	}
	if g.local != nil {
		if err := g.local.Sync(context.Background()); err != nil {
			b.Fatal(err)
		}
	}
}

func (g *bigGuild) message(i int, channel snowflake.ID, everyone bool) wire.Message {
	m := store.Message{ID: snowflake.FromTime(time.Now().Add(time.Duration(i) * time.Millisecond)), ChannelID: channel, GuildID: g.guild,
		AuthorID: g.owner.ID, Content: "a message of a typical length, some eighty characters, in the biggest guild"}
	if everyone {
		m.Content = "@everyone " + m.Content
		m.MentionEveryone = true
	}
	return wire.MessageFrom(m, wire.UserFrom(g.owner), g.member, nil, nil)
}

// timed publishes one message and returns the owner actor's time in it,
// the relays' time to finish it (0 without relays) and the deliveries.
func (g *bigGuild) timed(b *testing.B, m wire.Message) (owner, relays time.Duration, deliveries int64) {
	g.settle(b)
	before := g.sink.n.Load()
	err := g.f.svc.do(bg, g.guild, func(a *Actor) error {
		t0 := time.Now()
		a.fanoutMessage(bg, "MESSAGE_CREATE", m)
		owner = time.Since(t0)
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	t1 := time.Now()
	g.settle(b)
	if g.local != nil {
		relays = time.Since(t1)
	}
	return owner, relays, g.sink.n.Load() - before
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func median(ds []time.Duration) time.Duration {
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	return ds[len(ds)/2]
}

func heapMB() float64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return float64(ms.HeapAlloc) / (1 << 20)
}

// BenchmarkBigGuild reports, for one message to the big guild: the owner
// actor's time per event filtering every session against handing the
// event to its relays; deliveries of a plain message and of @everyone
// with passive sessions against everyone active; and, over a simulated
// busy minute (20 messages a second over 10 channels, passive updates
// flushed every 2 s of it), bytes delivered per online session.
func BenchmarkBigGuild(b *testing.B) {
	n := *bigSessions
	h0 := heapMB()
	owner := newBigGuild(b, false, false)
	h1 := heapMB()
	sliced := newBigGuild(b, true, false)
	h2 := heapMB()
	b.Logf("heap: owner-filtered guild %.0f MB, sliced guild %.0f MB (%d sessions, %d members)", h1-h0, h2-h1, n, *bigMembers)
	want := min((n+DefaultSliceThreshold-1)/DefaultSliceThreshold, 7)
	if a := sliced.f.svc.mustActorB(b, sliced.guild); a.sliced == nil || len(a.sliced.relays) != want {
		b.Fatalf("sliced guild not on %d relays", want)
	}

	var ownT, slT, slR []time.Duration
	var ownD, slD int64
	c0 := cpuTime()
	for i := range *bigEvents {
		o, _, d := owner.timed(b, owner.message(i, owner.chans[0], false))
		ownT, ownD = append(ownT, o), d
	}
	ownCPU := (cpuTime() - c0) / time.Duration(*bigEvents)
	c0 = cpuTime()
	for i := range *bigEvents {
		o, r, d := sliced.timed(b, sliced.message(i, sliced.chans[0], false))
		slT, slR, slD = append(slT, o), append(slR, r), d
	}
	slCPU := (cpuTime() - c0) / time.Duration(*bigEvents)
	b.Logf("owner time per message: filtering every session %v, with 7 relays %v (%.0fx less); relays' time to finish %v; process CPU per message %v vs %v",
		median(ownT), median(slT), float64(median(ownT))/float64(median(slT)), median(slR), ownCPU, slCPU)
	b.Logf("deliveries of a plain message to channel 0: %d (owner) / %d (relays)", ownD, slD)
	b.ReportMetric(float64(median(ownT).Microseconds()), "owner-filter-µs/event")
	b.ReportMetric(float64(median(slT).Microseconds()), "owner-relays-µs/event")

	// @everyone: passive sessions get it in full (the mention exception).
	_, _, ev := owner.timed(b, owner.message(1000, owner.chans[0], true))
	b.Logf("deliveries of @everyone in channel 0: %d", ev)

	// A busy minute, passive against everyone active.
	n = *bigMinuteSessions
	passive, active := newBigGuildN(b, n, false, false), newBigGuildN(b, n, false, true)
	for _, g := range []*bigGuild{passive, active} {
		g.settle(b)
		g.sink.n.Store(0)
		g.sink.bytes.Store(0)
		for i := range 1200 {
			m := g.message(2000+i, g.chans[i%bigChannels], false)
			err := g.f.svc.do(bg, g.guild, func(a *Actor) error {
				a.fanoutMessage(bg, "MESSAGE_CREATE", m)
				if i%40 == 39 {
					a.flushPassive(bg)
				}
				return nil
			})
			if err != nil {
				b.Fatal(err)
			}
		}
	}
	pb, ab := passive.sink.bytes.Load(), active.sink.bytes.Load()
	b.Logf("busy minute (1200 messages over %d channels): per online session %.0f bytes passive (%d deliveries) vs %.0f bytes everyone active (%d deliveries): %.1fx less",
		bigChannels, float64(pb)/float64(n), passive.sink.n.Load(), float64(ab)/float64(n), active.sink.n.Load(), float64(ab)/float64(pb))
}

func (s *Service) mustActorB(b *testing.B, id snowflake.ID) *Actor {
	s.mu.Lock()
	defer s.mu.Unlock()
	a := s.actors[id]
	if a == nil {
		b.Fatalf("guild %d not loaded", id)
	}
	return a
}

// BenchmarkBigGuildStorm is seed path 3 on the sliced guild: 30% of the
// online sessions open channel 0 (op 14) within the run, then one message
// goes to it. It reports the owner's time for the opens, the entries per
// event (one per relay), the full deliveries and the passive updates the
// relays send the rest.
func BenchmarkBigGuildStorm(b *testing.B) {
	g := newBigGuild(b, true, false)
	a := g.f.svc.mustActorB(b, g.guild)
	relays := len(a.sliced.relays)
	opens := *bigSessions * 3 / 10
	var owner time.Duration
	err := g.f.svc.do(bg, g.guild, func(a *Actor) error {
		t0 := time.Now()
		for i, sub := range a.sortedSubs() {
			if i >= opens {
				break
			}
			if !sub.s.Bot {
				a.setActive(sub.s, g.chans[:1])
			}
		}
		owner = time.Since(t0)
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	g.settle(b)
	before := passiveUpdates(g)
	o, r, d := g.timed(b, g.message(1, g.chans[0], false))
	var viewers, passive int
	_ = g.f.svc.do(bg, g.guild, func(a *Actor) error {
		for _, sub := range a.subs {
			switch {
			case sub.s.Bot || a.activeIn(sub.s, g.chans[0]):
				viewers++
			default:
				passive++
			}
		}
		return nil
	})
	deadline := time.Now().Add(30 * time.Second)
	for passiveUpdates(g)-before < uint64(passive) && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond) // the relays' passive flush runs on their timers
	}
	b.Logf("storm: %d sessions opened channel 0 in %v of owner time (%.1f µs each); one message: %d entries (one per relay), owner %v, relays %v, %d full deliveries (%d viewers and bots), %d passive updates for %d passive sessions",
		opens, owner, float64(owner.Microseconds())/float64(opens), relays, o, r, d, viewers, passiveUpdates(g)-before, passive)

	// The storm's message is an @everyone (seed path 3). The passive
	// contract delivers a MESSAGE_CREATE that mentions a session in full
	// to it, @everyone included (docs/api.md, "Passive sessions"), so
	// every session that views the channel gets it: the split is the
	// viewers against the passive sessions the mention reaches.
	m0 := mentioned(g)
	o, r, d = g.timed(b, g.message(2, g.chans[0], true))
	men := mentioned(g) - m0
	b.Logf("storm @everyone: %d entries, owner %v, relays %v, %d full deliveries = %d to sessions viewing channel 0 (active, bots) + %d to passive sessions by the @everyone mention; no PASSIVE_UPDATE_V1 needed for it",
		relays, o, r, d, int64(d)-int64(men), men)
}

func mentioned(g *bigGuild) uint64 {
	var n uint64
	for _, name := range g.local.Relays(g.guild) {
		n += g.local.Relay(name).Slice(g.guild).Stats().Mentioned
	}
	return n
}

func passiveUpdates(g *bigGuild) uint64 {
	var n uint64
	for _, name := range g.local.Relays(g.guild) {
		n += g.local.Relay(name).Slice(g.guild).Stats().PassiveUpdates
	}
	return n
}

// BenchmarkBigGuildPermissionChange is the owner's cost of one guild-wide
// permission change in the big guild: an overwrite hiding channel 1 from
// @everyone, then its removal, each a CHANNEL_DELETE or CHANNEL_CREATE to
// every online session. The owner filtering every session diffs each
// session's channel list itself; a sliced owner sends one entry per relay
// and the relays diff their slices. Same run, same changes: it reports
// the owner actor's time per change (the caller's wait, store write
// included in both), the relays' time to finish, process CPU per change
// and the deliveries.
func BenchmarkBigGuildPermissionChange(b *testing.B) {
	type result struct {
		owner, ownerCPU, relays, cpu time.Duration
		deliveries                   int64
	}
	run := func(sliced bool) result {
		g := newBigGuild(b, sliced, false)
		if a := g.f.svc.mustActorB(b, g.guild); sliced && a.sliced == nil {
			b.Fatal("the guild did not go to relays")
		}
		var own, ownCPU, rel []time.Duration
		g.settle(b)
		before := g.sink.n.Load()
		c0 := cpuTime()
		for i := range *bigEvents {
			t0, u0 := time.Now(), cpuTime()
			var err error
			if i%2 == 0 {
				err = g.f.svc.Channels.PutOverwrite(bg, g.owner.ID, g.chans[1], store.Overwrite{ID: g.guild, Type: store.OverwriteRole, Deny: uint64(permissions.ViewChannel)})
			} else {
				err = g.f.svc.Channels.DeleteOverwrite(bg, g.owner.ID, g.chans[1], g.guild)
			}
			if err != nil {
				b.Fatal(err)
			}
			t1, u1 := time.Now(), cpuTime()
			g.settle(b)
			own, rel = append(own, t1.Sub(t0)), append(rel, time.Since(t1))
			ownCPU = append(ownCPU, u1-u0)
		}
		r := result{owner: median(own), ownerCPU: median(ownCPU), cpu: (cpuTime() - c0) / time.Duration(*bigEvents), deliveries: (g.sink.n.Load() - before) / int64(*bigEvents)}
		if sliced {
			r.relays = median(rel)
		}
		return r
	}
	o := run(false)
	runtime.GC()
	s := run(true)
	// CPU while the caller waits on the actor: the owner's alone without
	// relays; with them it also counts the relays working meanwhile on
	// the other core, so the ratio understates the owner's saving.
	b.Logf("permission change (%d sessions, %d members): owner actor wall %v filtering every session vs %v with 7 relays (%.0fx less); process CPU while the owner runs the change %v vs %v (%.0fx less); relays' time to finish %v; process CPU per change, relays included, %v vs %v; deliveries per change %d vs %d",
		*bigSessions, *bigMembers, o.owner, s.owner, float64(o.owner)/float64(s.owner), o.ownerCPU, s.ownerCPU, float64(o.ownerCPU)/float64(max(s.ownerCPU, time.Microsecond)),
		s.relays, o.cpu, s.cpu, o.deliveries, s.deliveries)
	b.ReportMetric(float64(o.owner.Microseconds()), "owner-filter-µs/change")
	b.ReportMetric(float64(s.owner.Microseconds()), "owner-relays-µs/change")
}
