package etcdfleet

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/concord-chat/concord/operator/fleet"
)

// LiveViewersPrefix is the registry key prefix live gateways report their
// viewers under: LiveViewersPrefix + stream id + "/" + gateway node id, the
// stream directory's input (runtime/domain/live/placement).
const LiveViewersPrefix = "live/viewers/"

// DefaultLiveViewersTTL is how old a viewer report may be before it no
// longer counts: the runtime's live.ViewerTTL (three of the gateways' 5 s
// report periods), so the operator counts what the edge's directory does.
const DefaultLiveViewersTTL = 15 * time.Second

// LiveViewers reads a cluster's live gateways' viewers from its registry,
// where `concord serve --roles=live-gateway` reports them every 5 s.
type LiveViewers struct {
	// Provider opens the clusters' registries.
	Provider *Provider
	// TTL bounds a report's age; default DefaultLiveViewersTTL.
	TTL time.Duration
	// Now is the clock; default time.Now.
	Now func() time.Time
}

var _ fleet.LiveViewers = (*LiveViewers)(nil)

// viewerReport is the runtime's live.ViewerReport as the gateways encode it.
type viewerReport struct {
	Count int64 `json:"n"`
	At    int64 `json:"at"` // Unix ms
}

// LiveViewers returns every gateway with a fresh report, busiest first.
func (v *LiveViewers) LiveViewers(ctx context.Context, ck fleet.ClusterKey) ([]fleet.GatewayViewers, error) {
	reg, err := v.Provider.Registry(ctx, ck)
	if err != nil {
		return nil, err
	}
	ttl, now := v.TTL, time.Now
	if ttl <= 0 {
		ttl = DefaultLiveViewersTTL
	}
	if v.Now != nil {
		now = v.Now
	}
	return ReadLiveViewers(ctx, reg.(*Registry), ttl, now())
}

// ReadLiveViewers sums r's viewer reports per gateway, leaving out those
// older than ttl at now and undecodable ones (as the stream directory
// does), busiest gateway first. A registry read error is returned as is:
// the caller keeps its state rather than reading it as zero viewers.
func ReadLiveViewers(ctx context.Context, r *Registry, ttl time.Duration, now time.Time) ([]fleet.GatewayViewers, error) {
	kv, err := r.Reg.List(ctx, LiveViewersPrefix)
	if err != nil {
		return nil, fmt.Errorf("etcdfleet: live viewer reports: %w", err)
	}
	byGateway := map[string]*fleet.GatewayViewers{}
	for k, b := range kv {
		_, gw, ok := strings.Cut(strings.TrimPrefix(k, LiveViewersPrefix), "/")
		if !ok || gw == "" {
			continue
		}
		var rep viewerReport
		if json.Unmarshal(b, &rep) != nil || rep.Count < 0 || now.Sub(time.UnixMilli(rep.At)) >= ttl {
			continue
		}
		g := byGateway[gw]
		if g == nil {
			g = &fleet.GatewayViewers{Gateway: gw}
			byGateway[gw] = g
		}
		g.Viewers += rep.Count
		g.Streams++
	}
	out := make([]fleet.GatewayViewers, 0, len(byGateway))
	for _, g := range byGateway {
		out = append(out, *g)
	}
	slices.SortFunc(out, func(a, b fleet.GatewayViewers) int {
		if a.Viewers != b.Viewers {
			if a.Viewers > b.Viewers {
				return -1
			}
			return 1
		}
		return strings.Compare(a.Gateway, b.Gateway)
	})
	return out, nil
}
