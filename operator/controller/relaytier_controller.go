package controller

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	concordv1 "github.com/concord-chat/concord/apis/v1alpha1"
	"github.com/concord-chat/concord/operator/fleet"
)

// RelayTierReconciler runs ceil(online / sessionsPerRelay) relay pods,
// within [minRelays, maxRelays], for one guild or for every guild a selector
// matches, and publishes the ready relays' endpoints in the registry, where
// the guild actor picks them up. On scale-down the endpoints are withdrawn
// before the pods go; deleting the tier withdraws them all.
type RelayTierReconciler struct {
	Client     client.Client
	Scheme     *runtime.Scheme
	Clock      clock.PassiveClock
	Recorder   events.EventRecorder
	Registries fleet.RegistryProvider
	Stats      fleet.GuildStats
	// Resync is how often online counts are re-read (default 30s).
	Resync time.Duration
}

// +kubebuilder:rbac:groups=concord.dev,resources=relaytiers,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=concord.dev,resources=relaytiers/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=concord.dev,resources=relaytiers/finalizers,verbs=update

// desiredRelays is ceil(online / perRelay) clamped to [lo, hi].
func desiredRelays(online, perRelay int64, lo, hi int32) int32 {
	if perRelay <= 0 {
		perRelay = 15000
	}
	n := (online + perRelay - 1) / perRelay
	return int32(min(max(n, int64(lo)), int64(hi)))
}

// relayPodName is the pod of one relay ordinal.
func relayPodName(t *concordv1.RelayTier, ordinal int) string {
	return t.Name + "-relay-" + strconv.Itoa(ordinal)
}

// tierRound is what one reconcile of a RelayTier knows, as the steps go.
type tierRound struct {
	t       *concordv1.RelayTier
	cluster *concordv1.ConcordCluster // nil when deleted
	reg     fleet.Registry            // nil without a cluster
	resync  time.Duration
	// guilds the tier serves and their online sessions; want relays.
	guilds []string
	online int64
	want   int
	// pods by name; endpoints of the ready relays; relays kept.
	pods      []corev1.Pod
	endpoints []string
	relays    int
}

// Reconcile converges one RelayTier in named steps: fetch the tier, its
// cluster and registry; finalize a deleted tier (withdraw its relays from
// the registry); apply its PodDisruptionBudget; size it from the guilds' online sessions; create relay
// pods; publish their endpoints; remove surplus relays; write status.
func (r *RelayTierReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var t concordv1.RelayTier
	if err := r.Client.Get(ctx, req.NamespacedName, &t); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	rd := &tierRound{t: &t, resync: r.Resync}
	if rd.resync <= 0 {
		rd.resync = 30 * time.Second
	}
	cluster, err := getCluster(ctx, r.Client, t.Namespace, t.Spec.ClusterRef)
	if err != nil && !apierrors.IsNotFound(err) {
		return ctrl.Result{}, err
	}
	if cluster != nil {
		rd.cluster = cluster
		if rd.reg, err = r.Registries.Registry(ctx, clusterKey(cluster)); err != nil {
			return ctrl.Result{}, fmt.Errorf("open registry: %w", err)
		}
	}
	if !t.DeletionTimestamp.IsZero() {
		return r.finalize(ctx, rd)
	}
	if cluster == nil {
		setCondition(&t.Status.Conditions, t.Generation, concordv1.ConditionDegraded, true, "ClusterNotFound", err.Error())
		t.Status.ObservedGeneration = t.Generation
		return ctrl.Result{RequeueAfter: rd.resync}, updateStatus(ctx, r.Client, &t, "RelayTier")
	}
	if controllerutil.AddFinalizer(&t, concordv1.Finalizer) {
		if err := r.Client.Update(ctx, &t); err != nil {
			return ctrl.Result{}, fmt.Errorf("add finalizer: %w", err)
		}
	}
	if err := applyPDB(ctx, r.Client, r.Scheme, &t, t.Name,
		map[string]string{concordv1.LabelOwner: t.Name, concordv1.LabelRole: concordv1.RoleRelay}); err != nil {
		return ctrl.Result{}, err
	}
	if err := r.size(ctx, rd); err != nil {
		return ctrl.Result{}, err
	}
	for _, step := range []func(context.Context, *tierRound) error{r.createRelays, r.publish, r.removeSurplus} {
		if err := step(ctx, rd); err != nil {
			return ctrl.Result{}, err
		}
	}
	return r.status(ctx, rd)
}

