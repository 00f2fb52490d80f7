package controller

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
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

// Reconcile converges one RelayTier.
func (r *RelayTierReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	log := logf.FromContext(ctx)
	var t concordv1.RelayTier
	if err := r.Client.Get(ctx, req.NamespacedName, &t); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	resync := r.Resync
	if resync <= 0 {
		resync = 30 * time.Second
	}
	cluster, err := getCluster(ctx, r.Client, t.Namespace, t.Spec.ClusterRef)
	if err != nil && !apierrors.IsNotFound(err) {
		return ctrl.Result{}, err
	}
	var reg fleet.Registry
	if cluster != nil {
		if reg, err = r.Registries.Registry(ctx, clusterKey(cluster)); err != nil {
			return ctrl.Result{}, fmt.Errorf("open registry: %w", err)
		}
	}
	if !t.DeletionTimestamp.IsZero() {
		if controllerutil.ContainsFinalizer(&t, concordv1.Finalizer) {
			if reg != nil {
				for _, g := range t.Status.Guilds {
					if err := reg.SetRelays(ctx, g, nil); err != nil {
						return ctrl.Result{}, fmt.Errorf("withdraw relays of guild %s: %w", g, err)
					}
				}
			}
			controllerutil.RemoveFinalizer(&t, concordv1.Finalizer)
			if err := r.Client.Update(ctx, &t); err != nil && !apierrors.IsNotFound(err) {
				return ctrl.Result{}, fmt.Errorf("remove finalizer: %w", err)
			}
		}
		return ctrl.Result{}, nil
	}
	if cluster == nil {
		setCondition(&t.Status.Conditions, t.Generation, concordv1.ConditionDegraded, true, "ClusterNotFound", err.Error())
		t.Status.ObservedGeneration = t.Generation
		return ctrl.Result{RequeueAfter: resync}, updateStatus(ctx, r.Client, &t, "RelayTier")
	}
	if controllerutil.AddFinalizer(&t, concordv1.Finalizer) {
		if err := r.Client.Update(ctx, &t); err != nil {
			return ctrl.Result{}, fmt.Errorf("add finalizer: %w", err)
		}
	}

	// Which guilds, how many sessions.
	samples, err := r.Stats.GuildStats(ctx, clusterKey(cluster))
	if err != nil {
		setCondition(&t.Status.Conditions, t.Generation, concordv1.ConditionDegraded, true, "StatsUnavailable", err.Error())
		_ = updateStatus(ctx, r.Client, &t, "RelayTier")
		return ctrl.Result{}, fmt.Errorf("read guild stats: %w", err)
	}
	var guilds []string
	var online int64
	for _, s := range samples {
		if (t.Spec.GuildID != "" && s.GuildID == t.Spec.GuildID) ||
			(t.Spec.GuildSelector != nil && s.Online >= t.Spec.GuildSelector.MinOnline) {
			guilds = append(guilds, s.GuildID)
			online += s.Online
		}
	}
	if t.Spec.GuildID != "" && !slices.Contains(guilds, t.Spec.GuildID) {
		guilds = append(guilds, t.Spec.GuildID) // not loaded anywhere yet: keep the floor of relays
	}
	slices.Sort(guilds)
	guilds = slices.Compact(guilds)
	want := int(desiredRelays(online, t.Spec.SessionsPerRelay, t.Spec.MinRelays, t.Spec.MaxRelays))

	// Pods by ordinal.
	var list corev1.PodList
	if err := r.Client.List(ctx, &list, client.InNamespace(t.Namespace),
		client.MatchingLabels{concordv1.LabelOwner: t.Name, concordv1.LabelRole: concordv1.RoleRelay}); err != nil {
		return ctrl.Result{}, fmt.Errorf("list relay pods: %w", err)
	}
	existing := map[string]*corev1.Pod{}
	for i := range list.Items {
		existing[list.Items[i].Name] = &list.Items[i]
	}
	var endpoints []string
	port := t.Spec.Port
	if port == 0 {
		port = PortGRPC
	}
	for i := 0; i < want; i++ {
		name := relayPodName(&t, i)
		p, ok := existing[name]
		if !ok {
			p = r.relayPod(cluster, &t, name)
			if err := controllerutil.SetControllerReference(&t, p, r.Scheme); err != nil {
				return ctrl.Result{}, err
			}
			if err := r.Client.Create(ctx, p); err != nil && !apierrors.IsAlreadyExists(err) {
				return ctrl.Result{}, fmt.Errorf("create relay pod %s: %w", name, err)
			}
			log.Info("relay pod created", "pod", name)
			continue
		}
		if podReady(p) && p.Status.PodIP != "" && p.DeletionTimestamp.IsZero() {
			endpoints = append(endpoints, p.Status.PodIP+":"+strconv.Itoa(int(port)))
		}
	}
	// Publish first, then remove surplus relays: actors stop using them before they go.
	for _, g := range guilds {
		if err := reg.SetRelays(ctx, g, endpoints); err != nil {
			return ctrl.Result{}, fmt.Errorf("publish relays of guild %s: %w", g, err)
		}
	}
	for _, g := range t.Status.Guilds {
		if !slices.Contains(guilds, g) {
			if err := reg.SetRelays(ctx, g, nil); err != nil {
				return ctrl.Result{}, fmt.Errorf("withdraw relays of guild %s: %w", g, err)
			}
		}
	}
	relays := 0
	for name, p := range existing {
		ord, err := strconv.Atoi(strings.TrimPrefix(name, t.Name+"-relay-"))
		if err == nil && ord < want {
			relays++
			continue
		}
		if p.DeletionTimestamp.IsZero() {
			if err := r.Client.Delete(ctx, p); client.IgnoreNotFound(err) != nil {
				return ctrl.Result{}, fmt.Errorf("delete surplus relay %s: %w", name, err)
			}
			log.Info("relay pod removed", "pod", name)
		}
	}

	if int32(want) != t.Status.DesiredRelays && t.Status.ObservedGeneration != 0 {
		r.Recorder.Eventf(&t, nil, corev1.EventTypeNormal, "Resized", "Scale",
			"relays %d -> %d for %d online sessions (%d per relay)", t.Status.DesiredRelays, want, online, t.Spec.SessionsPerRelay)
	}
	t.Status.Online = online
	t.Status.DesiredRelays = int32(want)
	t.Status.Relays = int32(relays)
	t.Status.ReadyRelays = int32(len(endpoints))
	t.Status.Guilds = guilds
	t.Status.Endpoints = endpoints
	g := t.Generation
	ready := len(endpoints) == want
	setCondition(&t.Status.Conditions, g, concordv1.ConditionReady, ready, "RelaysReady",
		fmt.Sprintf("%d/%d relays published", len(endpoints), want))
	setCondition(&t.Status.Conditions, g, concordv1.ConditionProgressing, !ready || relays != want, "Scaling",
		fmt.Sprintf("%d relay pods, %d desired", relays, want))
	setCondition(&t.Status.Conditions, g, concordv1.ConditionDegraded, false, "Healthy", "")
	t.Status.ObservedGeneration = g
	if err := updateStatus(ctx, r.Client, &t, "RelayTier"); err != nil {
		return ctrl.Result{}, err
	}
	return ctrl.Result{RequeueAfter: resync}, nil
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
		Named("relaytier").
		Complete(r)
}
