package etcdfleet

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	concordv1 "github.com/concord-chat/concord/apis/v1alpha1"
	"github.com/concord-chat/concord/operator/fleet"
)

// VoiceLoadPrefix is the registry key prefix SFUs report their load
// under: VoiceLoadPrefix + voice server id (the pod name).
const VoiceLoadPrefix = "voice/load/"

// DefaultVoiceLoadTTL is how old a load report may be before its server
// counts as not reporting: three of the SFUs' 2 s report periods, the
// bound guild nodes allocate by.
const DefaultVoiceLoadTTL = 6 * time.Second

// VoiceLoads reads SFU pods' loads from their cluster's registry, where
// `concord serve --roles=voice` reports them every 2 s.
type VoiceLoads struct {
	// Provider opens the clusters' registries.
	Provider *Provider
	// Reader finds a pod's ConcordCluster (label concord.dev/cluster).
	Reader client.Reader
	// TTL bounds a report's age; default DefaultVoiceLoadTTL.
	TTL time.Duration
	// Now is the clock; default time.Now.
	Now func() time.Time
}

var _ fleet.VoiceLoads = (*VoiceLoads)(nil)

// voiceLoad is the part of the runtime's load report the operator reads
// (the runtime encodes voice.Load with its Go field names).
type voiceLoad struct {
	Server           string
	Endpoint         string
	Calls            int64
	Participants     int64
	PacketsForwarded float64
	LossRatio        float64
	Jitter           time.Duration
	RTT              time.Duration
	Draining         bool
	At               time.Time
}

// VoiceLoad returns the pod's last load report; an error when it has none
// or the report is older than the TTL.
func (v *VoiceLoads) VoiceLoad(ctx context.Context, p *corev1.Pod) (fleet.VoiceLoad, error) {
	name := p.Labels[concordv1.LabelCluster]
	if name == "" {
		return fleet.VoiceLoad{}, fmt.Errorf("etcdfleet: pod %s/%s has no %s label", p.Namespace, p.Name, concordv1.LabelCluster)
	}
	var c concordv1.ConcordCluster
	if err := v.Reader.Get(ctx, client.ObjectKey{Namespace: p.Namespace, Name: name}, &c); err != nil {
		return fleet.VoiceLoad{}, fmt.Errorf("etcdfleet: cluster of pod %s/%s: %w", p.Namespace, p.Name, err)
	}
	reg, err := v.Provider.Registry(ctx, fleet.ClusterKey{
		Namespace: c.Namespace, Name: c.Name, Endpoints: c.Spec.Etcd.Endpoints, Prefix: c.Spec.Etcd.Prefix,
	})
	if err != nil {
		return fleet.VoiceLoad{}, err
	}
	return ReadVoiceLoad(ctx, reg.(*Registry), p.Name, v.ttl(), v.now())
}

// ReadVoiceLoad reads server's load report from r, refusing one older
// than ttl at now.
func ReadVoiceLoad(ctx context.Context, r *Registry, server string, ttl time.Duration, now time.Time) (fleet.VoiceLoad, error) {
	b, err := r.Reg.Get(ctx, VoiceLoadPrefix+server)
	if err != nil {
		return fleet.VoiceLoad{}, fmt.Errorf("etcdfleet: load of voice server %s: %w", server, err)
	}
	var l voiceLoad
	if err := json.Unmarshal(b, &l); err != nil {
		return fleet.VoiceLoad{}, fmt.Errorf("etcdfleet: decode load of voice server %s: %w", server, err)
	}
	if age := now.Sub(l.At); age > ttl {
		return fleet.VoiceLoad{}, fmt.Errorf("etcdfleet: load of voice server %s is %s old", server, age.Round(time.Second))
	}
	return fleet.VoiceLoad{
		ActiveCalls: l.Calls, Participants: l.Participants, Endpoint: l.Endpoint,
		Draining: l.Draining, PacketsForwarded: l.PacketsForwarded, LossRatio: l.LossRatio, Jitter: l.Jitter, RTT: l.RTT, At: l.At,
	}, nil
}

func (v *VoiceLoads) ttl() time.Duration {
	if v.TTL > 0 {
		return v.TTL
	}
	return DefaultVoiceLoadTTL
}

func (v *VoiceLoads) now() time.Time {
	if v.Now != nil {
		return v.Now()
	}
	return time.Now()
}