// finalize withdraws the tier's relays from the registry (the guilds'
// actors stop using them) and lets the tier go; its pods follow through
// their owner reference.
func (r *RelayTierReconciler) finalize(ctx context.Context, rd *tierRound) (ctrl.Result, error) {
	t := rd.t
	if !controllerutil.ContainsFinalizer(t, concordv1.Finalizer) {
		return ctrl.Result{}, nil
	}
	if rd.reg != nil {
		for _, g := range t.Status.Guilds {
			if err := rd.reg.SetRelays(ctx, g, nil); err != nil {
				return ctrl.Result{}, fmt.Errorf("withdraw relays of guild %s: %w", g, err)
			}
		}
	}
	controllerutil.RemoveFinalizer(t, concordv1.Finalizer)
	if err := r.Client.Update(ctx, t); err != nil && !apierrors.IsNotFound(err) {
		return ctrl.Result{}, fmt.Errorf("remove finalizer: %w", err)
	}
	return ctrl.Result{}, nil
}

// size reads which guilds the tier serves and their online sessions, and
// how many relays that takes.
func (r *RelayTierReconciler) size(ctx context.Context, rd *tierRound) error {
	t := rd.t
	samples, err := r.Stats.GuildStats(ctx, clusterKey(rd.cluster))
	if err != nil {
		setCondition(&t.Status.Conditions, t.Generation, concordv1.ConditionDegraded, true, "StatsUnavailable", err.Error())
		_ = updateStatus(ctx, r.Client, t, "RelayTier")
		return fmt.Errorf("read guild stats: %w", err)
	}
	for _, s := range samples {
		if (t.Spec.GuildID != "" && s.GuildID == t.Spec.GuildID) ||
			(t.Spec.GuildSelector != nil && s.Online >= t.Spec.GuildSelector.MinOnline) {
			rd.guilds = append(rd.guilds, s.GuildID)
			rd.online += s.Online
		}
	}
	if t.Spec.GuildID != "" && !slices.Contains(rd.guilds, t.Spec.GuildID) {
		rd.guilds = append(rd.guilds, t.Spec.GuildID) // not loaded anywhere yet: keep the floor of relays
	}
	slices.Sort(rd.guilds)
	rd.guilds = slices.Compact(rd.guilds)
	rd.want = int(desiredRelays(rd.online, t.Spec.SessionsPerRelay, t.Spec.MinRelays, t.Spec.MaxRelays))
	return nil
}

// createRelays creates the missing relay pods (by ordinal, below want) and
// collects the endpoints of the ready ones.
func (r *RelayTierReconciler) createRelays(ctx context.Context, rd *tierRound) error {
	t := rd.t
	var list corev1.PodList
	if err := r.Client.List(ctx, &list, client.InNamespace(t.Namespace),
		client.MatchingLabels{concordv1.LabelOwner: t.Name, concordv1.LabelRole: concordv1.RoleRelay}); err != nil {
		return fmt.Errorf("list relay pods: %w", err)
	}
	rd.pods = list.Items
	existing := map[string]*corev1.Pod{}
	for i := range rd.pods {
		existing[rd.pods[i].Name] = &rd.pods[i]
	}
	port := t.Spec.Port
	if port == 0 {
		port = PortGRPC
	}
	for i := 0; i < rd.want; i++ {
		name := relayPodName(t, i)
		p, ok := existing[name]
		if !ok {
			p = r.relayPod(rd.cluster, t, name)
			if err := controllerutil.SetControllerReference(t, p, r.Scheme); err != nil {
				return err
			}
			if err := r.Client.Create(ctx, p); err != nil && !apierrors.IsAlreadyExists(err) {
				return fmt.Errorf("create relay pod %s: %w", name, err)
			}
			logf.FromContext(ctx).Info("relay pod created", "pod", name)
			continue
		}
		if podReady(p) && p.Status.PodIP != "" && p.DeletionTimestamp.IsZero() {
			rd.endpoints = append(rd.endpoints, p.Status.PodIP+":"+strconv.Itoa(int(port)))
		}
	}
	return nil
}

// publish writes the ready relays' endpoints for each guild of the tier
// and withdraws them from guilds it no longer serves. It runs before
// surplus relays go, so the actors stop using them first.
func (r *RelayTierReconciler) publish(ctx context.Context, rd *tierRound) error {
	for _, g := range rd.guilds {
		if err := rd.reg.SetRelays(ctx, g, rd.endpoints); err != nil {
			return fmt.Errorf("publish relays of guild %s: %w", g, err)
		}
	}
	for _, g := range rd.t.Status.Guilds {
		if !slices.Contains(rd.guilds, g) {
			if err := rd.reg.SetRelays(ctx, g, nil); err != nil {
				return fmt.Errorf("withdraw relays of guild %s: %w", g, err)
			}
		}
	}
	return nil
}

