// Package autoscale is Concord's event-age autoscaler. Guild nodes publish,
// per guild, the event age (queue entry → dispatch) p50/p99, the queue length
// and the online sessions. From them the autoscaler
//
//   - creates a GuildPlacement for a guild whose event age stays above the
//     cluster's AutoPlacement threshold for SustainFor, and deletes the ones it
//     created once event age stays below ReleaseBelow for ReleaseAfter;
//   - scales the guild role between MinReplicas and MaxReplicas on the
//     node-level event age against TargetEventAge;
//   - creates, resizes and deletes RelayTiers for guilds above MinOnline,
//
// with hysteresis (separate enter and leave thresholds, sustained for a
// duration) and cooldowns, logging every decision and recording it as a
// Kubernetes Event on the ConcordCluster. It also exports event age as
// Prometheus gauges an HPA or KEDA can target (metricType: Value).
package autoscale

import (
	"fmt"
	"math"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	concordv1 "github.com/concord-chat/concord/apis/v1alpha1"
	"github.com/concord-chat/concord/operator/fleet"
)

// Kind is what a Decision does.
type Kind string

// Decision kinds.
const (
	Place      Kind = "Place"
	Release    Kind = "Release"
	ScaleGuild Kind = "ScaleGuild"
	CreateTier Kind = "CreateTier"
	ResizeTier Kind = "ResizeTier"
	DeleteTier Kind = "DeleteTier"
)

// Decision is one change the autoscaler makes.
type Decision struct {
	Kind    Kind
	GuildID string
	// From and To are replica or relay counts for ScaleGuild and ResizeTier.
	From, To int32
	// Object is the name of the GuildPlacement or RelayTier concerned.
	Object string
	// Reason explains the decision with the numbers behind it.
	Reason string
}

// Observed is the cluster's current state, as the autoscaler reads it.
type Observed struct {
	Cluster *concordv1.ConcordCluster
	Samples []fleet.GuildSample
	// Placements are every GuildPlacement of the cluster (by guild id); Auto
	// marks the ones the autoscaler created.
	Placements map[string]PlacementInfo
	// Tiers are RelayTiers serving one guild (by guild id).
	Tiers map[string]TierInfo
}

// PlacementInfo is an existing GuildPlacement.
type PlacementInfo struct {
	Name string
	Auto bool
}

// TierInfo is an existing RelayTier.
type TierInfo struct {
	Name             string
	Auto             bool
	MinRelays        int32
	MaxRelays        int32
	SessionsPerRelay int64
}

// Planner holds the hysteresis state of one cluster: since when each
// guild has been above or below a threshold, and when each kind of decision
// was last taken. It is not safe for concurrent use.
type Planner struct {
	aboveSince   map[string]time.Time // event age > placement threshold
	belowSince   map[string]time.Time // event age < release threshold
	smallSince   map[string]time.Time // online < half the tier threshold
	lastPlace    time.Time
	lastScaleUp  time.Time
	lastScale    time.Time
	calmSince    time.Time // every node under half the target
	lastTierSize map[string]time.Time
	live         livePlanner
}

// NewPlanner returns a Planner with no history.
func NewPlanner() *Planner {
	return &Planner{
		aboveSince: map[string]time.Time{}, belowSince: map[string]time.Time{},
		smallSince: map[string]time.Time{}, lastTierSize: map[string]time.Time{},
	}
}

// durOr returns d's duration, or def when unset.
func durOr(d *metav1.Duration, def time.Duration) time.Duration {
	if d == nil || d.Duration <= 0 {
		return def
	}
	return d.Duration
}

// PlacementName is the GuildPlacement the autoscaler creates for a guild.
func PlacementName(guildID string) string { return "auto-" + guildID }

// TierName is the RelayTier the autoscaler creates for a guild.
func TierName(guildID string) string { return "auto-" + guildID }

