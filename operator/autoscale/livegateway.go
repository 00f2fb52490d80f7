package autoscale

import (
	"fmt"
	"time"

	concordv1 "github.com/concord-chat/concord/apis/v1alpha1"
	"github.com/concord-chat/concord/operator/fleet"
)

// ScaleLiveGateway is the Decision kind that resizes the live-gateway
// role (spec.live.gateway.replicas).
const ScaleLiveGateway Kind = "ScaleLiveGateway"

// Defaults of spec.autoscaling.liveGateway (the CRD fills them; the
// planner applies them to a zero field as well).
const (
	// DefaultViewersPerGateway is the stream directory's per-stream width
	// (runtime/domain/live/placement.PerGateway).
	DefaultViewersPerGateway = 25_000
	// DefaultLiveScaleDownAfter is the directory's ShrinkAfter: a stream
	// narrows after 10 minutes, the fleet shrinks no sooner.
	DefaultLiveScaleDownAfter = 10 * time.Minute
)

// LivePlan is the outcome of one live-gateway round.
type LivePlan struct {
	// Status is what the round read and decided, for the ConcordCluster's
	// status (ObservedAt and LastScaleTime are left to the caller).
	Status concordv1.LiveGatewayScaleStatus
	// Decision is the change to make, nil when the replicas stay.
	Decision *Decision
}

// liveRec is one round's recommendation.
type liveRec struct {
	at   time.Time
	reps int32
}

// livePlanner is the live-gateway part of a Planner's state.
type livePlanner struct {
	// since is when the planner started reading the viewers without a
	// gap (zero: it is not reading them); no scale-down before since +
	// the window.
	since time.Time
	// recs are the recommendations of the last window, oldest first.
	recs []liveRec
}

// PlanLiveGateway sizes the live-gateway role from the gateways' viewers:
// the recommendation is ceil(viewers / viewersPerGateway) within
// [minReplicas, maxReplicas]; the role grows to it at once and shrinks
// only to the highest recommendation of the last scaleDownAfter, and only
// once the viewers have been read for that long. gateways == nil with err
// set is a missing signal: the replicas stay and the window starts over
// (nobody knows what the audience did meanwhile). current is the role's
// replica count now.
func (p *Planner) PlanLiveGateway(now time.Time, pol concordv1.LiveGatewayAutoscaling, gateways []fleet.GatewayViewers, err error, current int32) LivePlan {
	lp := &p.live
	per := pol.ViewersPerGateway
	if per <= 0 {
		per = DefaultViewersPerGateway
	}
	lo := max(pol.MinReplicas, 1)
	hi := max(pol.MaxReplicas, lo)
	window := durOr(pol.ScaleDownAfter, DefaultLiveScaleDownAfter)
	if pol.ScaleDownAfter != nil && pol.ScaleDownAfter.Duration == 0 {
		window = 0
	}
	st := concordv1.LiveGatewayScaleStatus{Replicas: current}
	if err != nil {
		lp.since, lp.recs = time.Time{}, nil
		st.Message = trim(fmt.Sprintf("viewers unknown, keeping %d replicas: %v", current, err), 1024)
		return LivePlan{Status: st}
	}
	st.SignalOK = true
	for _, g := range gateways {
		st.Viewers += g.Viewers
		st.BusiestGatewayViewers = max(st.BusiestGatewayViewers, g.Viewers)
		if g.Viewers > 0 {
			st.Gateways++
		}
	}
	rec := int32(min((st.Viewers+per-1)/per, int64(hi)))
	rec = min(max(rec, lo), hi)
	st.RecommendedReplicas = rec

	if lp.since.IsZero() {
		lp.since = now
	}
	lp.recs = append(lp.recs, liveRec{at: now, reps: rec})
	for len(lp.recs) > 1 && now.Sub(lp.recs[0].at) > window {
		lp.recs = lp.recs[1:]
	}
	stable := rec // the highest recommendation of the window
	for _, r := range lp.recs {
		stable = max(stable, r.reps)
	}

	what := fmt.Sprintf("%d viewers on %d gateways (busiest %d), %d per gateway", st.Viewers, st.Gateways, st.BusiestGatewayViewers, per)
	var d *Decision
	switch {
	case rec > current:
		d = &Decision{Kind: ScaleLiveGateway, From: current, To: rec, Reason: fmt.Sprintf("%s: %d wanted, at most %d", what, rec, hi)}
	case current > hi:
		d = &Decision{Kind: ScaleLiveGateway, From: current, To: hi, Reason: fmt.Sprintf("%d replicas above maxReplicas %d", current, hi)}
	case stable < current && now.Sub(lp.since) >= window:
		d = &Decision{Kind: ScaleLiveGateway, From: current, To: stable, Reason: fmt.Sprintf(
			"%s: at most %d wanted for %s, at least %d", what, stable, window, lo)}
	case rec < current:
		st.Message = fmt.Sprintf("%s: %d wanted; shrinking after %s of lower recommendations (highest in the window %d, read for %s)",
			what, rec, window, stable, now.Sub(lp.since).Round(time.Second))
	default:
		st.Message = fmt.Sprintf("%s: %d replicas fit", what, current)
	}
	if d != nil {
		st.Replicas, st.Message = d.To, d.Reason
	}
	st.Message = trim(st.Message, 1024)
	return LivePlan{Status: st, Decision: d}
}
