package history

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

// at builds times on one clock: at(3) is 3 ms after the start.
var t0 = time.Unix(1_700_000_000, 0)

func at(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

func send(client int, ch, nonce, id string, call, ret int, ok bool) Op {
	op := Op{Client: client, Kind: Send, Channel: ch, Nonce: nonce, Call: at(call), Return: at(ret), OK: ok, ID: id}
	if !ok {
		op.ID, op.Err = "", "503"
	}
	return op
}

func read(client int, ch string, call, ret, limit int, msgs ...Msg) Op {
	return Op{Client: client, Kind: Read, Channel: ch, Call: at(call), Return: at(ret), OK: true, Limit: limit, Msgs: msgs}
}

func m(id, nonce string, mentions ...string) Msg {
	return Msg{ID: id, Nonce: nonce, Mentions: mentions}
}

// good is a history every check passes: two sends, one failed send that
// landed (allowed), reads consistent with one order.
func good() Input {
	return Input{
		Ops: []Op{
			send(0, "c", "a", "10", 0, 10, true),
			send(1, "c", "b", "20", 5, 30, true),
			read(2, "c", 12, 14, 50, m("10", "a")),
			send(0, "c", "x", "", 40, 60, false),
			read(2, "c", 70, 80, 2, m("20", "b"), m("30", "x", "u")),
			{Client: 3, Kind: Comment, Channel: "s", Nonce: "k1", OK: true, ID: "c1", Call: at(1), Return: at(2)},
			{Client: 3, Kind: Comment, Channel: "s", Nonce: "k2", Call: at(3), Return: at(4), Err: "503"},
			{Client: 4, Kind: Ack, User: "w", Channel: "c", ID: "10", OK: true, Call: at(20), Return: at(21)},
			{Client: 4, Kind: Ack, User: "w", Channel: "c", ID: "20", OK: true, Call: at(31), Return: at(32)},
		},
		Final:      map[string][]Msg{"c": {m("10", "a"), m("20", "b"), m("30", "x", "u")}},
		Deliveries: []Delivery{{User: "u", Session: "s1", Channel: "c", Message: "10"}},
		Hidden:     map[string][]string{"u": {"secret"}},
		Mentions:   map[string]int{MentionKey("u", "c"): 1},
		Archive:    map[string][]string{"s": {"c1"}},
		Receipts:   []Receipt{{Viewer: "v", Stream: "s", Comment: "c1", Seq: 1}},
		Markers:    map[string]string{MentionKey("w", "c"): "20"},
	}
}

func TestCheckPassesAConsistentHistory(t *testing.T) {
	r := Check(good())
	if !r.OK() {
		t.Fatalf("a consistent history failed:\n%s", r)
	}
	if r.Acked != 2 || r.Failed != 1 || r.Landed != 1 || r.CommentsAcked != 1 || r.Received != 1 || r.ReceivedAcked != 1 {
		t.Fatalf("counts: %s", r)
	}
}

// Each case breaks one property; the checker must name it.
func TestCheckFindsEachViolation(t *testing.T) {
	cases := []struct {
		name   string
		break_ func(in *Input)
		want   string // in a violation, or "porcupine" for a linearizability verdict
	}{
		{"lost acknowledged send", func(in *Input) {
			in.Final["c"] = in.Final["c"][1:]
			in.Ops[2].Msgs = nil // keep the reads consistent with the loss
			in.Ops[4].Msgs = []Msg{m("20", "b"), m("30", "x", "u")}
		}, "not in the final history"},
		{"duplicated send", func(in *Input) {
			in.Final["c"] = append(in.Final["c"], m("40", "b"))
		}, "in the history 2 times"},
		{"failed send landed twice", func(in *Input) {
			in.Final["c"] = append(in.Final["c"], m("40", "x"))
		}, "in the history 2 times"},
		{"refused send landed", func(in *Input) {
			in.Ops[3].Definite = true
		}, "refused"},
		{"history out of order", func(in *Input) {
			in.Final["c"][0], in.Final["c"][1] = in.Final["c"][1], in.Final["c"][0]
		}, "snowflake order"},
		{"later send sorts first", func(in *Input) {
			in.Ops = append(in.Ops, send(4, "c", "late", "5", 100, 110, true))
			in.Final["c"] = append([]Msg{m("5", "late")}, in.Final["c"]...)
		}, "sorts before it"},
		{"stale read", func(in *Input) {
			// A read after a's acknowledgement that does not show it.
			in.Ops = append(in.Ops, read(5, "c", 35, 36, 50, m("20", "b")))
		}, "porcupine"},
		{"message vanished after a read", func(in *Input) {
			// x was read but is not in the final history.
			in.Final["c"] = in.Final["c"][:2]
		}, "porcupine"},
		{"leak to a session that cannot view", func(in *Input) {
			in.Deliveries = append(in.Deliveries, Delivery{User: "u", Session: "s2", Channel: "secret", Message: "99"})
		}, "cannot view"},
		{"mention count off", func(in *Input) {
			in.Mentions[MentionKey("u", "c")] = 2
		}, "mention_count 2"},
		{"acknowledged comment not archived", func(in *Input) {
			in.Archive["s"] = nil
		}, "in the archive 0 times"},
		{"comment archived twice", func(in *Input) {
			in.Archive["s"] = []string{"c1", "c1"}
		}, "archived 2 times"},
		{"comment received twice over SSE", func(in *Input) {
			in.Receipts = append(in.Receipts, Receipt{Viewer: "v", Stream: "s", Comment: "c1", Seq: 1})
		}, "received comment c1 of stream s twice"},
		{"comments received out of order", func(in *Input) {
			in.Archive["s"] = []string{"c0", "c1"}
			in.Receipts = append(in.Receipts, Receipt{Viewer: "v", Stream: "s", Comment: "c0", Seq: 0})
		}, "after seq 1"},
		{"read marker behind the last acknowledged ack", func(in *Input) {
			in.Markers[MentionKey("w", "c")] = "10"
		}, "read marker at \"10\""},
		{"comment received but not stored", func(in *Input) {
			in.Receipts = append(in.Receipts, Receipt{Viewer: "v", Stream: "s", Comment: "c9", Seq: 2})
		}, "not in the archive"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in := good()
			c.break_(&in)
			r := Check(in)
			if r.OK() {
				t.Fatalf("passed:\n%s", r)
			}
			if c.want == "porcupine" {
				if r.Linearizable["c"] != porcupine.Illegal {
					t.Fatalf("porcupine says %s, want Illegal:\n%s", r.Linearizable["c"], r)
				}
				if c.name == "stale read" && len(r.Stale) == 0 {
					t.Fatalf("no stale read named:\n%s", r)
				}
				return
			}
			if !strings.Contains(strings.Join(r.Violations, "\n"), c.want) {
				t.Fatalf("no violation naming %q:\n%s", c.want, r)
			}
		})
	}
}

