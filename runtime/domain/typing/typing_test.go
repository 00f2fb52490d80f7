package typing

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/event"
)

type clock struct{ now time.Time }

func (c *clock) Now() time.Time { return c.now }

func newTracker(t *testing.T) (*Tracker, *clock) {
	t.Helper()
	c := &clock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	tr, err := New(Config{Now: c.Now, Registerer: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	return tr, c
}

func ids(ss []event.Session) []string {
	var out []string
	for _, s := range ss {
		out = append(out, string(s.ID))
	}
	slices.Sort(out)
	return out
}

func TestOnlyViewersOfTheChannel(t *testing.T) {
	tr, _ := newTracker(t)
	const guild, general, random snowflake.ID = 1, 10, 11
	tr.Focus(event.Session{ID: "a", UserID: 100}, guild, general)
	tr.Focus(event.Session{ID: "b", UserID: 101}, guild, general)
	tr.Focus(event.Session{ID: "c", UserID: 102}, guild, random)
	tr.Focus(event.Session{ID: "typer-phone", UserID: 200}, guild, general)
	tr.Focus(event.Session{ID: "d", UserID: 103}, guild, general)
	tr.Focus(event.Session{ID: "d", UserID: 103}, guild, random) // moved away
	tr.Focus(event.Session{ID: "e", UserID: 104}, guild, general)
	tr.Focus(event.Session{ID: "e", UserID: 104}, guild, 0) // backgrounded
	o, got := tr.Typing(200, general)
	if o != Delivered || !slices.Equal(ids(got), []string{"a", "b"}) {
		t.Fatalf("Typing = %v %v", o, ids(got))
	}
	tr.Disconnect("a")
	if got := ids(tr.Viewers(general)); !slices.Equal(got, []string{"b", "typer-phone"}) {
		t.Fatalf("viewers = %v", got)
	}
	if g, ch, ok := tr.Focused("d"); !ok || g != guild || ch != random {
		t.Fatalf("focus of d = %v %v %v", g, ch, ok)
	}
}

func TestThrottle(t *testing.T) {
	tr, c := newTracker(t)
	tr.Focus(event.Session{ID: "v", UserID: 1}, 1, 10)
	if o, _ := tr.Typing(2, 10); o != Delivered {
		t.Fatalf("first = %v", o)
	}
	c.now = c.now.Add(7 * time.Second)
	if o, got := tr.Typing(2, 10); o != Throttled || got != nil {
		t.Fatalf("after 7s = %v %v", o, got)
	}
	c.now = c.now.Add(time.Second)
	if o, _ := tr.Typing(2, 10); o != Delivered {
		t.Fatalf("after 8s = %v", o)
	}
	// Another channel is throttled separately.
	if o, _ := tr.Typing(2, 11); o != Delivered {
		t.Fatalf("other channel = %v", o)
	}
	if v := testutil.ToFloat64(tr.outcomes.WithLabelValues("throttled")); v != 1 {
		t.Fatalf("throttled metric = %v", v)
	}
}

func TestCappedSample(t *testing.T) {
	tr, c := newTracker(t)
	for i := range 50 {
		tr.Focus(event.Session{ID: event.SessionID(fmt.Sprint("v", i)), UserID: snowflake.ID(1000 + i)}, 1, 10)
	}
	delivered := 0
	for u := snowflake.ID(1); u <= 20; u++ {
		if o, got := tr.Typing(u, 10); o == Delivered {
			delivered++
			if len(got) != 50 {
				t.Fatalf("delivered to %d sessions", len(got))
			}
		} else if o != Sampled {
			t.Fatalf("typer %d: %v", u, o)
		}
	}
	if delivered != 5 {
		t.Fatalf("delivered %d typers, want the cap of 5", delivered)
	}
	// A sampled typer keeps its slot when it types again after Throttle.
	c.now = c.now.Add(8 * time.Second)
	if o, _ := tr.Typing(1, 10); o != Delivered {
		t.Fatalf("sampled typer again = %v", o)
	}
	if o, _ := tr.Typing(9, 10); o != Sampled {
		t.Fatalf("new typer while 5 shown = %v", o)
	}
	// Once the others age out, new typers get in.
	c.now = c.now.Add(3 * time.Second)
	if o, _ := tr.Typing(9, 10); o != Delivered {
		t.Fatalf("after window = %v", o)
	}
}

func TestEvent(t *testing.T) {
	at := time.Unix(1700000000, 0)
	var got map[string]any
	if err := json.Unmarshal(Event(10, 1, 2, at, json.RawMessage(`{"roles":[]}`)), &got); err != nil {
		t.Fatal(err)
	}
	if got["channel_id"] != "10" || got["guild_id"] != "1" || got["user_id"] != "2" || got["timestamp"] != float64(1700000000) || got["member"] == nil {
		t.Fatalf("event = %v", got)
	}
	got = nil
	if err := json.Unmarshal(Event(10, 0, 2, at, nil), &got); err != nil {
		t.Fatal(err)
	}
	if _, ok := got["guild_id"]; ok {
		t.Fatalf("DM event has guild_id")
	}
}
