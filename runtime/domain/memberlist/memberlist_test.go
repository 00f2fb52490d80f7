package memberlist

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/event"
)

const guildID snowflake.ID = 1000

// TestListAgainstNaiveAndClients applies random joins, leaves, status,
// role and name changes, hoisted-role changes and re-subscriptions to a
// list, and after every change checks (1) the rows equal a naive sorted
// slice and (2) every subscribed client that applied only the operations
// it was sent holds exactly the list's rows in its ranges.
func TestListAgainstNaiveAndClients(t *testing.T) {
	for _, showOffline := range []bool{false, true} {
		for seed := range uint64(6) {
			t.Run(fmt.Sprintf("offline=%v/seed=%d", showOffline, seed), func(t *testing.T) {
				runRandomList(t, seed, showOffline)
			})
		}
	}
}

func runRandomList(t *testing.T, seed uint64, showOffline bool) {
	rng := rand.New(rand.NewPCG(seed, 7))
	roleIDs := []snowflake.ID{11, 12, 13, 14}
	hoisted := []Role{{ID: 11, Position: 3}, {ID: 12, Position: 5}}
	l := New(guildID, EveryoneList, hoisted, Config{ShowOffline: showOffline, MaxWidth: 10, MaxRanges: 3})
	members := make(map[snowflake.ID]Member)
	clients := make(map[event.SessionID]*client)
	sessions := make(map[event.SessionID]event.Session)
	for i := range 8 {
		s := session(fmt.Sprintf("s%d", i), snowflake.ID(900+i))
		sessions[s.ID] = s
		clients[s.ID] = newClient()
	}
	statuses := []string{StatusOnline, StatusIdle, StatusDND, StatusOffline}
	names := []string{"ann", "Bob", "bob", "carl", "dora", "Eve", "fay", "gus", "hal", "ivy"}
	randomMember := func(id snowflake.ID) Member {
		var roles []snowflake.ID
		for _, r := range roleIDs {
			if rng.IntN(3) == 0 {
				roles = append(roles, r)
			}
		}
		return member(id, names[rng.IntN(len(names))], statuses[rng.IntN(len(statuses))], roles...)
	}
	for step := range 1500 {
		var d Dispatch
		what := ""
		switch op := rng.IntN(20); {
		case op < 9:
			id := snowflake.ID(1 + rng.IntN(60))
			m := randomMember(id)
			if old, ok := members[id]; ok && rng.IntN(2) == 0 {
				// Only the status changes.
				m = old
				m.Status = statuses[rng.IntN(len(statuses))]
				m.Data = member(id, m.Name, m.Status, m.Roles...).Data
			}
			what = fmt.Sprintf("upsert %d %s %s %v", id, m.Name, m.Status, m.Roles)
			members[id] = m
			d = l.Upsert(m)
		case op < 14:
			id := snowflake.ID(1 + rng.IntN(60))
			what = fmt.Sprintf("remove %d", id)
			delete(members, id)
			d = l.Remove(id)
		case op < 19:
			s := sessions[event.SessionID(fmt.Sprintf("s%d", rng.IntN(8)))]
			var rs []Range
			for range rng.IntN(4) {
				a := rng.IntN(l.Len() + 5)
				rs = append(rs, Range{a, a + rng.IntN(12)})
			}
			what = fmt.Sprintf("subscribe %s %v", s.ID, rs)
			var err error
			d, err = l.Subscribe(s, rs)
			if err != nil && !errors.Is(err, ErrTooManyRanges) && !errors.Is(err, ErrBadRange) {
				t.Fatalf("step %d: %s: %v", step, what, err)
			}
			clients[s.ID].ranges = l.Ranges(s.ID)
			for i := range clients[s.ID].rows {
				if !clients[s.ID].covers(i) {
					delete(clients[s.ID].rows, i)
				}
			}
		default:
			hoisted = []Role{{ID: roleIDs[rng.IntN(4)], Position: rng.IntN(4)}, {ID: roleIDs[rng.IntN(4)], Position: 4}}
			if hoisted[0].ID == hoisted[1].ID {
				hoisted = hoisted[:1]
			}
			what = fmt.Sprintf("set roles %v", hoisted)
			d = l.SetRoles(hoisted)
		}
		got := deliver(t, d, clients)
		what = fmt.Sprintf("step %d: %s", step, what)
		if want := naiveRows(members, hoisted, showOffline); !slices.Equal(listRows(l), want) {
			t.Fatalf("%s: rows\n%v\nwant\n%v", what, listRows(l), want)
		}
		for id, c := range clients {
			c.check(t, l, what+" session "+string(id))
			if got[id] > 0 && len(c.ranges) == 0 {
				t.Fatalf("%s: unsubscribed session %s got ops", what, id)
			}
		}
		online := 0
		for _, m := range members {
			if m.Status != StatusOffline {
				online++
			}
		}
		if l.OnlineCount() != online {
			t.Fatalf("%s: online count %d, want %d", what, l.OnlineCount(), online)
		}
	}
}