// burst is a linearizable history of the size of test/faults'
// ConcurrentSendsOneOrder: six clients sending to one channel as fast as
// they are answered, each send taking effect at some point of its call,
// ids minted in that order, one client reading the newest hundred, a few
// sends failing after they took effect (the client timed out), and the
// final whole history.
func burst(sends int) Input {
	rng := rand.New(rand.NewPCG(28, 1031))
	var in Input
	var list []Msg
	type event struct {
		at  int // µs
		run func()
	}
	var q []event
	push := func(at int, f func()) {
		q = append(q, event{at, f})
		sort.SliceStable(q, func(i, j int) bool { return q[i].at < q[j].at })
	}
	id, n := 1000, 0
	var startSend func(client, at int)
	startSend = func(client, at int) {
		if n >= sends {
			return
		}
		n++
		nonce := fmt.Sprintf("w%d-%d", client, n)
		effect := at + 200 + rng.IntN(20_000)
		push(effect, func() {
			id++
			msg := m(strconv.Itoa(id), nonce)
			list = append(list, msg)
			ret := effect + rng.IntN(20_000)
			ok := rng.IntN(200) != 0
			op := Op{Client: client, Kind: Send, Channel: "c", Nonce: nonce, Call: at0(at), Return: at0(ret), OK: ok}
			if ok {
				op.ID = msg.ID
			} else {
				op.Err = "context deadline exceeded"
			}
			push(ret, func() {
				in.Ops = append(in.Ops, op)
				startSend(client, ret+100)
			})
		})
	}
	var startRead func(at int)
	startRead = func(at int) {
		if n >= sends {
			return
		}
		effect := at + 100 + rng.IntN(10_000)
		push(effect, func() {
			got := slices.Clone(list[max(0, len(list)-100):])
			ret := effect + rng.IntN(10_000)
			push(ret, func() {
				in.Ops = append(in.Ops, Op{Client: 6, Kind: Read, Channel: "c", Call: at0(at), Return: at0(ret), OK: true, Limit: 100, Msgs: got})
				startRead(ret + 5_000)
			})
		})
	}
	for c := range 6 {
		startSend(c, c*50)
	}
	startRead(0)
	for len(q) > 0 {
		e := q[0]
		q = q[1:]
		e.run()
	}
	in.Final = map[string][]Msg{"c": list}
	return in
}

func at0(us int) time.Time { return t0.Add(time.Duration(us) * time.Microsecond) }

// TestCheckDecidesABurst: porcupine decides a thousand concurrent sends
// to one channel with their reads, both ways, well inside its bound —
// Unknown (the search out of time) is never a verdict the suite can
// pass on, so the check must not end there.
func TestCheckDecidesABurst(t *testing.T) {
	in := burst(1100)
	in.Timeout = 2 * time.Minute
	r := Check(in)
	if r.Linearizable["c"] != porcupine.Ok || !r.OK() {
		t.Fatalf("a linearizable burst of %d sends was not found linearizable:\n%s", r.Sends, r)
	}
	if r.Sends < 1000 || r.Reads < 50 {
		t.Fatalf("the burst is too small to stand for ConcurrentSendsOneOrder: %s", r)
	}
	// A read in the middle that misses a message in its window (a hole:
	// that message became visible behind newer ones) is Illegal.
	bad := burst(1100)
	bad.Timeout = 2 * time.Minute
	var reads []int
	for i, op := range bad.Ops {
		if op.Kind == Read && len(op.Msgs) >= 3 {
			reads = append(reads, i)
		}
	}
	op := &bad.Ops[reads[len(reads)/2]]
	op.Msgs = slices.Delete(slices.Clone(op.Msgs), len(op.Msgs)/2, len(op.Msgs)/2+1)
	if r := Check(bad); r.Linearizable["c"] != porcupine.Illegal {
		t.Fatalf("a burst with a read missing a message between two it showed: porcupine says %s, want Illegal:\n%s", r.Linearizable["c"], r)
	}
}

// TestUnknownIsNotAPass: a verdict porcupine could not reach fails the
// check and says so.
func TestUnknownIsNotAPass(t *testing.T) {
	r := Result{Linearizable: map[string]porcupine.CheckResult{"c": porcupine.Unknown}}
	if r.OK() {
		t.Fatal("Unknown counted as a pass")
	}
	if !strings.Contains(r.String(), "UNDECIDED") {
		t.Fatalf("Unknown not explained:\n%s", r)
	}
}