// Plan returns the decisions for this round and updates the hysteresis
// state. guildReplicas is the guild role's current replica count.
func (p *Planner) Plan(now time.Time, o Observed, guildReplicas int32) []Decision {
	var out []Decision
	spec := o.Cluster.Spec
	byGuild := map[string]fleet.GuildSample{}
	for _, s := range o.Samples {
		if cur, ok := byGuild[s.GuildID]; !ok || s.EventAgeP99 > cur.EventAgeP99 {
			byGuild[s.GuildID] = s
		}
	}
	guilds := make([]string, 0, len(byGuild))
	for g := range byGuild {
		guilds = append(guilds, g)
	}
	slices.Sort(guilds)

	// (a) Placement.
	if ap := spec.AutoPlacement; ap != nil && ap.Enabled {
		threshold := durOr(ap.EventAgeThreshold, 250*time.Millisecond)
		sustain := durOr(ap.SustainFor, 2*time.Minute)
		releaseBelow := durOr(ap.ReleaseBelow, 50*time.Millisecond)
		releaseAfter := durOr(ap.ReleaseAfter, 30*time.Minute)
		cooldown := durOr(ap.Cooldown, 5*time.Minute)
		auto := 0
		for _, pl := range o.Placements {
			if pl.Auto {
				auto++
			}
		}
		// Worst first, so the hottest guild gets the next dedicated node.
		hot := slices.Clone(guilds)
		slices.SortStableFunc(hot, func(a, b string) int {
			return int(byGuild[b].EventAgeP99 - byGuild[a].EventAgeP99)
		})
		for _, g := range hot {
			s := byGuild[g]
			track(p.aboveSince, g, s.EventAgeP99 > threshold, now)
			track(p.belowSince, g, s.EventAgeP99 < releaseBelow, now)
			pl, placed := o.Placements[g]
			switch {
			case !placed && s.EventAgeP99 > threshold && now.Sub(p.aboveSince[g]) >= sustain:
				if auto >= int(ap.MaxDedicated) || now.Sub(p.lastPlace) < cooldown {
					continue
				}
				out = append(out, Decision{Kind: Place, GuildID: g, Object: PlacementName(g), Reason: fmt.Sprintf(
					"event age p99 %s above %s for %s (queue %d, online %d)",
					s.EventAgeP99, threshold, now.Sub(p.aboveSince[g]).Round(time.Second), s.QueueLength, s.Online)})
				p.lastPlace = now
				auto++
			case placed && pl.Auto && s.EventAgeP99 < releaseBelow && now.Sub(p.belowSince[g]) >= releaseAfter:
				if now.Sub(p.lastPlace) < cooldown {
					continue
				}
				out = append(out, Decision{Kind: Release, GuildID: g, Object: pl.Name, Reason: fmt.Sprintf(
					"event age p99 %s below %s for %s", s.EventAgeP99, releaseBelow, now.Sub(p.belowSince[g]).Round(time.Second))})
				p.lastPlace = now
			}
		}
	}

	// (b) Guild nodes: node-level event age is the worst guild on the node;
	// dedicated nodes carry one guild each and are left out.
	if as := spec.Autoscaling; as != nil && as.Guild != nil {
		ga := as.Guild
		target := durOr(ga.TargetEventAge, 100*time.Millisecond)
		nodes := map[string]time.Duration{}
		for _, s := range o.Samples {
			if _, dedicated := o.Placements[s.GuildID]; dedicated {
				continue
			}
			nodes[s.Node] = max(nodes[s.Node], s.EventAgeP99)
		}
		var sum time.Duration
		calm := true
		for _, age := range nodes {
			sum += age
			if age >= target/2 {
				calm = false
			}
		}
		if !calm || len(nodes) == 0 {
			p.calmSince = time.Time{}
		} else if p.calmSince.IsZero() {
			p.calmSince = now
		}
		lo, hi := max(ga.MinReplicas, 1), max(ga.MaxReplicas, 1)
		cur := guildReplicas
		switch {
		case cur < lo || cur > hi:
			to := min(max(cur, lo), hi)
			out = append(out, Decision{Kind: ScaleGuild, From: cur, To: to, Reason: fmt.Sprintf("replicas %d outside [%d, %d]", cur, lo, hi)})
			p.lastScale, p.lastScaleUp = now, now
		case len(nodes) > 0 && sum/time.Duration(len(nodes)) > target:
			avg := sum / time.Duration(len(nodes))
			if now.Sub(p.lastScaleUp) < durOr(ga.ScaleUpCooldown, 3*time.Minute) || cur >= hi {
				break
			}
			// HPA's rule, at least one more and at most double.
			want := int32(math.Ceil(float64(cur) * float64(avg) / float64(target)))
			to := min(max(want, cur+1), 2*cur, hi)
			out = append(out, Decision{Kind: ScaleGuild, From: cur, To: to, Reason: fmt.Sprintf(
				"mean node event age p99 %s above target %s over %d nodes", avg, target, len(nodes))})
			p.lastScale, p.lastScaleUp = now, now
		case calm && !p.calmSince.IsZero() && cur > lo:
			cd := durOr(ga.ScaleDownCooldown, 15*time.Minute)
			if now.Sub(p.calmSince) < cd || now.Sub(p.lastScale) < cd {
				break
			}
			out = append(out, Decision{Kind: ScaleGuild, From: cur, To: cur - 1, Reason: fmt.Sprintf(
				"every node under half the target (%s) for %s", target/2, now.Sub(p.calmSince).Round(time.Second))})
			p.lastScale = now
		}
	}

	// (c) Relay tiers.
	if as := spec.Autoscaling; as != nil && as.Relays != nil {
		ra := as.Relays
		minOnline := max(ra.MinOnline, 1)
		cooldown := durOr(ra.Cooldown, 5*time.Minute)
		var pressure time.Duration = 250 * time.Millisecond
		if ap := spec.AutoPlacement; ap != nil {
			pressure = durOr(ap.EventAgeThreshold, pressure)
		}
		for _, g := range guilds {
			s := byGuild[g]
			tier, has := o.Tiers[g]
			track(p.smallSince, g, s.Online < minOnline/2, now)
			switch {
			case !has && s.Online >= minOnline:
				out = append(out, Decision{Kind: CreateTier, GuildID: g, Object: TierName(g), To: max(ra.MaxRelays, 1),
					Reason: fmt.Sprintf("%d online sessions, at least %d", s.Online, minOnline)})
				p.lastTierSize[g] = now
			case has && tier.Auto && s.Online < minOnline/2 && now.Sub(p.smallSince[g]) >= cooldown:
				out = append(out, Decision{Kind: DeleteTier, GuildID: g, Object: tier.Name,
					Reason: fmt.Sprintf("%d online sessions, under %d for %s", s.Online, minOnline/2, now.Sub(p.smallSince[g]).Round(time.Second))})
			case has && tier.Auto && now.Sub(p.lastTierSize[g]) >= cooldown:
				// Headroom: one relay above the sessions' need while the guild
				// is under event-age pressure, none otherwise.
				per := tier.SessionsPerRelay
				if per <= 0 {
					per = 15000
				}
				need := int32((s.Online + per - 1) / per)
				floor := need
				if s.EventAgeP99 > pressure {
					floor = need + 1
				}
				floor = min(max(floor, 1), tier.MaxRelays)
				if floor != tier.MinRelays {
					out = append(out, Decision{Kind: ResizeTier, GuildID: g, Object: tier.Name, From: tier.MinRelays, To: floor,
						Reason: fmt.Sprintf("%d online, event age p99 %s: relay floor %d", s.Online, s.EventAgeP99, floor)})
					p.lastTierSize[g] = now
				}
			}
		}
	}
	// Forget guilds that disappeared.
	for _, m := range []map[string]time.Time{p.aboveSince, p.belowSince, p.smallSince, p.lastTierSize} {
		for g := range m {
			if _, ok := byGuild[g]; !ok {
				delete(m, g)
			}
		}
	}
	return out
}

// track records since when cond has held for guild g.
func track(m map[string]time.Time, g string, cond bool, now time.Time) {
	if !cond {
		delete(m, g)
		return
	}
	if _, ok := m[g]; !ok {
		m[g] = now
	}
}
