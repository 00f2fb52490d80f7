package controller

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	concordv1 "github.com/concord-chat/concord/apis/v1alpha1"
	"github.com/concord-chat/concord/operator/fleet"
)

// GuildPlacementReconciler runs a dedicated guild-node pod for one guild on
// the dedicated node pool, then pins the guild to it in the registry: the old
// actor flushes and stops, the new node loads the guild from the store and
// sessions resubscribe. The placement is Placed once the registry reports the
// dedicated node as the guild's owner. Deleting the GuildPlacement removes
// the pin, waits for the guild to leave the node (bounded by MoveTimeout) and
// deletes the pod.
type GuildPlacementReconciler struct {
	Client     client.Client
	Scheme     *runtime.Scheme
	Clock      clock.PassiveClock
	Recorder   events.EventRecorder
	Registries fleet.RegistryProvider
	// PollInterval is how often a move is polled (default 2s).
	PollInterval time.Duration
}

// +kubebuilder:rbac:groups=concord.dev,resources=guildplacements,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=concord.dev,resources=guildplacements/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=concord.dev,resources=guildplacements/finalizers,verbs=update
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch;create;update;patch;delete

// dedicatedPodName is the pod name (and registry node id) of a placement.
func dedicatedPodName(p *concordv1.GuildPlacement) string {
	return p.Spec.ClusterRef.Name + "-guild-" + p.Spec.GuildID
}

// Reconcile converges one GuildPlacement.
func (r *GuildPlacementReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	log := logf.FromContext(ctx)
	var gp concordv1.GuildPlacement
	if err := r.Client.Get(ctx, req.NamespacedName, &gp); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	poll := r.PollInterval
	if poll <= 0 {
		poll = 2 * time.Second
	}
	log = log.WithValues("guild_id", gp.Spec.GuildID)
	cluster, err := getCluster(ctx, r.Client, gp.Namespace, gp.Spec.ClusterRef)
	if err != nil && !apierrors.IsNotFound(err) {
		return ctrl.Result{}, err
	}
	var reg fleet.Registry
	if cluster != nil {
		if reg, err = r.Registries.Registry(ctx, clusterKey(cluster)); err != nil {
			return ctrl.Result{}, fmt.Errorf("open registry: %w", err)
		}
	}
	podName := dedicatedPodName(&gp)
	var pod corev1.Pod
	podErr := r.Client.Get(ctx, types.NamespacedName{Namespace: gp.Namespace, Name: podName}, &pod)
	if podErr != nil && !apierrors.IsNotFound(podErr) {
		return ctrl.Result{}, fmt.Errorf("get pod %s: %w", podName, podErr)
	}
	havePod := podErr == nil
	now := r.Clock.Now()
	timeout := durationOr(gp.Spec.MoveTimeout, 5*time.Minute)

	if !gp.DeletionTimestamp.IsZero() {
		return r.release(ctx, &gp, reg, havePod, &pod, now, timeout, poll)
	}
	if cluster == nil {
		setCondition(&gp.Status.Conditions, gp.Generation, concordv1.ConditionDegraded, true, "ClusterNotFound", err.Error())
		gp.Status.ObservedGeneration = gp.Generation
		return ctrl.Result{RequeueAfter: 30 * time.Second}, r.writeStatus(ctx, &gp)
	}
	if controllerutil.AddFinalizer(&gp, concordv1.Finalizer) {
		if err := r.Client.Update(ctx, &gp); err != nil {
			return ctrl.Result{}, fmt.Errorf("add finalizer: %w", err)
		}
	}
	if !havePod || !pod.DeletionTimestamp.IsZero() {
		if !havePod {
			p := r.dedicatedPod(cluster, &gp, podName)
			if err := controllerutil.SetControllerReference(&gp, p, r.Scheme); err != nil {
				return ctrl.Result{}, err
			}
			if err := r.Client.Create(ctx, p); err != nil {
				return ctrl.Result{}, fmt.Errorf("create dedicated guild pod: %w", err)
			}
			log.Info("dedicated guild node created", "pod", podName)
			r.Recorder.Eventf(&gp, p, corev1.EventTypeNormal, "PodCreated", "Place", "dedicated guild node %s created", podName)
		}
		r.setPhase(&gp, concordv1.PlacementPending, now)
		gp.Status.PodName, gp.Status.NodeName = podName, ""
		return r.finish(ctx, &gp, poll)
	}
	gp.Status.PodName, gp.Status.NodeName = podName, pod.Spec.NodeName
	owner, err := reg.GuildOwner(ctx, gp.Spec.GuildID)
	if err != nil && !errors.Is(err, fleet.ErrNotFound) {
		return ctrl.Result{}, fmt.Errorf("read guild owner: %w", err)
	}
	gp.Status.Owner = owner

	switch {
	case !podReady(&pod):
		if gp.Status.Phase == concordv1.PlacementPlaced {
			log.Info("dedicated guild node not ready", "pod", podName)
		}
		r.setPhase(&gp, concordv1.PlacementPending, now)
	case owner == podName:
		if gp.Status.Phase != concordv1.PlacementPlaced {
			log.Info("guild placed", "pod", podName, "node", pod.Spec.NodeName)
			r.Recorder.Eventf(&gp, &pod, corev1.EventTypeNormal, "Placed", "Place", "guild %s runs on %s", gp.Spec.GuildID, podName)
		}
		r.setPhase(&gp, concordv1.PlacementPlaced, now)
	default:
		if err := reg.PinGuild(ctx, gp.Spec.GuildID, podName); err != nil {
			return ctrl.Result{}, fmt.Errorf("pin guild: %w", err)
		}
		if gp.Status.Phase != concordv1.PlacementMoving {
			log.Info("guild pinned, moving", "pod", podName, "from", owner)
			r.Recorder.Eventf(&gp, &pod, corev1.EventTypeNormal, "Moving", "Pin", "guild %s pinned to %s (was on %q)", gp.Spec.GuildID, podName, owner)
		}
		r.setPhase(&gp, concordv1.PlacementMoving, now)
	}
	return r.finish(ctx, &gp, poll)
}

