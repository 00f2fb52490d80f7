package permissions

import (
	"flag"
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/concord-chat/concord/runtime/base/snowflake"
	"pgregory.net/rapid"
)

const (
	propGuild   snowflake.ID = 1000
	propUnknown snowflake.ID = 9999 // a role, user and channel that never exists
)

var (
	propRoles    = idRange(1001, 8) // plus propGuild (@everyone) and propUnknown
	propUsers    = idRange(1, 9)
	propChannels = idRange(2001, 6)
	propT0       = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	// Lookups happen before and after the generated timeouts end.
	propTimes = []time.Time{propT0, propT0.Add(2 * time.Hour)}
)

func idRange(first snowflake.ID, n int) []snowflake.ID {
	out := make([]snowflake.ID, n)
	for i := range out {
		out[i] = first + snowflake.ID(i)
	}
	return out
}

// interesting bits are set often so the implicit rules, administrator and
// the allow/deny interplay are hit; other bits ride along at random.
var interesting = []Bits{ViewChannel, SendMessages, Connect, ReadMessageHistory,
	MentionEveryone, SendTTSMessages, AttachFiles, EmbedLinks, Speak, Stream,
	PrioritySpeaker, MoveMembers, ManageMessages, RequestToSpeak}

// genBits draws role bits (dense: each interesting bit 3 in 4) or overwrite
// bits (sparse: 1 in 4).
func genBits(label string, dense bool) *rapid.Generator[Bits] {
	return rapid.Custom(func(t *rapid.T) Bits {
		// rapid favours small numbers; mix them so every bit is fair.
		x := mix(rapid.Uint64().Draw(t, label))
		var b Bits
		for i, bit := range interesting {
			if (x>>(2*i)&3 != 0) == dense {
				b |= bit
			}
		}
		if x>>58 == 0 { // 1 in 64
			b |= Administrator
		}
		if x>>56&15 == 0 {
			b |= Bits(mix(rapid.Uint64().Draw(t, label+"_extra"))) & All
		}
		return b
	})
}

var (
	genRoleID    = rapid.SampledFrom(append(append([]snowflake.ID{}, propRoles...), propGuild, propUnknown))
	genUserID    = rapid.SampledFrom(propUsers)
	genChannelID = rapid.SampledFrom(propChannels)
	genTimeout   = rapid.SampledFrom([]time.Time{{}, {}, propT0.Add(-time.Hour), propT0, propT0.Add(time.Hour)})
)

func mix(x uint64) uint64 { // splitmix64 finaliser
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ x>>31
}

func genOverwrite(t *rapid.T) Overwrite {
	ow := Overwrite{Allow: genBits("allow", false).Draw(t, "allow"), Deny: genBits("deny", false).Draw(t, "deny")}
	switch rapid.IntRange(0, 3).Draw(t, "kind") {
	case 0:
		ow.ID = propGuild
	case 1, 2:
		ow.ID = genRoleID.Draw(t, "role")
	default:
		ow.Member = true
		ow.ID = genUserID.Draw(t, "user")
	}
	return ow
}

// propComparisons counts (guild state, user, channel, time) cases checked.
var propComparisons atomic.Int64

// propNontrivial counts the cases whose answer is neither 0 nor All.
var propNontrivial atomic.Int64

