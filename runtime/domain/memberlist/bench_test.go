package memberlist

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/event"
	"github.com/concord-chat/concord/runtime/domain/presence"
)

// The simulated guild of the issue: 1,000,000 members, 100,000 of them
// online with one in-process session each, 5,000 of those sessions
// subscribed to member-list ranges: every one to rows 0-99 (what a client
// shows on opening the guild) and 60% also to one scrolled range, placed
// either uniformly in the list (scroll=uniform, pessimistic) or
// exponentially near the top with a mean of 500 rows (scroll=top, closer
// to how people scroll).
const (
	benchMembers     = 1_000_000
	benchOnline      = 100_000
	benchSubscribers = 5_000
)

type bigGuild struct {
	list     *List
	audience presence.Audience
	online   []snowflake.ID // user ids of online members
	members  map[snowflake.ID]Member
	sessions []event.Session // one per online member
	bySess   map[snowflake.ID]int
	rng      *rand.Rand
}

func benchMember(id snowflake.ID, name, status string, roles []snowflake.ID) Member {
	data := `{"user":{"id":"` + id.String() + `","username":"` + name + `"},"roles":[],"presence":{"user":{"id":"` +
		id.String() + `"},"status":"` + status + `","activities":[],"client_status":{"desktop":"` + status + `"}}}`
	return Member{UserID: id, Name: name, Roles: roles, Status: status, Data: json.RawMessage(data)}
}

func newBigGuild(b *testing.B, uniform bool) *bigGuild {
	b.Helper()
	rng := rand.New(rand.NewPCG(1, 2))
	hoisted := []Role{{ID: 1, Position: 30}, {ID: 2, Position: 20}, {ID: 3, Position: 10}}
	g := &bigGuild{
		list:     New(guildID, EveryoneList, hoisted, Config{}),
		audience: presence.Audience{},
		members:  make(map[snowflake.ID]Member, benchOnline),
		bySess:   make(map[snowflake.ID]int, benchOnline),
		rng:      rng,
	}
	g.list.SetMemberCount(benchMembers)
	// Every tenth member of the million is online.
	for i := range benchOnline {
		id := snowflake.ID(10*i + 1)
		var roles []snowflake.ID
		switch r := rng.IntN(1000); {
		case r < 1:
			roles = []snowflake.ID{1}
		case r < 5:
			roles = []snowflake.ID{2}
		case r < 25:
			roles = []snowflake.ID{3}
		}
		m := benchMember(id, "u"+strconv.FormatUint(rng.Uint64()%1e12, 36), string(presence.Online), roles)
		g.members[id] = m
		g.online = append(g.online, id)
		g.list.Upsert(m)
		g.sessions = append(g.sessions, event.Session{ID: event.SessionID("s" + id.String()), UserID: id,
			Node: "gw" + strconv.Itoa(i%8)})
		g.bySess[id] = i
	}
	for i := range benchSubscribers {
		s := g.sessions[rng.IntN(len(g.sessions))]
		rs := []Range{{0, 99}}
		if rng.IntN(10) < 6 {
			a := rng.IntN(g.list.Len()/100) * 100
			if !uniform {
				a = min(int(rng.ExpFloat64()*500)/100*100+100, g.list.Len()-100)
			}
			rs = append(rs, Range{a, a + 99})
		}
		if _, err := g.list.Subscribe(s, rs); err != nil {
			b.Fatalf("subscriber %d: %v", i, err)
		}
	}
	return g
}

// cpuTime returns the process's user+system CPU time, GC included: on a
// shared machine it measures the work, where ns/op measures the wait too.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// reportCPU reports CPU nanoseconds per iteration since start.
func reportCPU(b *testing.B, start time.Duration) {
	b.ReportMetric(float64(cpuTime(b)-start)/float64(b.N), "cpu-ns/op")
}

// naiveBroadcast is the baseline: one PRESENCE_UPDATE encoded once and
// addressed to every online session, batched per gateway node.
func (g *bigGuild) naiveBroadcast(payload json.RawMessage) int {
	byNode := make(map[string][]event.Target, 8)
	for _, s := range g.sessions {
		byNode[s.Node] = append(byNode[s.Node], event.Target{Session: s.ID})
	}
	n := 0
	for _, ts := range byNode {
		n += len(ts)
	}
	_ = payload
	return n
}

// change applies one presence change of a random online member the way a
// huge guild does: the member-list update to the sessions whose ranges it
// touches, and PRESENCE_UPDATE to the sessions displaying the member.
func (g *bigGuild) change(status string) (listDeliveries, presenceDeliveries int) {
	id := g.online[g.rng.IntN(len(g.online))]
	m := g.members[id]
	m = benchMember(id, m.Name, status, m.Roles)
	g.members[id] = m
	d := g.list.Upsert(m)
	_ = d.Batches()
	viewers := g.list.Viewers(id)
	targets := g.audience.Select(benchMembers, nil, nil, viewers)
	if len(targets) > 0 {
		_ = presence.Presence{Status: presence.Status(status), Activities: []presence.Activity{}}.Event(id, guildID)
	}
	return d.Deliveries(), len(targets)
}

