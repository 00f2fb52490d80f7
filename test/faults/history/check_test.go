package history

import (
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
		},
		Final:      map[string][]Msg{"c": {m("10", "a"), m("20", "b"), m("30", "x", "u")}},
		Deliveries: []Delivery{{User: "u", Session: "s1", Channel: "c", Message: "10"}},
		Hidden:     map[string][]string{"u": {"secret"}},
		Mentions:   map[string]int{MentionKey("u", "c"): 1},
		Archive:    map[string][]string{"s": {"c1"}},
	}
}

func TestCheckPassesAConsistentHistory(t *testing.T) {
	r := Check(good())
	if !r.OK() {
		t.Fatalf("a consistent history failed:\n%s", r)
	}
	if r.Acked != 2 || r.Failed != 1 || r.Landed != 1 || r.CommentsAcked != 1 {
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
