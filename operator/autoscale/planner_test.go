package autoscale

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	concordv1 "github.com/concord-chat/concord/apis/v1alpha1"
	"github.com/concord-chat/concord/operator/fleet"
)

func d(x time.Duration) *metav1.Duration { return &metav1.Duration{Duration: x} }

func cluster() *concordv1.ConcordCluster {
	return &concordv1.ConcordCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "prod"},
		Spec: concordv1.ConcordClusterSpec{
			AutoPlacement: &concordv1.AutoPlacementPolicy{
				Enabled: true, EventAgeThreshold: d(250 * time.Millisecond), SustainFor: d(2 * time.Minute),
				ReleaseBelow: d(50 * time.Millisecond), ReleaseAfter: d(30 * time.Minute), Cooldown: d(5 * time.Minute),
				MaxDedicated: 2,
			},
		},
	}
}

func kinds(ds []Decision) []Kind {
	var out []Kind
	for _, x := range ds {
		out = append(out, x.Kind)
	}
	return out
}

func TestPlacementNeedsSustainedEventAge(t *testing.T) {
	p := NewPlanner()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	hot := []fleet.GuildSample{{GuildID: "1", Node: "n0", EventAgeP99: 400 * time.Millisecond}}
	o := Observed{Cluster: cluster(), Samples: hot}
	if ds := p.Plan(t0, o, 3); len(ds) != 0 {
		t.Fatalf("t0: %v, want nothing before SustainFor", kinds(ds))
	}
	if ds := p.Plan(t0.Add(time.Minute), o, 3); len(ds) != 0 {
		t.Fatalf("t+1m: %v, want nothing", kinds(ds))
	}
	// A dip resets the clock (hysteresis).
	cool := Observed{Cluster: cluster(), Samples: []fleet.GuildSample{{GuildID: "1", Node: "n0", EventAgeP99: 100 * time.Millisecond}}}
	p.Plan(t0.Add(90*time.Second), cool, 3)
	if ds := p.Plan(t0.Add(150*time.Second), o, 3); len(ds) != 0 {
		t.Fatalf("after a dip: %v, want the sustain clock restarted", kinds(ds))
	}
	ds := p.Plan(t0.Add(150*time.Second+2*time.Minute), o, 3)
	if len(ds) != 1 || ds[0].Kind != Place || ds[0].GuildID != "1" || ds[0].Object != "auto-1" {
		t.Fatalf("sustained: %+v, want Place guild 1", ds)
	}
}

func TestPlacementCooldownMaxAndRelease(t *testing.T) {
	p := NewPlanner()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	samples := []fleet.GuildSample{
		{GuildID: "1", Node: "n0", EventAgeP99: 300 * time.Millisecond},
		{GuildID: "2", Node: "n1", EventAgeP99: 900 * time.Millisecond},
		{GuildID: "3", Node: "n1", EventAgeP99: 500 * time.Millisecond},
	}
	o := Observed{Cluster: cluster(), Samples: samples, Placements: map[string]PlacementInfo{}}
	p.Plan(t0, o, 3)
	ds := p.Plan(t0.Add(2*time.Minute), o, 3)
	if len(ds) != 1 || ds[0].GuildID != "2" {
		t.Fatalf("%+v: want only the hottest guild (2): one placement per cooldown", ds)
	}
	o.Placements["2"] = PlacementInfo{Name: "auto-2", Auto: true}
	if ds := p.Plan(t0.Add(4*time.Minute), o, 3); len(ds) != 0 {
		t.Fatalf("within cooldown: %v", kinds(ds))
	}
	ds = p.Plan(t0.Add(7*time.Minute), o, 3)
	if len(ds) != 1 || ds[0].GuildID != "3" {
		t.Fatalf("%+v: want guild 3 next", ds)
	}
	o.Placements["3"] = PlacementInfo{Name: "auto-3", Auto: true}
	if ds := p.Plan(t0.Add(20*time.Minute), o, 3); len(ds) != 0 {
		t.Fatalf("at MaxDedicated=2: %v, want nothing", kinds(ds))
	}
	// Guild 2 cools down: released only after ReleaseAfter below ReleaseBelow.
	o.Samples[1].EventAgeP99 = 10 * time.Millisecond
	p.Plan(t0.Add(21*time.Minute), o, 3)
	if ds := p.Plan(t0.Add(40*time.Minute), o, 3); len(ds) != 0 {
		t.Fatalf("before ReleaseAfter: %v", kinds(ds))
	}
	ds = p.Plan(t0.Add(51*time.Minute), o, 3)
	if len(ds) != 1 || ds[0].Kind != Release || ds[0].Object != "auto-2" {
		t.Fatalf("%+v: want Release auto-2", ds)
	}
	// A placement made by a person is never released by the autoscaler.
	o.Placements["2"] = PlacementInfo{Name: "manual", Auto: false}
	o.Samples[0].EventAgeP99 = 10 * time.Millisecond // guild 1 cooled off meanwhile
	if ds := p.Plan(t0.Add(90*time.Minute), o, 3); len(ds) != 0 {
		t.Fatalf("manual placement: %v", kinds(ds))
	}
}

