package permissions_test

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/permissions"
)

// benchGuild is a realistic big guild: 50 roles, 200 channels, 10,000
// members with 0-5 roles each (popular roles far more common, so members
// share role sets the way real guilds do), a quarter of the channels
// private (@everyone denied VIEW_CHANNEL, some roles allowed), 0-4 role
// overwrites per channel, member overwrites on 5% of channels, 2% of
// members timed out, two administrator roles.
type benchGuild struct {
	e       *permissions.Engine
	users   []snowflake.ID
	lookups []lookup // random (member, channel) pairs
	sets    int      // distinct role sets
}

type lookup struct{ user, channel snowflake.ID }

const (
	benchGuildID  snowflake.ID = 1 << 40
	benchRoles                 = 50
	benchChannels              = 200
	benchMembers               = 10_000
)

var benchNow = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func newBenchGuild(tb testing.TB) *benchGuild {
	rng := rand.New(rand.NewPCG(1, 2))
	e := permissions.NewEngine(benchGuildID, benchGuildID+1)
	e.SetRole(benchGuildID, permissions.DefaultEveryone)
	roles := make([]snowflake.ID, benchRoles)
	for i := range roles {
		roles[i] = benchGuildID + 1000 + snowflake.ID(i)
		bits := permissions.Bits(rng.Uint64()) & (permissions.ManageMessages | permissions.KickMembers |
			permissions.MuteMembers | permissions.ManageNicknames | permissions.MentionEveryone |
			permissions.PrioritySpeaker | permissions.ModerateMembers)
		if i < 2 {
			bits |= permissions.Administrator
		}
		e.SetRole(roles[i], bits)
	}
	zipf := rand.NewZipf(rng, 1.3, 2, benchRoles-1)
	g := &benchGuild{e: e}
	sets := map[[5]snowflake.ID]bool{}
	for i := range benchMembers {
		uid := benchGuildID + 100_000 + snowflake.ID(i)
		var key [5]snowflake.ID
		m := permissions.Member{UserID: uid}
		for k := range rng.IntN(6) {
			r := roles[49-zipf.Uint64()] // admin roles (0, 1) are the rarest
			m.Roles = append(m.Roles, r)
			key[k] = r
		}
		if rng.IntN(50) == 0 {
			m.TimeoutUntil = benchNow.Add(time.Hour)
		}
		norm := slices.Compact(slices.Sorted(slices.Values(m.Roles)))
		key = [5]snowflake.ID{}
		copy(key[:], norm)
		sets[key] = true
		e.SetMember(m)
		g.users = append(g.users, uid)
	}
	g.sets = len(sets)
	for c := range benchChannels {
		cid := benchGuildID + 10_000 + snowflake.ID(c)
		var ows []permissions.Overwrite
		if rng.IntN(4) == 0 {
			ows = append(ows, permissions.Overwrite{ID: benchGuildID, Deny: permissions.ViewChannel})
		} else if rng.IntN(3) == 0 {
			ows = append(ows, permissions.Overwrite{ID: benchGuildID, Deny: permissions.SendMessages | permissions.MentionEveryone})
		}
		for range rng.IntN(5) {
			ows = append(ows, permissions.Overwrite{ID: roles[rng.IntN(benchRoles)],
				Allow: permissions.ViewChannel | permissions.SendMessages, Deny: permissions.AddReactions})
		}
		if rng.IntN(20) == 0 {
			for range 10 {
				ows = append(ows, permissions.Overwrite{ID: g.users[rng.IntN(len(g.users))], Member: true,
					Allow: permissions.ViewChannel, Deny: permissions.SendMessages})
			}
		}
		e.SetOverwrites(cid, ows)
	}
	g.lookups = make([]lookup, 1<<16)
	for i := range g.lookups {
		g.lookups[i] = lookup{g.users[rng.IntN(len(g.users))], benchGuildID + 10_000 + snowflake.ID(rng.IntN(benchChannels))}
	}
	return g
}

