package fleet

import (
	"context"
	"testing"
	"time"

	"github.com/concord-chat/concord/runtime/domain/voice"
)

// TestPlacementOnQuality: a registry fleet stops placing new calls on the
// least-loaded server once its reports show poor quality (loss, jitter or
// RTT), keeps it healthy for the calls it has, ignores one bad period in a
// good history and reports without traffic, takes it back only once its
// figures fall below half the limits, and still places on the
// least-loaded server when every server is poor.
func TestPlacementOnQuality(t *testing.T) {
	ctx := context.Background()
	reg := &memRegistry{kv: map[string][]byte{}}
	now := time.Unix(1000, 0)
	f := NewRegistry(reg, RegistryConfig{TTL: time.Hour, Now: func() time.Time { return now }})
	rep := Reporter{Registry: reg}
	// a is the least loaded; b is busier.
	report := func(server string, participants int, mutate func(*voice.Load)) {
		t.Helper()
		l := voice.Load{Server: server, Region: "eu", Endpoint: server + ":443", Participants: participants, PacketsIn: 500, At: now}
		if mutate != nil {
			mutate(&l)
		}
		if err := rep.ReportLoad(ctx, l); err != nil {
			t.Fatal(err)
		}
	}
	period := func(a func(*voice.Load)) string {
		t.Helper()
		now = now.Add(2 * time.Second)
		report("a", 1, a)
		report("b", 5, nil)
		// Read twice: a report counts once however often it is read.
		for range 2 {
			if err := f.Refresh(ctx); err != nil {
				t.Fatal(err)
			}
		}
		s, err := f.Pick(ctx, "eu")
		if err != nil {
			t.Fatal(err)
		}
		if !f.Healthy("a") {
			t.Fatal("a server with poor quality stopped being healthy: its calls would move")
		}
		return s.ID
	}
	loss := func(r float64) func(*voice.Load) { return func(l *voice.Load) { l.LossRatio = r } }
	steps := []struct {
		name string
		a    func(*voice.Load)
		want string
	}{
		{"good", loss(0), "a"},
		{"one bad period in a good history", loss(0.15), "a"}, // smoothed 0.075
		{"second bad period", loss(0.3), "b"},                 // 0.19: poor
		{"no traffic says nothing", func(l *voice.Load) { l.PacketsIn = 0 }, "b"},
		{"better but above half the limit", loss(0), "b"},                          // 0.094
		{"below half the limit", loss(0), "a"},                                     // 0.047: good again
		{"jitter", func(l *voice.Load) { l.Jitter = 200 * time.Millisecond }, "b"}, // 100 ms smoothed
		{"jitter gone", nil, "b"},                                                  // 50 ms
		{"jitter gone, twice", nil, "b"},                                           // 25 ms: above half the limit (20 ms)
		{"jitter gone, thrice", nil, "a"},                                          // 12.5 ms
		{"rtt", func(l *voice.Load) { l.RTT = 2 * time.Second }, "b"},
	}
	for _, st := range steps {
		if got := period(st.a); got != st.want {
			t.Fatalf("%s: Pick = %s, want %s", st.name, got, st.want)
		}
	}
	// Every server poor: the least loaded still takes the call.
	now = now.Add(2 * time.Second)
	report("a", 1, loss(0.9))
	report("b", 5, loss(0.9))
	_ = f.Refresh(ctx)
	if s, err := f.Pick(ctx, "eu"); err != nil || s.ID != "a" {
		t.Fatalf("every server poor: Pick = %s, %v; want a", s.ID, err)
	}
}