func TestGuildScaling(t *testing.T) {
	c := cluster()
	c.Spec.AutoPlacement = nil
	c.Spec.Autoscaling = &concordv1.AutoscalingPolicy{Guild: &concordv1.GuildAutoscaling{
		MinReplicas: 2, MaxReplicas: 10, TargetEventAge: d(100 * time.Millisecond),
		ScaleUpCooldown: d(3 * time.Minute), ScaleDownCooldown: d(15 * time.Minute),
	}}
	p := NewPlanner()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	busy := Observed{Cluster: c, Samples: []fleet.GuildSample{
		{GuildID: "1", Node: "n0", EventAgeP99: 250 * time.Millisecond},
		{GuildID: "2", Node: "n1", EventAgeP99: 150 * time.Millisecond},
		{GuildID: "3", Node: "n2", EventAgeP99: 200 * time.Millisecond},
	}}
	ds := p.Plan(t0, busy, 3)
	if len(ds) != 1 || ds[0].Kind != ScaleGuild || ds[0].From != 3 || ds[0].To != 6 {
		t.Fatalf("%+v: want 3 -> 6 (ceil(3 × 200ms / 100ms))", ds)
	}
	if ds := p.Plan(t0.Add(time.Minute), busy, 6); len(ds) != 0 {
		t.Fatalf("scale-up cooldown: %v", kinds(ds))
	}
	calm := Observed{Cluster: c, Samples: []fleet.GuildSample{{GuildID: "1", Node: "n0", EventAgeP99: 10 * time.Millisecond}}}
	p.Plan(t0.Add(4*time.Minute), calm, 6)
	if ds := p.Plan(t0.Add(10*time.Minute), calm, 6); len(ds) != 0 {
		t.Fatalf("before the scale-down cooldown: %v", kinds(ds))
	}
	ds = p.Plan(t0.Add(20*time.Minute), calm, 6)
	if len(ds) != 1 || ds[0].To != 5 {
		t.Fatalf("%+v: want 6 -> 5", ds)
	}
	// Out of bounds is corrected at once.
	ds = NewPlanner().Plan(t0, calm, 1)
	if len(ds) != 1 || ds[0].To != 2 {
		t.Fatalf("%+v: want 1 -> 2 (MinReplicas)", ds)
	}
}

func TestRelayTiers(t *testing.T) {
	c := cluster()
	c.Spec.Autoscaling = &concordv1.AutoscalingPolicy{Relays: &concordv1.RelayAutoscaling{
		MinOnline: 15000, MaxRelays: 8, Cooldown: d(5 * time.Minute)}}
	c.Spec.AutoPlacement.Enabled = false // its threshold still defines "pressure"
	p := NewPlanner()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	o := Observed{Cluster: c, Samples: []fleet.GuildSample{
		{GuildID: "1", Node: "n0", Online: 31000, EventAgeP99: 300 * time.Millisecond},
		{GuildID: "2", Node: "n0", Online: 100},
	}, Tiers: map[string]TierInfo{}}
	ds := p.Plan(t0, o, 3)
	if len(ds) != 1 || ds[0].Kind != CreateTier || ds[0].GuildID != "1" || ds[0].To != 8 {
		t.Fatalf("%+v: want CreateTier for guild 1 with max 8", ds)
	}
	o.Tiers["1"] = TierInfo{Name: "auto-1", Auto: true, MinRelays: 1, MaxRelays: 8, SessionsPerRelay: 15000}
	if ds := p.Plan(t0.Add(time.Minute), o, 3); len(ds) != 0 {
		t.Fatalf("cooldown: %v", kinds(ds))
	}
	ds = p.Plan(t0.Add(6*time.Minute), o, 3)
	if len(ds) != 1 || ds[0].Kind != ResizeTier || ds[0].To != 4 {
		t.Fatalf("%+v: want min relays 4 (3 for 31000 sessions + 1 under pressure)", ds)
	}
	o.Tiers["1"] = TierInfo{Name: "auto-1", Auto: true, MinRelays: 4, MaxRelays: 8, SessionsPerRelay: 15000}
	o.Samples[0] = fleet.GuildSample{GuildID: "1", Node: "n0", Online: 5000}
	p.Plan(t0.Add(12*time.Minute), o, 3) // resize down to 1 allowed, and small since now
	ds = p.Plan(t0.Add(18*time.Minute), o, 3)
	if len(ds) != 1 || ds[0].Kind != DeleteTier {
		t.Fatalf("%+v: want DeleteTier after the cooldown under half the threshold", ds)
	}
}