func BenchmarkChannelCached(b *testing.B) {
	g := newBenchGuild(b)
	for _, l := range g.lookups { // warm
		g.e.Channel(l.user, l.channel, benchNow)
	}
	before := g.e.Stats()
	b.ReportAllocs()
	b.ResetTimer()
	var sink permissions.Bits
	for i := 0; b.Loop(); i++ {
		l := g.lookups[i&(len(g.lookups)-1)]
		sink |= g.e.Channel(l.user, l.channel, benchNow)
	}
	b.StopTimer()
	s := g.e.Stats()
	b.ReportMetric(float64(s.Hits-before.Hits)/float64(s.Hits-before.Hits+s.Misses-before.Misses), "hit-ratio")
	b.ReportMetric(float64(s.Entries), "entries")
	_ = sink
}

// BenchmarkChannelCachedFanout is the fan-out pattern: one channel, every
// member in turn (a relay filtering its sessions), channel after channel.
func BenchmarkChannelCachedFanout(b *testing.B) {
	g := newBenchGuild(b)
	for _, l := range g.lookups { // warm
		g.e.Channel(l.user, l.channel, benchNow)
	}
	b.ReportAllocs()
	b.ResetTimer()
	var sink permissions.Bits
	n := len(g.users)
	for i := 0; b.Loop(); i++ {
		u := g.users[i%n]
		c := benchGuildID + 10_000 + snowflake.ID(i/n%benchChannels)
		sink |= g.e.Channel(u, c, benchNow)
	}
	_ = sink
}

func BenchmarkChannelUncached(b *testing.B) {
	g := newBenchGuild(b)
	b.ReportAllocs()
	var sink permissions.Bits
	for i := 0; b.Loop(); i++ {
		l := g.lookups[i&(len(g.lookups)-1)]
		sink |= g.e.ChannelUncached(l.user, l.channel, benchNow)
	}
	_ = sink
}

func BenchmarkBase(b *testing.B) {
	g := newBenchGuild(b)
	b.ReportAllocs()
	var sink permissions.Bits
	for i := 0; b.Loop(); i++ {
		l := g.lookups[i&(len(g.lookups)-1)]
		sink |= g.e.Base(l.user, benchNow)
	}
	_ = sink
}

// BenchmarkChannelColdAfterEveryoneEdit measures the worst invalidation:
// @everyone edited, then every (role set, channel) of the lookups refilled.
func BenchmarkChannelColdAfterEveryoneEdit(b *testing.B) {
	g := newBenchGuild(b)
	b.ReportAllocs()
	var sink permissions.Bits
	for i := 0; b.Loop(); i++ {
		if i&(len(g.lookups)-1) == 0 {
			g.e.SetRole(benchGuildID, permissions.DefaultEveryone^permissions.Bits(i>>16&1)*permissions.AddReactions)
		}
		l := g.lookups[i&(len(g.lookups)-1)]
		sink |= g.e.Channel(l.user, l.channel, benchNow)
	}
	_ = sink
}

func TestBenchGuildShape(t *testing.T) {
	g := newBenchGuild(t)
	visible := 0
	for _, l := range g.lookups[:10_000] {
		if g.e.Channel(l.user, l.channel, benchNow).Has(permissions.ViewChannel) {
			visible++
		}
	}
	t.Logf("bench guild: %d members, %d distinct role sets, %d/10000 random lookups can view", len(g.users), g.sets, visible)
	if g.sets < 100 || visible == 0 || visible == 10_000 {
		t.Errorf("unrealistic bench guild")
	}
}

// BenchmarkShadowSample is what the shadow check adds to every decision at
// the default 1 in 1000: the shared Sample (a random draw per decision)
// and the actor's Sampler (a countdown); compare with
// BenchmarkChannelCached, the decision itself.
func BenchmarkShadowSample(b *testing.B) {
	s, err := permissions.NewShadow(permissions.ShadowConfig{})
	if err != nil {
		b.Fatal(err)
	}
	b.Run("shared", func(b *testing.B) {
		n := 0
		for b.Loop() {
			if s.Sample() {
				n++
			}
		}
		b.ReportMetric(float64(n)/float64(b.N), "sampled/op")
	})
	b.Run("countdown", func(b *testing.B) {
		sm, n := s.Sampler(), 0
		for b.Loop() {
			if sm.Sample() {
				n++
			}
		}
		b.ReportMetric(float64(n)/float64(b.N), "sampled/op")
	})
}