// removeSurplus deletes relay pods at or above ordinal want.
func (r *RelayTierReconciler) removeSurplus(ctx context.Context, rd *tierRound) error {
	for i := range rd.pods {
		p := &rd.pods[i]
		ord, err := strconv.Atoi(strings.TrimPrefix(p.Name, rd.t.Name+"-relay-"))
		if err == nil && ord < rd.want {
			rd.relays++
			continue
		}
		if p.DeletionTimestamp.IsZero() {
			if err := r.Client.Delete(ctx, p); client.IgnoreNotFound(err) != nil {
				return fmt.Errorf("delete surplus relay %s: %w", p.Name, err)
			}
			logf.FromContext(ctx).Info("relay pod removed", "pod", p.Name)
		}
	}
	return nil
}

// status records the size, the endpoints and the conditions.
func (r *RelayTierReconciler) status(ctx context.Context, rd *tierRound) (ctrl.Result, error) {
	t, want := rd.t, rd.want
	if int32(want) != t.Status.DesiredRelays && t.Status.ObservedGeneration != 0 {
		r.Recorder.Eventf(t, nil, corev1.EventTypeNormal, "Resized", "Scale",
			"relays %d -> %d for %d online sessions (%d per relay)", t.Status.DesiredRelays, want, rd.online, t.Spec.SessionsPerRelay)
	}
	t.Status.Online = rd.online
	t.Status.DesiredRelays = int32(want)
	t.Status.Relays = int32(rd.relays)
	t.Status.ReadyRelays = int32(len(rd.endpoints))
	t.Status.Guilds = rd.guilds
	t.Status.Endpoints = rd.endpoints
	g := t.Generation
	ready := len(rd.endpoints) == want
	failing := failingPods(rd.pods)
	if ready {
		setCondition(&t.Status.Conditions, g, concordv1.ConditionReady, true, "RelaysReady", fmt.Sprintf("%d/%d relays published", len(rd.endpoints), want))
	} else {
		setCondition(&t.Status.Conditions, g, concordv1.ConditionReady, false, "RelaysNotReady", fmt.Sprintf("%d/%d relays published%s", len(rd.endpoints), want, failing))
	}
	if !ready || rd.relays != want {
		setCondition(&t.Status.Conditions, g, concordv1.ConditionProgressing, true, "Scaling", fmt.Sprintf("%d relay pods, %d desired", rd.relays, want))
	} else {
		setCondition(&t.Status.Conditions, g, concordv1.ConditionProgressing, false, "Converged", fmt.Sprintf("%d relay pods", rd.relays))
	}
	if failing != "" {
		setCondition(&t.Status.Conditions, g, concordv1.ConditionDegraded, true, ReasonPodsFailing, strings.TrimPrefix(failing, "; "))
	} else {
		setCondition(&t.Status.Conditions, g, concordv1.ConditionDegraded, false, "Healthy", "")
	}
	t.Status.ObservedGeneration = g
	if err := updateStatus(ctx, r.Client, t, "RelayTier"); err != nil {
		return ctrl.Result{}, err
	}
	return ctrl.Result{RequeueAfter: rd.resync}, nil
}

// relayPod is one relay of the tier.
func (r *RelayTierReconciler) relayPod(c *concordv1.ConcordCluster, t *concordv1.RelayTier, name string) *corev1.Pod {
	labels := withLabels(roleLabels(c, concordv1.RoleRelay), map[string]string{concordv1.LabelOwner: t.Name})
	if t.Spec.GuildID != "" {
		labels[concordv1.LabelGuild] = t.Spec.GuildID
	}
	port := t.Spec.Port
	if port == 0 {
		port = PortGRPC
	}
	spec := runtimePodSpec(c, "", []string{concordv1.RoleRelay}, []corev1.EnvVar{env("CONCORD_RELAY_TIER", t.Name)}, t.Spec.PodPlacement)
	ct := &spec.Containers[0]
	ct.Ports[1].ContainerPort = port
	for i := range ct.Env {
		if ct.Env[i].Name == "CONCORD_GRPC" {
			ct.Env[i].Value = "0.0.0.0:" + strconv.Itoa(int(port))
		}
	}
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: t.Namespace, Name: name, Labels: labels}, Spec: spec}
}

// SetupWithManager registers the reconciler.
func (r *RelayTierReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&concordv1.RelayTier{}).
		Owns(&corev1.Pod{}).
		Owns(&policyv1.PodDisruptionBudget{}).
		Named("relaytier").
		Complete(r)
}
