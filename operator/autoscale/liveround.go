package autoscale

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	concordv1 "github.com/concord-chat/concord/apis/v1alpha1"
	"github.com/concord-chat/concord/operator/fleet"
)

// liveGateway runs one live-gateway round of a cluster with spec.live and
// spec.autoscaling.liveGateway: reads the viewers, plans, patches
// spec.live.gateway.replicas on a decision (the ConcordCluster controller
// sizes the Deployment from it), records the decision as an Event and
// the round in status.liveGateway. A viewer signal that cannot be read is
// no error here (the status and a Warning Event say so); a failed write
// to the API server is.
func (a *Autoscaler) liveGateway(ctx context.Context, c *concordv1.ConcordCluster) error {
	if c.Spec.Live == nil || c.Spec.Autoscaling == nil || c.Spec.Autoscaling.LiveGateway == nil || a.Viewers == nil {
		return nil
	}
	log := logf.FromContext(ctx).WithValues("namespace", c.Namespace, "cluster", c.Name)
	key := fleet.ClusterKey{Namespace: c.Namespace, Name: c.Name, Endpoints: c.Spec.Etcd.Endpoints, Prefix: c.Spec.Etcd.Prefix}
	gateways, err := a.Viewers.LiveViewers(ctx, key)
	current := int32(2)
	if r := c.Spec.Live.Gateway.Replicas; r != nil {
		current = *r
	}
	now := a.Clock.Now()
	plan := a.planner(c.Namespace+"/"+c.Name).PlanLiveGateway(now, *c.Spec.Autoscaling.LiveGateway, gateways, err, current)

	prev := c.Status.LiveGateway
	st := plan.Status
	st.ObservedAt = metav1.NewTime(now)
	if prev != nil {
		st.LastScaleTime = prev.LastScaleTime
	}
	if err != nil {
		log.Info("live gateway viewers unknown, replicas kept", "replicas", current, "err", err.Error())
		if prev == nil || prev.SignalOK {
			a.Recorder.Eventf(c, nil, corev1.EventTypeWarning, "LiveViewersUnknown", "ScaleLiveGateway", "%s", st.Message)
		}
	} else {
		LiveViewersGauge.WithLabelValues(c.Namespace, c.Name).Set(float64(st.Viewers))
		LiveGatewaysRecommended.WithLabelValues(c.Namespace, c.Name).Set(float64(st.RecommendedReplicas))
	}
	if d := plan.Decision; d != nil {
		if d.To < d.From {
			// Best effort: a failure only makes the ReplicaSet pick its
			// own victims, cutting more viewers than needed.
			if err := a.markDeletionCost(ctx, c, gateways); err != nil {
				log.Error(err, "live gateway deletion costs not set")
			}
		}
		patch := client.MergeFrom(c.DeepCopy())
		to := d.To
		c.Spec.Live.Gateway.Replicas = &to
		if err := a.Client.Patch(ctx, c, patch); err != nil {
			return fmt.Errorf("scale live gateways %d -> %d: %w", d.From, d.To, err)
		}
		st.LastScaleTime = &st.ObservedAt
		log.Info("autoscaler decision", "kind", string(d.Kind), "from", d.From, "to", d.To, "viewers", st.Viewers, "reason", d.Reason)
		a.Recorder.Eventf(c, nil, corev1.EventTypeNormal, "Autoscale"+string(d.Kind), string(d.Kind), "%s", describe(*d))
		Decisions.WithLabelValues(c.Namespace, c.Name, string(d.Kind)).Inc()
	}
	patch := client.MergeFrom(c.DeepCopy())
	c.Status.LiveGateway = &st
	if err := a.Client.Status().Patch(ctx, c, patch); err != nil {
		return fmt.Errorf("live gateway status: %w", err)
	}
	return nil
}

// AnnotationDeletionCost is the Pod annotation a ReplicaSet reads when it
// scales down: pods with the lowest cost go first.
const AnnotationDeletionCost = "controller.kubernetes.io/pod-deletion-cost"

// markDeletionCost sets each live-gateway pod's deletion cost to the
// viewers it reported (0 without a report), right before a scale-down, so
// the ReplicaSet removes the emptiest gateways and cuts the fewest viewers.
// It is written only then, not every round: the annotation is meant to
// change rarely (every write is a pod update).
func (a *Autoscaler) markDeletionCost(ctx context.Context, c *concordv1.ConcordCluster, gateways []fleet.GatewayViewers) error {
	viewers := make(map[string]int64, len(gateways))
	for _, g := range gateways {
		viewers[g.Gateway] = g.Viewers
	}
	var pods corev1.PodList
	if err := a.Client.List(ctx, &pods, client.InNamespace(c.Namespace), client.MatchingLabels{
		concordv1.LabelCluster: c.Name, concordv1.LabelRole: concordv1.RoleLiveGateway, concordv1.LabelOwner: c.Name,
	}); err != nil {
		return fmt.Errorf("list live-gateway pods: %w", err)
	}
	var errs []error
	for i := range pods.Items {
		p := &pods.Items[i]
		cost := strconv.FormatInt(min(viewers[p.Name], math.MaxInt32), 10)
		if !p.DeletionTimestamp.IsZero() || p.Annotations[AnnotationDeletionCost] == cost {
			continue
		}
		patch := client.MergeFrom(p.DeepCopy())
		if p.Annotations == nil {
			p.Annotations = map[string]string{}
		}
		p.Annotations[AnnotationDeletionCost] = cost
		if err := a.Client.Patch(ctx, p, patch); client.IgnoreNotFound(err) != nil {
			errs = append(errs, fmt.Errorf("pod %s: %w", p.Name, err))
		}
	}
	return errors.Join(errs...)
}
