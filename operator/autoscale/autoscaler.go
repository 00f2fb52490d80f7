package autoscale

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	concordv1 "github.com/concord-chat/concord/apis/v1alpha1"
	"github.com/concord-chat/concord/operator/fleet"
)

// Autoscaler runs a Planner per ConcordCluster every Interval and applies
// its decisions. It is a manager.Runnable; with leader election only the
// leader runs it.
type Autoscaler struct {
	Client   client.Client
	Clock    clock.PassiveClock
	Recorder events.EventRecorder
	Stats    fleet.GuildStats
	// Viewers reports the live gateways' viewers (the stream directory)
	// for spec.autoscaling.liveGateway; nil leaves the live gateways alone.
	Viewers fleet.LiveViewers
	// Interval between rounds (default 15s).
	Interval time.Duration

	mu       sync.Mutex
	planners map[string]*Planner
}

// +kubebuilder:rbac:groups=concord.dev,resources=concordclusters,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=concord.dev,resources=concordclusters/status,verbs=get;update;patch
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=concord.dev,resources=guildplacements;relaytiers,verbs=get;list;watch;create;update;patch;delete

// NeedLeaderElection makes only the leader scale.
func (a *Autoscaler) NeedLeaderElection() bool { return true }

// Start runs rounds until ctx ends.
func (a *Autoscaler) Start(ctx context.Context) error {
	log := logf.FromContext(ctx).WithName("autoscaler")
	ctx = logf.IntoContext(ctx, log)
	iv := a.Interval
	if iv <= 0 {
		iv = 15 * time.Second
	}
	t := time.NewTicker(iv)
	defer t.Stop()
	for {
		if err := a.Round(ctx); err != nil {
			log.Error(err, "autoscaler round failed")
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// Round evaluates every cluster once.
func (a *Autoscaler) Round(ctx context.Context) error {
	var clusters concordv1.ConcordClusterList
	if err := a.Client.List(ctx, &clusters); err != nil {
		return fmt.Errorf("list ConcordClusters: %w", err)
	}
	var firstErr error
	for i := range clusters.Items {
		c := &clusters.Items[i]
		if !c.DeletionTimestamp.IsZero() {
			continue
		}
		if err := a.cluster(ctx, c); err != nil && firstErr == nil {
			firstErr = fmt.Errorf("cluster %s/%s: %w", c.Namespace, c.Name, err)
		}
	}
	return firstErr
}

func (a *Autoscaler) planner(key string) *Planner {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.planners == nil {
		a.planners = map[string]*Planner{}
	}
	p, ok := a.planners[key]
	if !ok {
		p = NewPlanner()
		a.planners[key] = p
	}
	return p
}

func (a *Autoscaler) cluster(ctx context.Context, c *concordv1.ConcordCluster) error {
	// The live gateways scale on their own signal: guild stats that
	// cannot be read do not hold them back, nor the other way round.
	liveErr := a.liveGateway(ctx, c)
	if err := a.guilds(ctx, c); err != nil {
		return errors.Join(err, liveErr)
	}
	return liveErr
}

func (a *Autoscaler) guilds(ctx context.Context, c *concordv1.ConcordCluster) error {
	log := logf.FromContext(ctx).WithValues("namespace", c.Namespace, "cluster", c.Name)
	key := fleet.ClusterKey{Namespace: c.Namespace, Name: c.Name, Endpoints: c.Spec.Etcd.Endpoints, Prefix: c.Spec.Etcd.Prefix}
	samples, err := a.Stats.GuildStats(ctx, key)
	if err != nil {
		return fmt.Errorf("guild stats: %w", err)
	}
	o := Observed{Cluster: c, Samples: samples, Placements: map[string]PlacementInfo{}, Tiers: map[string]TierInfo{}}
	var pls concordv1.GuildPlacementList
	if err := a.Client.List(ctx, &pls, client.InNamespace(c.Namespace)); err != nil {
		return fmt.Errorf("list GuildPlacements: %w", err)
	}
	for _, p := range pls.Items {
		if p.Spec.ClusterRef.Name == c.Name {
			o.Placements[p.Spec.GuildID] = PlacementInfo{Name: p.Name, Auto: p.Labels[concordv1.LabelPlacedBy] == concordv1.PlacedByAutoscaler}
		}
	}
	var tiers concordv1.RelayTierList
	if err := a.Client.List(ctx, &tiers, client.InNamespace(c.Namespace)); err != nil {
		return fmt.Errorf("list RelayTiers: %w", err)
	}
	for _, t := range tiers.Items {
		if t.Spec.ClusterRef.Name == c.Name && t.Spec.GuildID != "" {
			o.Tiers[t.Spec.GuildID] = TierInfo{Name: t.Name, Auto: t.Labels[concordv1.LabelPlacedBy] == concordv1.PlacedByAutoscaler,
				MinRelays: t.Spec.MinRelays, MaxRelays: t.Spec.MaxRelays, SessionsPerRelay: t.Spec.SessionsPerRelay}
		}
	}
	exportMetrics(c, samples, o.Placements)

	replicas := int32(3)
	if r := c.Spec.Roles.Guild.Replicas; r != nil {
		replicas = *r
	}
	decisions := a.planner(c.Namespace+"/"+c.Name).Plan(a.Clock.Now(), o, replicas)
	for _, d := range decisions {
		if err := a.apply(ctx, c, d); err != nil {
			return fmt.Errorf("%s guild %s: %w", d.Kind, d.GuildID, err)
		}
		log.Info("autoscaler decision", "kind", string(d.Kind), "guild_id", d.GuildID, "object", d.Object,
			"from", d.From, "to", d.To, "reason", d.Reason)
		a.Recorder.Eventf(c, nil, corev1.EventTypeNormal, "Autoscale"+string(d.Kind), string(d.Kind), "%s", describe(d))
		Decisions.WithLabelValues(c.Namespace, c.Name, string(d.Kind)).Inc()
	}
	return nil
}

func describe(d Decision) string {
	switch d.Kind {
	case ScaleGuild:
		return fmt.Sprintf("guild nodes %d -> %d: %s", d.From, d.To, d.Reason)
	case ScaleLiveGateway:
		return fmt.Sprintf("live gateways %d -> %d: %s", d.From, d.To, d.Reason)
	case ResizeTier:
		return fmt.Sprintf("relay tier %s min relays %d -> %d: %s", d.Object, d.From, d.To, d.Reason)
	default:
		return fmt.Sprintf("%s guild %s (%s): %s", d.Kind, d.GuildID, d.Object, d.Reason)
	}
}

// apply carries one decision out against the API server.
func (a *Autoscaler) apply(ctx context.Context, c *concordv1.ConcordCluster, d Decision) error {
	labels := map[string]string{concordv1.LabelPlacedBy: concordv1.PlacedByAutoscaler, concordv1.LabelCluster: c.Name}
	ref := concordv1.ClusterReference{Name: c.Name}
	switch d.Kind {
	case Place:
		pool := concordv1.PodPlacement{}
		if c.Spec.AutoPlacement != nil {
			pool = *c.Spec.AutoPlacement.DedicatedPool.DeepCopy()
		}
		gp := &concordv1.GuildPlacement{
			ObjectMeta: metav1.ObjectMeta{Namespace: c.Namespace, Name: d.Object, Labels: labels},
			Spec:       concordv1.GuildPlacementSpec{ClusterRef: ref, GuildID: d.GuildID, PodPlacement: pool, Reason: trim(d.Reason, 512)},
		}
		return ignoreExists(a.Client.Create(ctx, gp))
	case Release:
		gp := &concordv1.GuildPlacement{ObjectMeta: metav1.ObjectMeta{Namespace: c.Namespace, Name: d.Object}}
		return client.IgnoreNotFound(a.Client.Delete(ctx, gp))
	case ScaleGuild:
		patch := client.MergeFrom(c.DeepCopy())
		to := d.To
		c.Spec.Roles.Guild.Replicas = &to
		return a.Client.Patch(ctx, c, patch)
	case CreateTier:
		t := &concordv1.RelayTier{
			ObjectMeta: metav1.ObjectMeta{Namespace: c.Namespace, Name: d.Object, Labels: labels},
			Spec:       concordv1.RelayTierSpec{ClusterRef: ref, GuildID: d.GuildID, MinRelays: 1, MaxRelays: d.To},
		}
		return ignoreExists(a.Client.Create(ctx, t))
	case ResizeTier:
		var t concordv1.RelayTier
		if err := a.Client.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: d.Object}, &t); err != nil {
			return client.IgnoreNotFound(err)
		}
		patch := client.MergeFrom(t.DeepCopy())
		t.Spec.MinRelays = d.To
		return a.Client.Patch(ctx, &t, patch)
	case DeleteTier:
		t := &concordv1.RelayTier{ObjectMeta: metav1.ObjectMeta{Namespace: c.Namespace, Name: d.Object}}
		return client.IgnoreNotFound(a.Client.Delete(ctx, t))
	}
	return fmt.Errorf("unknown decision %q", d.Kind)
}

func exportMetrics(c *concordv1.ConcordCluster, samples []fleet.GuildSample, placements map[string]PlacementInfo) {
	nodes := map[string]time.Duration{}
	var worst time.Duration
	for _, s := range samples {
		GuildEventAge.WithLabelValues(c.Namespace, c.Name, s.GuildID, "0.5").Set(s.EventAgeP50.Seconds())
		GuildEventAge.WithLabelValues(c.Namespace, c.Name, s.GuildID, "0.99").Set(s.EventAgeP99.Seconds())
		GuildQueueLength.WithLabelValues(c.Namespace, c.Name, s.GuildID).Set(float64(s.QueueLength))
		GuildOnline.WithLabelValues(c.Namespace, c.Name, s.GuildID).Set(float64(s.Online))
		nodes[s.Node] = max(nodes[s.Node], s.EventAgeP99)
		if _, dedicated := placements[s.GuildID]; !dedicated {
			worst = max(worst, s.EventAgeP99)
		}
	}
	for n, age := range nodes {
		NodeEventAge.WithLabelValues(c.Namespace, c.Name, n).Set(age.Seconds())
	}
	ClusterEventAge.WithLabelValues(c.Namespace, c.Name).Set(worst.Seconds())
}

func ignoreExists(err error) error {
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

func trim(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}
