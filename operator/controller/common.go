package controller

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	concordv1 "github.com/concord-chat/concord/apis/v1alpha1"
	"github.com/concord-chat/concord/operator/fleet"
)

// Ports of the runtime's listeners, as the operator configures `concord
// serve`: HTTP (REST, gateway, /admin, /metrics, probes) and gRPC between nodes.
const (
	PortHTTP = 8080
	PortGRPC = 7070
)

// setCondition sets one condition with the resource's generation.
func setCondition(conds *[]metav1.Condition, gen int64, typ string, status bool, reason, msg string) {
	s := metav1.ConditionFalse
	if status {
		s = metav1.ConditionTrue
	}
	meta.SetStatusCondition(conds, metav1.Condition{
		Type: typ, Status: s, Reason: reason, Message: msg, ObservedGeneration: gen,
	})
}

// updateStatus writes obj's status subresource; kind names the resource
// in the error.
func updateStatus(ctx context.Context, c client.Client, obj client.Object, kind string) error {
	if err := c.Status().Update(ctx, obj); err != nil {
		return fmt.Errorf("update %s status: %w", kind, err)
	}
	return nil
}

// clusterKey is the fleet identity of a ConcordCluster.
func clusterKey(c *concordv1.ConcordCluster) fleet.ClusterKey {
	return fleet.ClusterKey{
		Namespace: c.Namespace, Name: c.Name,
		Endpoints: c.Spec.Etcd.Endpoints, Prefix: c.Spec.Etcd.Prefix,
	}
}

// getCluster fetches the ConcordCluster a resource references.
func getCluster(ctx context.Context, c client.Client, namespace string, ref concordv1.ClusterReference) (*concordv1.ConcordCluster, error) {
	var cl concordv1.ConcordCluster
	if err := c.Get(ctx, types.NamespacedName{Namespace: namespace, Name: ref.Name}, &cl); err != nil {
		return nil, fmt.Errorf("get ConcordCluster %s/%s: %w", namespace, ref.Name, err)
	}
	return &cl, nil
}

// podReady reports the PodReady condition.
func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// podCondition returns a pod condition's status, or "" when absent.
func podCondition(p *corev1.Pod, t corev1.PodConditionType) corev1.ConditionStatus {
	for _, c := range p.Status.Conditions {
		if c.Type == t {
			return c.Status
		}
	}
	return ""
}

// setServingGate writes the concord.dev/serving readiness gate of a pod.
// Kubelet folds it into PodReady, so false takes the pod out of Service
// endpoints.
func setServingGate(ctx context.Context, c client.Client, p *corev1.Pod, serving bool, reason string) error {
	want := corev1.ConditionFalse
	if serving {
		want = corev1.ConditionTrue
	}
	if podCondition(p, concordv1.ReadinessGateServing) == want {
		return nil
	}
	// Strategic merge: conditions merge by type, so kubelet's own
	// conditions written meanwhile are kept.
	patch := client.StrategicMergeFrom(p.DeepCopy())
	now := metav1.Now()
	found := false
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == concordv1.ReadinessGateServing {
			p.Status.Conditions[i].Status = want
			p.Status.Conditions[i].Reason = reason
			p.Status.Conditions[i].LastTransitionTime = now
			found = true
		}
	}
	if !found {
		p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{
			Type: concordv1.ReadinessGateServing, Status: want, Reason: reason, LastTransitionTime: now,
		})
	}
	if err := c.Status().Patch(ctx, p, patch); err != nil {
		return fmt.Errorf("set %s=%s on pod %s: %w", concordv1.ReadinessGateServing, want, p.Name, err)
	}
	return nil
}

// drainStarted returns when a pod's drain began, from its annotation.
func drainStarted(p *corev1.Pod) (time.Time, bool) {
	v, ok := p.Annotations[concordv1.AnnotationDraining]
	if !ok {
		return time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339, v)
	if err != nil {
		return time.Time{}, true // malformed: treat as draining since forever
	}
	return t, true
}

// int32Or dereferences p or returns def.
func int32Or(p *int32, def int32) int32 {
	if p == nil {
		return def
	}
	return *p
}

// durationOr returns d or def when d is zero.
func durationOr(d *metav1.Duration, def time.Duration) time.Duration {
	if d == nil || d.Duration <= 0 {
		return def
	}
	return d.Duration
}

// ReasonPodsFailing is the Degraded reason when pods of a resource cannot
// run: their containers wait on a failure (crash loop, image, config) or
// the scheduler cannot place them. The message names each such pod and
// what its kubelet or the scheduler said, so `kubectl get -o wide` shows
// why without a describe.
const ReasonPodsFailing = "PodsFailing"

// failingReasons are the container waiting reasons that do not clear by
// waiting: the pod needs a fix (its spec, its image, its config) or keeps
// crashing.
var failingReasons = map[string]bool{
	"CrashLoopBackOff": true, "ImagePullBackOff": true, "ErrImagePull": true, "ErrImageNeverPull": true,
	"InvalidImageName": true, "CreateContainerConfigError": true, "CreateContainerError": true, "RunContainerError": true,
}

// failingPods describes the pods that cannot run ("; pod: reason (message)"
// for each, at most three), or "" when none.
func failingPods(pods []corev1.Pod) string {
	var b strings.Builder
	n := 0
	add := func(pod, reason, msg string) {
		n++
		if n > 3 {
			return
		}
		if len(msg) > 160 {
			msg = msg[:160] + "…"
		}
		fmt.Fprintf(&b, "; %s: %s", pod, reason)
		if msg != "" {
			fmt.Fprintf(&b, " (%s)", msg)
		}
	}
	for i := range pods {
		p := &pods[i]
		if !p.DeletionTimestamp.IsZero() {
			continue
		}
		if p.Status.Phase == corev1.PodFailed {
			add(p.Name, "Failed", p.Status.Message)
			continue
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
				add(p.Name, c.Reason, c.Message)
			}
		}
		for _, cs := range append(p.Status.InitContainerStatuses, p.Status.ContainerStatuses...) {
			if w := cs.State.Waiting; w != nil && failingReasons[w.Reason] {
				add(p.Name, w.Reason, w.Message)
				break
			}
		}
	}
	if n > 3 {
		fmt.Fprintf(&b, "; and %d more", n-3)
	}
	return b.String()
}

// applyPDB creates or updates the PodDisruptionBudget name, owned by
// owner, letting one of the pods selector matches go at a time: the
// Eviction API (kubectl drain, cluster autoscalers) then waits for a
// replacement before it takes the next. The operator's own deletions
// (drains, scale-down) are not evictions and are not held by it.
func applyPDB(ctx context.Context, c client.Client, scheme *runtime.Scheme, owner client.Object, name string, selector map[string]string) error {
	pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: owner.GetNamespace(), Name: name}}
	if _, err := controllerutil.CreateOrUpdate(ctx, c, pdb, func() error {
		mu := intstr.FromInt32(1)
		pdb.Labels = withLabels(pdb.Labels, selector)
		pdb.Spec.MaxUnavailable = &mu
		pdb.Spec.Selector = &metav1.LabelSelector{MatchLabels: selector}
		return controllerutil.SetControllerReference(owner, pdb, scheme)
	}); err != nil {
		return fmt.Errorf("apply PodDisruptionBudget %s: %w", name, err)
	}
	return nil
}