// onlineList returns a list of n online members named m000.. with
// subscriptions for the given sessions.
func onlineList(t *testing.T, n int, subs map[string][]Range) (*List, map[event.SessionID]*client) {
	t.Helper()
	l := New(guildID, EveryoneList, nil, Config{})
	for i := range n {
		l.Upsert(member(snowflake.ID(i+1), fmt.Sprintf("m%03d", i), StatusOnline))
	}
	clients := make(map[event.SessionID]*client)
	for id, rs := range subs {
		s := session(id, 5000)
		c := newClient()
		clients[s.ID] = c
		d, err := l.Subscribe(s, rs)
		if err != nil {
			t.Fatal(err)
		}
		c.ranges = l.Ranges(s.ID)
		deliver(t, d, clients)
		c.check(t, l, "after subscribe")
	}
	return l, clients
}

func sessionIDs(v Variant) []string {
	var out []string
	for _, s := range v.Sessions {
		out = append(out, string(s.ID))
	}
	slices.Sort(out)
	return out
}

// TestIdleIsOneUpdate: a member going idle is one UPDATE at its row for
// exactly the sessions whose ranges show the row.
func TestIdleIsOneUpdate(t *testing.T) {
	l, clients := onlineList(t, 300, map[string][]Range{
		"a1": {{0, 99}},
		"b2": {{100, 199}},
		"c3": {{0, 99}, {200, 299}},
		"d4": {{40, 60}},
		"e5": {{51, 60}},
	})
	// Row 0 is the "online" header, so m049 (user 50) is row 50.
	if i, _ := l.Index(50); i != 50 {
		t.Fatalf("index of user 50 = %d", i)
	}
	d := l.Upsert(member(50, "m049", StatusIdle))
	if len(d.Variants) != 1 {
		t.Fatalf("variants = %d, want 1", len(d.Variants))
	}
	v := d.Variants[0]
	if got := sessionIDs(v); !slices.Equal(got, []string{"a1", "c3", "d4"}) {
		t.Fatalf("sessions = %v", got)
	}
	if len(v.Ops) != 1 || v.Ops[0].Op != OpUpdate || v.Ops[0].Index != 50 {
		t.Fatalf("ops = %+v", v.Ops)
	}
	deliver(t, d, clients)
	for _, c := range clients {
		c.check(t, l, "idle")
	}
	// A change below every range reaches nobody.
	// m299 is row 300, past every range.
	if d := l.Upsert(member(300, "m299", StatusDND)); d.Deliveries() != 0 {
		t.Fatalf("row 300 change delivered %d", d.Deliveries())
	}
}

// TestJoinAndLeaveOps checks the exact operations of a first join (group
// header then row), a join above a range (shift), and a leave.
func TestJoinAndLeaveOps(t *testing.T) {
	l := New(guildID, EveryoneList, []Role{{ID: 77, Position: 1}}, Config{})
	s := session("x1", 5000)
	if _, err := l.Subscribe(s, []Range{{0, 99}}); err != nil {
		t.Fatal(err)
	}
	d := l.Upsert(member(1, "zed", StatusOnline))
	ops := d.Variants[0].Ops
	if len(ops) != 2 || ops[0].Op != OpInsert || ops[0].Index != 0 || string(ops[0].Item) != `{"group":{"id":"online","count":1}}` ||
		ops[1].Op != OpInsert || ops[1].Index != 1 {
		t.Fatalf("first join ops = %v", opsString(ops))
	}
	d = l.Upsert(member(2, "amy", StatusOnline, 77))
	if got := opsString(d.Variants[0].Ops); got != "INSERT 0,INSERT 1" {
		t.Fatalf("hoisted join ops = %s", got)
	}
	// Rows: [77 header, amy, online header, zed]. amy leaves: her row and
	// her group's header go.
	d = l.Remove(2)
	if got := opsString(d.Variants[0].Ops); got != "DELETE 1,DELETE 0" {
		t.Fatalf("leave ops = %s", got)
	}
	var p struct {
		Groups      []GroupCount `json:"groups"`
		OnlineCount int          `json:"online_count"`
		ID          string       `json:"id"`
		GuildID     string       `json:"guild_id"`
	}
	if err := json.Unmarshal(d.Variants[0].Payload, &p); err != nil {
		t.Fatal(err)
	}
	if p.ID != EveryoneList || p.GuildID != "1000" || p.OnlineCount != 1 || len(p.Groups) != 1 || p.Groups[0] != (GroupCount{ID: GroupOnline, Count: 1}) {
		t.Fatalf("payload = %s", d.Variants[0].Payload)
	}
}

// TestShiftFromAbove: a join above a scrolled range shifts it; the session
// gets the INSERT and an UPDATE of the row that moved in at its top.
func TestShiftFromAbove(t *testing.T) {
	l, clients := onlineList(t, 300, map[string][]Range{"far9": {{200, 299}}, "top1": {{0, 99}}, "both2": {{0, 99}, {100, 199}}})
	d := l.Upsert(member(999, "a", StatusOnline)) // sorts first: row 1
	deliver(t, d, clients)
	for id, c := range clients {
		c.check(t, l, "shift "+string(id))
	}
	for _, v := range d.Variants {
		ids := sessionIDs(v)
		switch {
		case slices.Equal(ids, []string{"far9"}):
			if got := opsString(v.Ops); got != "INSERT 1,UPDATE 200" {
				t.Fatalf("far ops = %s", got)
			}
		case slices.Contains(ids, "both2"):
			if got := opsString(v.Ops); got != "INSERT 1" {
				t.Fatalf("adjacent ranges ops = %s", got)
			}
		}
	}
}

