package autoscale

import (
	"errors"
	"strings"
	"testing"
	"time"

	concordv1 "github.com/concord-chat/concord/apis/v1alpha1"
	"github.com/concord-chat/concord/operator/fleet"
)

func livePolicy() concordv1.LiveGatewayAutoscaling {
	return concordv1.LiveGatewayAutoscaling{ViewersPerGateway: 25_000, MinReplicas: 2, MaxReplicas: 40, ScaleDownAfter: d(10 * time.Minute)}
}

// audience spreads n viewers over gateways of at most 30,000 each.
func audience(n int64) []fleet.GatewayViewers {
	var out []fleet.GatewayViewers
	for i := 0; n > 0; i++ {
		v := min(n, 30_000)
		out = append(out, fleet.GatewayViewers{Gateway: "gw-" + string(rune('a'+i%26)), Viewers: v, Streams: 1})
		n -= v
	}
	return out
}

// liveRound runs one round and returns the replicas after it (current
// when there is no decision).
func liveRound(t *testing.T, p *Planner, now time.Time, pol concordv1.LiveGatewayAutoscaling, viewers int64, cur int32) (int32, LivePlan) {
	t.Helper()
	plan := p.PlanLiveGateway(now, pol, audience(viewers), nil, cur)
	if plan.Decision == nil {
		if plan.Status.Replicas != cur {
			t.Fatalf("no decision but status replicas %d, current %d", plan.Status.Replicas, cur)
		}
		return cur, plan
	}
	if plan.Decision.Kind != ScaleLiveGateway || plan.Decision.From != cur || plan.Status.Replicas != plan.Decision.To {
		t.Fatalf("decision %+v from %d, status replicas %d", *plan.Decision, cur, plan.Status.Replicas)
	}
	return plan.Decision.To, plan
}

// A surge scales up in the round that sees it: ceil(viewers / per gateway).
func TestLiveGatewayScalesUpAtOnce(t *testing.T) {
	p := NewPlanner()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	pol := livePolicy()
	cur, plan := liveRound(t, p, t0, pol, 40_000, 2)
	if cur != 2 || plan.Status.Viewers != 40_000 || plan.Status.RecommendedReplicas != 2 || !plan.Status.SignalOK {
		t.Fatalf("40k viewers: replicas %d, status %+v", cur, plan.Status)
	}
	cur, plan = liveRound(t, p, t0.Add(15*time.Second), pol, 250_001, cur)
	if cur != 11 {
		t.Fatalf("250,001 viewers: %d replicas, want 11 at once", cur)
	}
	if plan.Status.Gateways != 9 || plan.Status.BusiestGatewayViewers != 30_000 || !strings.Contains(plan.Decision.Reason, "250001 viewers") {
		t.Fatalf("status %+v, reason %q", plan.Status, plan.Decision.Reason)
	}
}

// A shrinking audience shrinks the role only after the window, to the
// highest recommendation of that window: a dip and a return inside the
// window change nothing (no flapping).
func TestLiveGatewayScalesDownAfterWindow(t *testing.T) {
	p := NewPlanner()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	pol := livePolicy()
	cur, _ := liveRound(t, p, t0, pol, 500_000, 2) // 20
	if cur != 20 {
		t.Fatalf("500k: %d", cur)
	}
	now := t0
	step := func(d time.Duration, viewers int64) {
		now = now.Add(d)
		cur, _ = liveRound(t, p, now, pol, viewers, cur)
	}
	// Down to 100k (4) for 9 minutes, back to 500k, down again: nothing moves.
	for range 36 {
		step(15*time.Second, 100_000)
		if cur != 20 {
			t.Fatalf("%s after the peak: scaled to %d inside the window", now.Sub(t0), cur)
		}
	}
	step(15*time.Second, 480_000)
	if cur != 20 {
		t.Fatalf("back to 480k: %d", cur)
	}
	peak := now
	for now.Sub(peak) < 10*time.Minute {
		step(15*time.Second, 100_000)
		if now.Sub(peak) < 10*time.Minute && cur != 20 {
			t.Fatalf("%s after the last peak: scaled to %d inside the window", now.Sub(peak), cur)
		}
	}
	// The 480k round ages out: the highest recommendation left is 4.
	step(15*time.Second, 100_000)
	if cur != 4 {
		t.Fatalf("%s after the last peak: %d replicas, want 4", now.Sub(peak), cur)
	}
}

// The window is configurable; 0 shrinks at once.
func TestLiveGatewayWindowConfigurable(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	pol := livePolicy()
	pol.ScaleDownAfter = d(time.Minute)
	p := NewPlanner()
	cur, _ := liveRound(t, p, t0, pol, 200_000, 8)
	cur, _ = liveRound(t, p, t0.Add(30*time.Second), pol, 50_000, cur)
	if cur != 8 {
		t.Fatalf("30 s into a 1 min window: %d", cur)
	}
	cur, _ = liveRound(t, p, t0.Add(61*time.Second), pol, 50_000, cur)
	if cur != 2 {
		t.Fatalf("61 s, window 1 min: %d, want 2", cur)
	}
	pol.ScaleDownAfter = d(0)
	p = NewPlanner()
	if cur, _ = liveRound(t, p, t0, pol, 50_000, 8); cur != 2 {
		t.Fatalf("window 0: %d, want 2 at once", cur)
	}
}