// BenchmarkPresenceChange measures one presence change in the simulated
// guild: deliveries per change with range-based delivery against the
// naive broadcast count in the same run, and CPU per change.
//
//   - idle: a member toggles online/idle: one UPDATE at its row.
//   - offline: a member goes offline or comes back: its row is deleted
//     or inserted, which also shifts every range below it.
//   - naive: the baseline broadcast to all 100,000 online sessions.
func BenchmarkPresenceChange(b *testing.B) {
	for _, scroll := range []string{"uniform", "top"} {
		g := newBigGuild(b, scroll == "uniform")
		b.Run("scroll="+scroll, func(b *testing.B) { benchChanges(b, g) })
	}
	b.Run("naive", func(b *testing.B) {
		g := newBigGuild(b, true)
		var n int
		b.ReportAllocs()
		cpu := cpuTime(b)
		for b.Loop() {
			id := g.online[g.rng.IntN(len(g.online))]
			p := presence.Presence{Status: presence.Idle, Activities: []presence.Activity{}}.Event(id, guildID)
			n += g.naiveBroadcast(p)
		}
		reportCPU(b, cpu)
		b.ReportMetric(float64(n)/float64(b.N), "deliveries/op")
	})
}

func benchChanges(b *testing.B, g *bigGuild) {
	b.Run("idle", func(b *testing.B) {
		var list, pres int
		b.ReportAllocs()
		cpu := cpuTime(b)
		for i := 0; b.Loop(); i++ {
			st := string(presence.Idle)
			if i%2 == 1 {
				st = string(presence.Online)
			}
			l, p := g.change(st)
			list += l
			pres += p
		}
		reportCPU(b, cpu)
		b.ReportMetric(float64(list)/float64(b.N), "list-deliveries/op")
		b.ReportMetric(float64(pres)/float64(b.N), "presence-deliveries/op")
		b.ReportMetric(float64(len(g.sessions)), "naive-deliveries/op")
	})
	b.Run("offline", func(b *testing.B) {
		var list, pres int
		b.ReportAllocs()
		cpu := cpuTime(b)
		for b.Loop() {
			id := g.online[g.rng.IntN(len(g.online))]
			m := g.members[id]
			d := g.list.Remove(id)
			_ = d.Batches()
			list += d.Deliveries()
			d = g.list.Upsert(m)
			_ = d.Batches()
			list += d.Deliveries()
			pres += len(g.list.Viewers(id))
		}
		reportCPU(b, cpu)
		// Two changes (leave, return) per iteration.
		b.ReportMetric(float64(list)/float64(2*b.N), "list-deliveries/change")
		b.ReportMetric(float64(pres)/float64(b.N), "presence-deliveries/op")
		b.ReportMetric(float64(len(g.sessions)), "naive-deliveries/change")
	})
}

// sortedSlice is the naive reference: rows in a sorted slice, moved on
// every insert and delete.
type sortedSlice []rowKey

func (s *sortedSlice) insert(k rowKey) int {
	i, _ := slices.BinarySearchFunc(*s, k, compareRows)
	*s = slices.Insert(*s, i, k)
	return i
}

func (s *sortedSlice) delete(k rowKey) int {
	i, ok := slices.BinarySearchFunc(*s, k, compareRows)
	if ok {
		*s = slices.Delete(*s, i, i+1)
	}
	return i
}

// BenchmarkRows compares the order-statistic treap with a sorted slice at
// 100,000 rows: insert+delete of a random row (an online/offline change),
// rank of a row, and reading a 100-row range.
func BenchmarkRows(b *testing.B) {
	const n = benchOnline
	rng := rand.New(rand.NewPCG(3, 4))
	keys := make([]rowKey, n)
	for i := range keys {
		keys[i] = rowKey{section: rng.IntN(4), member: true, name: "u" + strconv.FormatUint(rng.Uint64()%1e12, 36), id: snowflake.ID(i + 1)}
	}
	tree := NewTree(compareRows)
	var slice sortedSlice
	for _, k := range keys {
		tree.Insert(k)
		slice.insert(k)
	}
	for _, impl := range []string{"treap", "slice"} {
		b.Run("op=update/impl="+impl, func(b *testing.B) {
			for b.Loop() {
				k := keys[rng.IntN(n)]
				if impl == "treap" {
					tree.Delete(k)
					tree.Insert(k)
				} else {
					slice.delete(k)
					slice.insert(k)
				}
			}
		})
		b.Run("op=rank/impl="+impl, func(b *testing.B) {
			sum := 0
			for b.Loop() {
				k := keys[rng.IntN(n)]
				var i int
				if impl == "treap" {
					i, _ = tree.Rank(k)
				} else {
					i, _ = slices.BinarySearchFunc(slice, k, compareRows)
				}
				sum += i
			}
			_ = sum
		})
		b.Run("op=range100/impl="+impl, func(b *testing.B) {
			sum := 0
			for b.Loop() {
				a := rng.IntN(n - 100)
				if impl == "treap" {
					tree.Range(a, a+99, func(_ int, k rowKey) bool { sum += int(k.id & 1); return true })
				} else {
					for _, k := range slice[a : a+100] {
						sum += int(k.id & 1)
					}
				}
			}
			_ = sum
		})
	}
	if tree.Len() != len(slice) {
		b.Fatalf("treap %d rows, slice %d", tree.Len(), len(slice))
	}
}

// BenchmarkListUpsert measures a List change at 100,000 rows without
// subscribers: the bookkeeping alone.
func BenchmarkListUpsert(b *testing.B) {
	l := New(guildID, EveryoneList, nil, Config{})
	for i := range benchOnline {
		l.Upsert(benchMember(snowflake.ID(i+1), fmt.Sprintf("m%06d", i), "online", nil))
	}
	rng := rand.New(rand.NewPCG(5, 6))
	st := []string{"idle", "online"}
	for i := 0; b.Loop(); i++ {
		id := snowflake.ID(rng.IntN(benchOnline) + 1)
		l.Upsert(benchMember(id, fmt.Sprintf("m%06d", id-1), st[i%2], nil))
	}
}