// TestOffline: without offline members a member going offline loses its
// row; with them it moves to the "offline" group at the end.
func TestOffline(t *testing.T) {
	l := New(guildID, EveryoneList, nil, Config{})
	l.Upsert(member(1, "a", StatusOnline))
	l.Upsert(member(1, "a", StatusOffline))
	if l.Len() != 0 || l.OnlineCount() != 0 {
		t.Fatalf("offline member kept: %v", listRows(l))
	}
	l = New(guildID, EveryoneList, []Role{{ID: 5, Position: 2}}, Config{ShowOffline: true})
	l.Upsert(member(1, "a", StatusOffline, 5))
	l.Upsert(member(2, "b", StatusOnline, 5))
	want := []string{`{"group":{"id":"5","count":1}}`, `{"member":` + string(member(2, "b", StatusOnline, 5).Data) + `}`,
		`{"group":{"id":"offline","count":1}}`, `{"member":` + string(member(1, "a", StatusOffline, 5).Data) + `}`}
	if got := listRows(l); !slices.Equal(got, want) {
		t.Fatalf("rows = %v", got)
	}
	if l.OnlineCount() != 1 {
		t.Fatalf("online = %d", l.OnlineCount())
	}
}

// TestSubscribeClamps checks range validation.
func TestSubscribeClamps(t *testing.T) {
	l, _ := onlineList(t, 500, nil)
	s := session("q1", 5000)
	_, err := l.Subscribe(s, []Range{{-5, 50}, {100, 350}, {10, 5}, {1e9, 1e9 + 10}})
	if !errors.Is(err, ErrBadRange) {
		t.Fatalf("err = %v, want ErrBadRange", err)
	}
	if got := l.Ranges(s.ID); !slices.Equal(got, []Range{{0, 50}, {100, 199}}) {
		t.Fatalf("ranges = %v", got)
	}
	_, err = l.Subscribe(s, []Range{{0, 9}, {10, 19}, {20, 29}, {30, 39}, {40, 49}, {50, 59}})
	if !errors.Is(err, ErrTooManyRanges) {
		t.Fatalf("err = %v, want ErrTooManyRanges", err)
	}
	if got := l.Ranges(s.ID); len(got) != 5 {
		t.Fatalf("ranges = %v", got)
	}
	// Re-sending held ranges syncs only the new ones.
	d, err := l.Subscribe(s, []Range{{0, 9}, {60, 69}})
	if err != nil {
		t.Fatal(err)
	}
	if got := opsString(d.Variants[0].Ops); got != "SYNC 60-69" {
		t.Fatalf("ops = %s", got)
	}
	if d, _ := l.Subscribe(s, nil); !d.Empty() || l.Subscribers() != 0 {
		t.Fatalf("empty subscribe kept the session")
	}
}

func opsString(ops []Op) string {
	var out []string
	for _, o := range ops {
		switch o.Op {
		case OpSync, OpInvalidate:
			out = append(out, fmt.Sprintf("%s %d-%d", o.Op, o.Range[0], o.Range[1]))
		default:
			out = append(out, fmt.Sprintf("%s %d", o.Op, o.Index))
		}
	}
	return strings.Join(out, ",")
}

// TestBatches: each node's batch holds only its sessions' variants, and
// every target points at the payload its session should get.
func TestBatches(t *testing.T) {
	d := Dispatch{Variants: []Variant{
		{Payload: []byte(`"a"`), Sessions: []event.Session{{ID: "1", Node: "x"}, {ID: "2", Node: "y"}}},
		{Payload: []byte(`"b"`), Sessions: []event.Session{{ID: "3", Node: "y"}}},
		{Payload: []byte(`"c"`), Sessions: []event.Session{{ID: "4", Node: "z"}, {ID: "5", Node: "y"}}},
	}}
	bs := d.Batches()
	want := map[string]map[event.SessionID]string{
		"x": {"1": `"a"`},
		"y": {"2": `"a"`, "3": `"b"`, "5": `"c"`},
		"z": {"4": `"c"`},
	}
	if len(bs) != len(want) {
		t.Fatalf("%d batches", len(bs))
	}
	for node, targets := range want {
		b := bs[node]
		if b.Type != DispatchType || len(b.Payloads) != len(targets) || len(b.Targets) != len(targets) {
			t.Fatalf("node %s batch %+v", node, b)
		}
		for _, tg := range b.Targets {
			if got := string(b.Payloads[tg.Variant]); got != targets[tg.Session] {
				t.Fatalf("node %s session %s gets %s, want %s", node, tg.Session, got, targets[tg.Session])
			}
		}
	}
}