// release unpins the guild, waits for it to leave the dedicated node and
// deletes the pod, then lets the GuildPlacement go.
func (r *GuildPlacementReconciler) release(ctx context.Context, gp *concordv1.GuildPlacement, reg fleet.Registry,
	havePod bool, pod *corev1.Pod, now time.Time, timeout, poll time.Duration) (ctrl.Result, error) {
	log := logf.FromContext(ctx)
	if !controllerutil.ContainsFinalizer(gp, concordv1.Finalizer) {
		return ctrl.Result{}, nil
	}
	podName := dedicatedPodName(gp)
	if gp.Status.Phase != concordv1.PlacementReleasing {
		r.setPhase(gp, concordv1.PlacementReleasing, now)
		log.Info("releasing guild", "pod", podName)
		r.Recorder.Eventf(gp, nil, corev1.EventTypeNormal, "Releasing", "Unpin", "guild %s returns to the ring", gp.Spec.GuildID)
		if err := r.writeStatus(ctx, gp); err != nil {
			return ctrl.Result{}, err
		}
	}
	if reg != nil {
		if err := reg.UnpinGuild(ctx, gp.Spec.GuildID); err != nil {
			return ctrl.Result{}, fmt.Errorf("unpin guild: %w", err)
		}
		owner, err := reg.GuildOwner(ctx, gp.Spec.GuildID)
		if err != nil && !errors.Is(err, fleet.ErrNotFound) {
			return ctrl.Result{}, fmt.Errorf("read guild owner: %w", err)
		}
		since := now
		if gp.Status.PhaseSince != nil {
			since = gp.Status.PhaseSince.Time
		}
		if owner == podName && havePod && now.Sub(since) < timeout {
			return ctrl.Result{RequeueAfter: poll}, nil // the old actor is still flushing
		}
	}
	if havePod && pod.DeletionTimestamp.IsZero() {
		if err := r.Client.Delete(ctx, pod); client.IgnoreNotFound(err) != nil {
			return ctrl.Result{}, fmt.Errorf("delete dedicated pod: %w", err)
		}
	}
	controllerutil.RemoveFinalizer(gp, concordv1.Finalizer)
	if err := r.Client.Update(ctx, gp); err != nil && !apierrors.IsNotFound(err) {
		return ctrl.Result{}, fmt.Errorf("remove finalizer: %w", err)
	}
	log.Info("guild released")
	return ctrl.Result{}, nil
}