// TestEngineMatchesReference generates guilds and interleaved mutations and
// compares, after every mutation, the cached engine, the uncached engine and
// the naive reference over every user and channel of the pools (plus an
// unknown one of each) at two instants.
func TestEngineMatchesReference(t *testing.T) {
	propComparisons.Store(0)
	propNontrivial.Store(0)
	rapid.Check(t, func(t *rapid.T) {
		owner := genUserID.Draw(t, "owner")
		e := NewEngine(propGuild, owner)
		g := newRefGuild(propGuild, owner)
		// A populated guild to start from, then interleaved mutations.
		for _, id := range append([]snowflake.ID{propGuild}, propRoles...) {
			if rapid.IntRange(0, 5).Draw(t, "role_missing") < 5 {
				bits := genBits("bits", true).Draw(t, "bits")
				e.SetRole(id, bits)
				g.roles[id] = bits
			}
		}
		for _, id := range propChannels {
			ows := rapid.SliceOfN(rapid.Custom(genOverwrite), 0, 8).Draw(t, "overwrites")
			e.SetOverwrites(id, ows)
			g.channels[id] = ows
		}
		for _, id := range propUsers {
			if rapid.IntRange(0, 5).Draw(t, "member_missing") < 5 {
				m := Member{
					UserID:       id,
					Roles:        rapid.SliceOfN(genRoleID, 0, 5).Draw(t, "roles"),
					TimeoutUntil: genTimeout.Draw(t, "timeout"),
				}
				e.SetMember(m)
				g.members[id] = m
			}
		}
		t.Repeat(map[string]func(*rapid.T){
			"SetRole": func(t *rapid.T) {
				id, bits := genRoleID.Draw(t, "role"), genBits("bits", true).Draw(t, "bits")
				e.SetRole(id, bits)
				g.roles[id] = bits
			},
			"SetOverwrites": func(t *rapid.T) {
				id := genChannelID.Draw(t, "channel")
				ows := rapid.SliceOfN(rapid.Custom(genOverwrite), 0, 8).Draw(t, "overwrites")
				e.SetOverwrites(id, ows)
				g.channels[id] = ows
			},
			"SetMember": func(t *rapid.T) {
				m := Member{
					UserID:       genUserID.Draw(t, "user"),
					Roles:        rapid.SliceOfN(genRoleID, 0, 5).Draw(t, "roles"),
					TimeoutUntil: genTimeout.Draw(t, "timeout"),
				}
				e.SetMember(m)
				g.members[m.UserID] = m
			},
			// Deletions share one action so the guild does not empty out.
			"Delete": func(t *rapid.T) {
				switch rapid.IntRange(0, 2).Draw(t, "what") {
				case 0:
					id := genRoleID.Draw(t, "role")
					e.DeleteRole(id)
					delete(g.roles, id)
				case 1:
					id := genChannelID.Draw(t, "channel")
					e.DeleteChannel(id)
					delete(g.channels, id)
				default:
					id := genUserID.Draw(t, "user")
					e.DeleteMember(id)
					delete(g.members, id)
				}
			},
			"SetOwner": func(t *rapid.T) {
				id := genUserID.Draw(t, "user")
				e.SetOwner(id)
				g.owner = id
			},
			"": func(t *rapid.T) { compareAll(t, e, g) },
		})
	})
	n := propComparisons.Load()
	t.Logf("%d generated cases (guild state × user × channel × time) compared, %d of them neither 0 nor All: cached = uncached = reference, 0 disagreements", n, propNontrivial.Load())
	if f := flag.Lookup("rapid.checks"); f != nil {
		if checks, _ := strconv.Atoi(f.Value.String()); checks >= 100 && !testing.Short() && n < 100_000 {
			t.Fatalf("only %d cases compared, want at least 100000", n)
		}
	}
}

func compareAll(t *rapid.T, e *Engine, g *refGuild) {
	users := append(append([]snowflake.ID{}, propUsers...), propUnknown)
	channels := append(append([]snowflake.ID{}, propChannels...), propUnknown)
	for _, now := range propTimes {
		for _, u := range users {
			if got, want := e.Base(u, now), g.refBase(u, now); got != want {
				t.Fatalf("Base(user %d, %s) = %s, reference %s\n%s", u, now.Format(time.TimeOnly), fmtBits(got), fmtBits(want), dumpGuild(g))
			}
			for _, c := range channels {
				want := g.refChannel(u, c, now)
				if got := e.ChannelUncached(u, c, now); got != want {
					t.Fatalf("ChannelUncached(user %d, channel %d, %s) = %s, reference %s\n%s", u, c, now.Format(time.TimeOnly), fmtBits(got), fmtBits(want), dumpGuild(g))
				}
				if got := e.Channel(u, c, now); got != want {
					t.Fatalf("Channel(user %d, channel %d, %s) = %s, reference %s\n%s", u, c, now.Format(time.TimeOnly), fmtBits(got), fmtBits(want), dumpGuild(g))
				}
				if got, ok := g.compute(u, c, now); ok && got != want {
					t.Fatalf("Compute(user %d, channel %d, %s) = %s, reference %s\n%s", u, c, now.Format(time.TimeOnly), fmtBits(got), fmtBits(want), dumpGuild(g))
				}
				propComparisons.Add(1)
				if want != 0 && want != All {
					propNontrivial.Add(1)
				}
			}
		}
	}
	if got, want := e.Stats().Entries, countEntries(e); got != want {
		t.Fatalf("Stats().Entries = %d, cache holds %d", got, want)
	}
	if live := len(e.sets) - len(e.freeSets); live != len(e.setIDs) || live > len(e.members) {
		t.Fatalf("%d role sets live, %d interned, for %d members", live, len(e.setIDs), len(e.members))
	}
}

func countEntries(e *Engine) int {
	n := 0
	for _, ch := range e.channels {
		for id, v := range ch.cache {
			if v != 0 {
				if e.sets[id] == nil {
					panic("entry of a released role set")
				}
				n++
			}
		}
	}
	return n
}

func fmtBits(b Bits) string {
	var names []string
	for bit, name := range bitNames {
		if b&bit != 0 {
			names = append(names, name)
		}
	}
	return fmt.Sprintf("%#x %v", uint64(b), names)
}

var bitNames = map[Bits]string{ViewChannel: "VIEW", SendMessages: "SEND", Connect: "CONNECT",
	ReadMessageHistory: "HISTORY", MentionEveryone: "MENTION", Administrator: "ADMIN", Speak: "SPEAK"}

func dumpGuild(g *refGuild) string {
	return fmt.Sprintf("owner=%d\nroles=%v\nchannels=%+v\nmembers=%+v", g.owner, g.roles, g.channels, g.members)
}