// A planner that just started (an operator restart, a new leader) waits
// a whole window before shrinking: it does not know the last 10 minutes.
func TestLiveGatewayNoScaleDownBeforeAWindowOfReadings(t *testing.T) {
	p := NewPlanner()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	pol := livePolicy()
	cur, plan := liveRound(t, p, t0, pol, 10_000, 12)
	if cur != 12 || !strings.Contains(plan.Status.Message, "shrinking after") {
		t.Fatalf("first round: %d, %q", cur, plan.Status.Message)
	}
	cur, _ = liveRound(t, p, t0.Add(9*time.Minute), pol, 10_000, cur)
	if cur != 12 {
		t.Fatalf("9 min: %d", cur)
	}
	if cur, _ = liveRound(t, p, t0.Add(10*time.Minute), pol, 10_000, cur); cur != 2 {
		t.Fatalf("10 min: %d, want 2", cur)
	}
}

// Min and max bound the recommendation; a max lowered under the current
// count applies at once.
func TestLiveGatewayMinMax(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	pol := livePolicy()
	pol.MinReplicas, pol.MaxReplicas = 3, 10
	p := NewPlanner()
	if cur, _ := liveRound(t, p, t0, pol, 5_000_000, 3); cur != 10 {
		t.Fatalf("5 M viewers, max 10: %d", cur)
	}
	if cur, _ := liveRound(t, p, t0, pol, 100, 1); cur != 3 {
		t.Fatalf("below min: %d, want 3 at once", cur)
	}
	if cur, _ := liveRound(t, p, t0, pol, 100, 14); cur != 10 {
		t.Fatalf("above max: %d, want 10 at once", cur)
	}
	// Zero fields take the defaults: 25,000 per gateway, min 1.
	p = NewPlanner()
	if cur, _ := liveRound(t, p, t0, concordv1.LiveGatewayAutoscaling{MaxReplicas: 50}, 60_000, 1); cur != 3 {
		t.Fatalf("defaults, 60k viewers: %d, want 3", cur)
	}
}

// No viewers (nobody watches, no gateway reports) is a real reading:
// after the window the role is at its minimum.
func TestLiveGatewayZeroViewers(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	pol := livePolicy()
	p := NewPlanner()
	plan := p.PlanLiveGateway(t0, pol, nil, nil, 6)
	if plan.Decision != nil || !plan.Status.SignalOK || plan.Status.Viewers != 0 || plan.Status.RecommendedReplicas != 2 {
		t.Fatalf("zero viewers, first round: %+v", plan)
	}
	plan = p.PlanLiveGateway(t0.Add(10*time.Minute), pol, []fleet.GatewayViewers{}, nil, 6)
	if plan.Decision == nil || plan.Decision.To != 2 {
		t.Fatalf("zero viewers for the window: %+v, want 6 -> 2", plan)
	}
}

// A missing signal keeps the current count, however long, and starts the
// window over: the planner shrinks only after a whole window of readings
// after the signal returns.
func TestLiveGatewayMissingSignalKeepsReplicas(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	pol := livePolicy()
	p := NewPlanner()
	cur, _ := liveRound(t, p, t0, pol, 300_000, 2)
	if cur != 12 {
		t.Fatalf("300k: %d", cur)
	}
	down := errors.New("etcd: context deadline exceeded")
	for i := 1; i <= 80; i++ { // 20 minutes without a reading
		plan := p.PlanLiveGateway(t0.Add(time.Duration(i)*15*time.Second), pol, nil, down, cur)
		if plan.Decision != nil || plan.Status.SignalOK || plan.Status.Replicas != cur || !strings.Contains(plan.Status.Message, "deadline exceeded") {
			t.Fatalf("missing signal, round %d: %+v", i, plan)
		}
	}
	back := t0.Add(20*time.Minute + 15*time.Second)
	cur, _ = liveRound(t, p, back, pol, 10_000, cur)
	if cur != 12 {
		t.Fatalf("first reading after the outage: %d, want 12 kept", cur)
	}
	cur, _ = liveRound(t, p, back.Add(5*time.Minute), pol, 10_000, cur)
	if cur != 12 {
		t.Fatalf("5 min after the outage: %d", cur)
	}
	if cur, _ = liveRound(t, p, back.Add(10*time.Minute), pol, 10_000, cur); cur != 2 {
		t.Fatalf("a window after the outage: %d, want 2", cur)
	}
	// A surge during an outage is not seen, but the first reading scales up at once.
	p.PlanLiveGateway(back.Add(11*time.Minute), pol, nil, down, 2)
	if cur, _ = liveRound(t, p, back.Add(12*time.Minute), pol, 1_000_000, 2); cur != 40 {
		t.Fatalf("1 M after an outage: %d, want 40", cur)
	}
}