// dedicatedPod is the guild-node pod of a placement: the guild role, told
// to host only this guild, on the dedicated pool.
func (r *GuildPlacementReconciler) dedicatedPod(c *concordv1.ConcordCluster, gp *concordv1.GuildPlacement, name string) *corev1.Pod {
	labels := withLabels(roleLabels(c, concordv1.RoleGuild), map[string]string{
		concordv1.LabelOwner: gp.Name, concordv1.LabelGuild: gp.Spec.GuildID,
	})
	spec := runtimePodSpec(c, "", []string{concordv1.RoleGuild},
		[]corev1.EnvVar{env("CONCORD_GUILD_DEDICATED", gp.Spec.GuildID)}, gp.Spec.PodPlacement)
	spec.TerminationGracePeriodSeconds = ptrTo(int64(60))
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: gp.Namespace, Name: name, Labels: labels}, Spec: spec}
}

// setPhase moves to a phase, stamping when it began.
func (r *GuildPlacementReconciler) setPhase(gp *concordv1.GuildPlacement, ph concordv1.PlacementPhase, now time.Time) {
	if gp.Status.Phase != ph || gp.Status.PhaseSince == nil {
		t := metav1.NewTime(now)
		gp.Status.PhaseSince = &t
	}
	gp.Status.Phase = ph
}

// finish derives conditions from the phase, applies the move timeout and
// writes the status.
func (r *GuildPlacementReconciler) finish(ctx context.Context, gp *concordv1.GuildPlacement, poll time.Duration) (ctrl.Result, error) {
	g := gp.Generation
	timeout := durationOr(gp.Spec.MoveTimeout, 5*time.Minute)
	var res ctrl.Result
	switch gp.Status.Phase {
	case concordv1.PlacementPlaced:
		setCondition(&gp.Status.Conditions, g, concordv1.ConditionReady, true, "Placed", "guild runs on "+gp.Status.PodName)
		setCondition(&gp.Status.Conditions, g, concordv1.ConditionProgressing, false, "Placed", "")
		setCondition(&gp.Status.Conditions, g, concordv1.ConditionDegraded, false, "Placed", "")
	default:
		msg := fmt.Sprintf("phase %s since %s", gp.Status.Phase, gp.Status.PhaseSince.UTC().Format(time.RFC3339))
		setCondition(&gp.Status.Conditions, g, concordv1.ConditionReady, false, string(gp.Status.Phase), msg)
		setCondition(&gp.Status.Conditions, g, concordv1.ConditionProgressing, true, string(gp.Status.Phase), msg)
		if r.Clock.Since(gp.Status.PhaseSince.Time) > timeout {
			setCondition(&gp.Status.Conditions, g, concordv1.ConditionDegraded, true, "MoveTimeout",
				fmt.Sprintf("still %s after %s", gp.Status.Phase, timeout))
		} else {
			setCondition(&gp.Status.Conditions, g, concordv1.ConditionDegraded, false, "InProgress", "")
		}
		res.RequeueAfter = poll
	}
	gp.Status.ObservedGeneration = g
	return res, r.writeStatus(ctx, gp)
}

func (r *GuildPlacementReconciler) writeStatus(ctx context.Context, gp *concordv1.GuildPlacement) error {
	if err := r.Client.Status().Update(ctx, gp); err != nil {
		return fmt.Errorf("update GuildPlacement status: %w", err)
	}
	return nil
}

// SetupWithManager registers the reconciler.
func (r *GuildPlacementReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&concordv1.GuildPlacement{}).
		Owns(&corev1.Pod{}).
		Named("guildplacement").
		Complete(r)
}
