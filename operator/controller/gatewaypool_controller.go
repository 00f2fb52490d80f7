package controller

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
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

// GatewayPoolReconciler keeps a pool's serving gateway pods at
// spec.replicas. The operator, never a Deployment, picks which pod leaves on
// scale-down and rollouts, and drains it: the pod is annotated and marked
// draining in the registry, its concord.dev/serving readiness gate goes
// False (out of the Service), the gateway is told over its admin endpoint to
// stop accepting identifies and hand its sessions and replay buffers to a
// successor, which clients resume on after op 7. The pod is deleted once the
// gateway reports no sessions left, or when the drain timeout expires.
// Rollouts surge one new pod, then drain one outdated pod, BatchSize at a time.
type GatewayPoolReconciler struct {
	Client     client.Client
	Scheme     *runtime.Scheme
	Clock      clock.PassiveClock
	Recorder   events.EventRecorder
	Drainer    fleet.Drainer
	Registries fleet.RegistryProvider
	// PollInterval is how often drains are polled (default 2s).
	PollInterval time.Duration
}

// +kubebuilder:rbac:groups=concord.dev,resources=gatewaypools,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=concord.dev,resources=gatewaypools/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=concord.dev,resources=gatewaypools/finalizers,verbs=update
// +kubebuilder:rbac:groups=concord.dev,resources=concordclusters,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=pods/status,verbs=get;update;patch
// +kubebuilder:rbac:groups="",resources=services,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=policy,resources=poddisruptionbudgets,verbs=get;list;watch;create;update;patch;delete

// poolRound is what one reconcile of a GatewayPool knows: what it fetched,
// its defaults, and the pods it sorted, counted as the steps go.
type poolRound struct {
	pool     *concordv1.GatewayPool
	cluster  *concordv1.ConcordCluster // nil when deleted
	reg      fleet.Registry            // nil without a cluster
	pods     []corev1.Pod
	spec     corev1.PodSpec
	revision string
	desired  int
	timeout  time.Duration
	poll     time.Duration
	now      time.Time

	// serving pods take traffic; requested ones were asked to leave (by
	// hand or by eviction) and start their drain this round.
	serving, requested          []gatewayPod
	draining, timedOut, drained int
	drainingSessions            int64
	outdated, unreadyCurrent    int
}

// Reconcile converges one GatewayPool in named steps: fetch the pool, its
// cluster, registry and pods; finalize a deleted pool; apply defaults;
// apply the owned Service and PodDisruptionBudget; progress drains; serve;
// start requested drains; scale up (with the rollout's surge); scale down;
// write status.
func (r *GatewayPoolReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var pool concordv1.GatewayPool
	if err := r.Client.Get(ctx, req.NamespacedName, &pool); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	rd, res, err := r.fetch(ctx, &pool)
	if rd == nil || err != nil {
		return res, err
	}
	if !pool.DeletionTimestamp.IsZero() {
		return r.finalize(ctx, rd)
	}
	if controllerutil.AddFinalizer(&pool, concordv1.Finalizer) {
		if err := r.Client.Update(ctx, &pool); err != nil {
			return ctrl.Result{}, fmt.Errorf("add finalizer: %w", err)
		}
	}
	if err := r.defaults(rd); err != nil {
		return ctrl.Result{}, err
	}
	if err := r.applyPoolObjects(ctx, &pool); err != nil {
		return ctrl.Result{}, err
	}
	for _, step := range []func(context.Context, *poolRound) error{
		r.progressDrains, r.serve, r.startRequestedDrains, r.scaleUp, r.scaleDown,
	} {
		if err := step(ctx, rd); err != nil {
			return ctrl.Result{}, err
		}
	}
	return r.status(ctx, rd)
}

// fetch reads the pool's cluster, registry and pods. A pool whose cluster
// is missing (and that is not being deleted) gets Degraded and no round.
func (r *GatewayPoolReconciler) fetch(ctx context.Context, pool *concordv1.GatewayPool) (*poolRound, ctrl.Result, error) {
	rd := &poolRound{pool: pool, poll: r.PollInterval, now: r.Clock.Now()}
	if rd.poll <= 0 {
		rd.poll = 2 * time.Second
	}
	cluster, err := getCluster(ctx, r.Client, pool.Namespace, pool.Spec.ClusterRef)
	switch {
	case apierrors.IsNotFound(err) && pool.DeletionTimestamp.IsZero():
		setCondition(&pool.Status.Conditions, pool.Generation, concordv1.ConditionDegraded, true, "ClusterNotFound", err.Error())
		setCondition(&pool.Status.Conditions, pool.Generation, concordv1.ConditionReady, false, "ClusterNotFound", err.Error())
		pool.Status.ObservedGeneration = pool.Generation
		return nil, ctrl.Result{RequeueAfter: 30 * time.Second}, updateStatus(ctx, r.Client, pool, "GatewayPool")
	case err != nil && !apierrors.IsNotFound(err):
		return nil, ctrl.Result{}, err
	}
	rd.cluster = cluster
	if cluster != nil {
		if rd.reg, err = r.Registries.Registry(ctx, clusterKey(cluster)); err != nil {
			return nil, ctrl.Result{}, fmt.Errorf("open registry: %w", err)
		}
	}
	if rd.pods, err = r.listPods(ctx, pool); err != nil {
		return nil, ctrl.Result{}, err
	}
	return rd, ctrl.Result{}, nil
}

// finalize lets a deleted pool go. Pods are garbage-collected through
// their owner reference; their registry marks are forgotten first.
func (r *GatewayPoolReconciler) finalize(ctx context.Context, rd *poolRound) (ctrl.Result, error) {
	if rd.reg != nil {
		for i := range rd.pods {
			if err := rd.reg.ClearDraining(ctx, concordv1.RoleGateway, rd.pods[i].Name); err != nil {
				return ctrl.Result{}, fmt.Errorf("clear draining mark of %s: %w", rd.pods[i].Name, err)
			}
		}
	}
	if controllerutil.RemoveFinalizer(rd.pool, concordv1.Finalizer) {
		if err := r.Client.Update(ctx, rd.pool); err != nil && !apierrors.IsNotFound(err) {
			return ctrl.Result{}, fmt.Errorf("remove finalizer: %w", err)
		}
	}
	return ctrl.Result{}, nil
}

// defaults fills what the spec leaves out: the pod template and its
// revision, the replica count and the drain timeout.
func (r *GatewayPoolReconciler) defaults(rd *poolRound) error {
	rd.spec = gatewayPodSpec(rd.cluster, rd.pool)
	revision, err := templateRevision(rd.spec, gatewayPodLabels(rd.pool))
	if err != nil {
		return err
	}
	rd.revision = revision
	rd.desired = int(int32Or(rd.pool.Spec.Replicas, 2))
	rd.timeout = durationOr(rd.pool.Spec.Drain.Timeout, 5*time.Minute)
	return nil
}

// progressDrains sorts the pods into serving, requested and draining, and
// deletes draining pods that are done or out of time.
func (r *GatewayPoolReconciler) progressDrains(ctx context.Context, rd *poolRound) error {
	log := logf.FromContext(ctx)
	pool := rd.pool
	for i := range rd.pods {
		p := &rd.pods[i]
		started, isDraining := drainStarted(p)
		if !p.DeletionTimestamp.IsZero() {
			// Deleted by someone else: evicted (kubectl drain, the Eviction
			// API) or `kubectl delete pod`. Its preStop hook holds the
			// gateway up for the drain timeout, so it hands its sessions
			// over like any leaving pod instead of dropping them.
			if !isDraining {
				if p.Status.Phase == corev1.PodRunning && p.Status.PodIP != "" {
					gp := gatewayPod{pod: p, ready: true}
					if st, err := r.Drainer.State(ctx, p); err == nil {
						gp.sessions = st.Sessions
					}
					rd.requested = append(rd.requested, gp)
				}
				continue
			}
			if g := p.DeletionGracePeriodSeconds; g != nil && *g <= 1 {
				continue // drained and let go below; it is stopping now
			}
		}
		if !isDraining {
			gp := gatewayPod{pod: p, ready: podReady(p), current: p.Labels[concordv1.LabelRevision] == rd.revision}
			if gp.ready {
				if st, err := r.Drainer.State(ctx, p); err == nil {
					gp.sessions = st.Sessions
				} else {
					log.V(1).Info("gateway state unavailable", "pod", p.Name, "err", err.Error())
				}
			}
			if _, ok := p.Annotations[concordv1.AnnotationDrainRequested]; ok {
				rd.requested = append(rd.requested, gp) // kubectl concord gateway drain
			} else {
				rd.serving = append(rd.serving, gp)
			}
			continue
		}
		st, err := r.pollDrain(ctx, pool, p, rd.pods, started.Add(rd.timeout))
		expired := rd.now.Sub(started) >= rd.timeout
		switch {
		case err == nil && st.Done:
			rd.drained++
			log.Info("gateway drained", "pod", p.Name, "took", rd.now.Sub(started).String())
			r.Recorder.Eventf(pool, p, corev1.EventTypeNormal, "Drained", "DeletePod", "pod %s handed every session over", p.Name)
		case expired:
			rd.timedOut++
			log.Info("gateway drain timed out", "pod", p.Name, "sessions", st.Sessions, "err", errString(err))
			r.Recorder.Eventf(pool, p, corev1.EventTypeWarning, "DrainTimeout", "DeletePod",
				"pod %s still had %d sessions after %s", p.Name, st.Sessions, rd.timeout)
			// Record the timeout before the pod goes: once it is deleted no
			// later reconcile can tell, so a status write lost to a
			// conflict would lose the condition with it.
			setCondition(&pool.Status.Conditions, pool.Generation, concordv1.ConditionDegraded, true, "DrainTimeout",
				fmt.Sprintf("pod %s deleted with sessions left after %s", p.Name, rd.timeout))
			if err := updateStatus(ctx, r.Client, pool, "GatewayPool"); err != nil {
				return err
			}
		default:
			rd.draining++
			rd.drainingSessions += max(st.Sessions, 0) // -1: the pod did not say
			if err != nil {
				log.Info("drain call failed, retrying", "pod", p.Name, "err", err.Error())
			}
			continue
		}
		// The sessions are gone: no need to wait out the preStop hook.
		if err := r.Client.Delete(ctx, p, client.GracePeriodSeconds(1)); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("delete drained pod %s: %w", p.Name, err)
		}
		if rd.reg != nil {
			if err := rd.reg.ClearDraining(ctx, concordv1.RoleGateway, p.Name); err != nil {
				return fmt.Errorf("clear draining mark of %s: %w", p.Name, err)
			}
		}
	}
	return nil
}

// serve turns the readiness gate of serving pods on: they take traffic.
func (r *GatewayPoolReconciler) serve(ctx context.Context, rd *poolRound) error {
	for _, gp := range rd.serving {
		if err := setServingGate(ctx, r.Client, gp.pod, true, "Serving"); err != nil {
			return err
		}
	}
	return nil
}

// startRequestedDrains starts at once the drains asked for by hand
// (`kubectl concord gateway drain`) and those of evicted pods; the pool is
// scaled back up next.
func (r *GatewayPoolReconciler) startRequestedDrains(ctx context.Context, rd *poolRound) error {
	for _, v := range rd.requested {
		succ := pickSuccessor(rd.serving, nil)
		if err := r.startDrain(ctx, rd.pool, rd.reg, v, succ, rd.now, rd.timeout); err != nil {
			return err
		}
		rd.draining++
		rd.drainingSessions += v.sessions
	}
	return nil
}

// scaleUp creates pods up to spec.replicas, and one more per batch during
// a rollout (the surge: a new pod first, then an outdated one drains).
func (r *GatewayPoolReconciler) scaleUp(ctx context.Context, rd *poolRound) error {
	log := logf.FromContext(ctx)
	for _, gp := range rd.serving {
		if !gp.current {
			rd.outdated++
		} else if !gp.ready {
			rd.unreadyCurrent++
		}
	}
	want := rd.desired
	if rd.outdated > 0 && rd.unreadyCurrent == 0 && len(rd.serving) <= rd.desired && rd.draining < int(max(rd.pool.Spec.Drain.BatchSize, 1)) {
		want = rd.desired + 1
	}
	for n := len(rd.serving); n < want; n++ {
		p := newGatewayPod(rd.cluster, rd.pool, rd.spec, rd.revision)
		if err := controllerutil.SetControllerReference(rd.pool, p, r.Scheme); err != nil {
			return err
		}
		if err := r.Client.Create(ctx, p); err != nil {
			return fmt.Errorf("create gateway pod: %w", err)
		}
		log.Info("gateway pod created", "pod", p.Name, "revision", rd.revision)
		rd.serving = append(rd.serving, gatewayPod{pod: p, current: true})
		rd.unreadyCurrent++
	}
	return nil
}

// scaleDown drains the cheapest surplus pods, BatchSize at a time, once
// the pods that replace them are ready.
func (r *GatewayPoolReconciler) scaleDown(ctx context.Context, rd *poolRound) error {
	excess := len(rd.serving) - rd.desired
	if rd.unreadyCurrent > 0 && rd.outdated > 0 {
		excess = 0 // a rollout waits for its surge pod
	}
	slots := int(max(rd.pool.Spec.Drain.BatchSize, 1)) - rd.draining
	n := min(excess, slots)
	if n <= 0 {
		return nil
	}
	victims := pickVictims(rd.serving, n)
	leaving := map[string]bool{}
	for _, v := range victims {
		leaving[v.pod.Name] = true
	}
	for _, v := range victims {
		succ := pickSuccessor(rd.serving, leaving)
		if err := r.startDrain(ctx, rd.pool, rd.reg, v, succ, rd.now, rd.timeout); err != nil {
			return err
		}
		rd.draining++
		rd.drainingSessions += v.sessions
	}
	rd.serving = removeLeaving(rd.serving, leaving)
	return nil
}

// status writes what the round saw and did, and polls again while drains
// run or the pool has not converged.
func (r *GatewayPoolReconciler) status(ctx context.Context, rd *poolRound) (ctrl.Result, error) {
	pool := rd.pool
	pool.Status.Replicas = int32(len(rd.serving))
	pool.Status.ReadyReplicas, pool.Status.UpdatedReplicas = 0, 0
	for _, gp := range rd.serving {
		if gp.ready {
			pool.Status.ReadyReplicas++
		}
		if gp.current {
			pool.Status.UpdatedReplicas++
		}
	}
	pool.Status.DrainingPods = int32(rd.draining)
	pool.Status.DrainingSessions = rd.drainingSessions
	pool.Status.CurrentRevision = rd.revision
	pool.Status.Selector = labels.SelectorFromSet(gatewayPodLabels(pool)).String()
	g, desired := pool.Generation, rd.desired
	converged := int(pool.Status.ReadyReplicas) == desired && int(pool.Status.UpdatedReplicas) == desired && rd.draining == 0 && len(rd.serving) == desired
	if int(pool.Status.ReadyReplicas) >= desired {
		setCondition(&pool.Status.Conditions, g, concordv1.ConditionReady, true, "ReadyReplicas",
			fmt.Sprintf("%d/%d serving pods ready", pool.Status.ReadyReplicas, desired))
	} else {
		setCondition(&pool.Status.Conditions, g, concordv1.ConditionReady, false, "ReplicasNotReady",
			fmt.Sprintf("%d/%d serving pods ready%s", pool.Status.ReadyReplicas, desired, failingPods(rd.pods)))
	}
	if converged {
		setCondition(&pool.Status.Conditions, g, concordv1.ConditionProgressing, false, "Converged", "")
	} else {
		setCondition(&pool.Status.Conditions, g, concordv1.ConditionProgressing, true, "Converging",
			fmt.Sprintf("%d serving, %d updated, %d draining (%d sessions)", len(rd.serving), pool.Status.UpdatedReplicas, rd.draining, rd.drainingSessions))
	}
	switch cond := findCondition(pool.Status.Conditions, concordv1.ConditionDegraded); {
	case rd.timedOut > 0:
		setCondition(&pool.Status.Conditions, g, concordv1.ConditionDegraded, true, "DrainTimeout",
			fmt.Sprintf("%d pod(s) deleted with sessions left after %s", rd.timedOut, rd.timeout))
	case cond != nil && cond.Reason == "DrainTimeout" && rd.drained == 0 && cond.ObservedGeneration == g:
		// A drain timeout stays reported until a drain succeeds or the spec changes.
	case failingPods(rd.pods) != "":
		setCondition(&pool.Status.Conditions, g, concordv1.ConditionDegraded, true, ReasonPodsFailing, strings.TrimPrefix(failingPods(rd.pods), "; "))
	default:
		setCondition(&pool.Status.Conditions, g, concordv1.ConditionDegraded, false, "Healthy", "")
	}
	pool.Status.ObservedGeneration = g
	if err := updateStatus(ctx, r.Client, pool, "GatewayPool"); err != nil {
		return ctrl.Result{}, err
	}
	if rd.draining > 0 || !converged {
		return ctrl.Result{RequeueAfter: rd.poll}, nil
	}
	return ctrl.Result{}, nil
}

// startDrain marks a pod draining (annotation, registry, readiness gate
// off) and asks its gateway to hand its sessions to the successor.
func (r *GatewayPoolReconciler) startDrain(ctx context.Context, pool *concordv1.GatewayPool, reg fleet.Registry,
	v gatewayPod, succ *gatewayPod, now time.Time, timeout time.Duration) error {
	log := logf.FromContext(ctx)
	p := v.pod
	patch := client.MergeFrom(p.DeepCopy())
	if p.Annotations == nil {
		p.Annotations = map[string]string{}
	}
	p.Annotations[concordv1.AnnotationDraining] = now.UTC().Format(time.RFC3339)
	if succ != nil {
		p.Annotations[concordv1.AnnotationDrainSuccessor] = succ.pod.Name
	}
	if err := r.Client.Patch(ctx, p, patch); err != nil {
		return fmt.Errorf("annotate draining pod %s: %w", p.Name, err)
	}
	if reg != nil {
		if err := reg.MarkDraining(ctx, concordv1.RoleGateway, p.Name); err != nil {
			return fmt.Errorf("mark %s draining in the registry: %w", p.Name, err)
		}
	}
	if err := setServingGate(ctx, r.Client, p, false, "Draining"); err != nil {
		return err
	}
	succName := "<none>"
	if succ != nil {
		succName = succ.pod.Name
	}
	log.Info("gateway drain started", "pod", p.Name, "successor", succName, "sessions", v.sessions,
		"current", v.current, "ready", v.ready)
	r.Recorder.Eventf(pool, p, corev1.EventTypeNormal, "DrainStarted", "Drain",
		"draining %s (%d sessions) to %s", p.Name, v.sessions, succName)
	req := fleet.DrainRequest{ReconnectJitter: durationOr(pool.Spec.Drain.ReconnectJitter, 10*time.Second), Deadline: now.Add(timeout)}
	if succ != nil {
		req.Successor, req.SuccessorAddress = succ.pod.Name, adminAddress(succ.pod)
	}
	if _, err := r.Drainer.Drain(ctx, p, req); err != nil {
		// The next poll retries: the annotation already records the drain.
		log.Info("drain call failed, will retry", "pod", p.Name, "err", err.Error())
		return nil
	}
	return r.acknowledge(ctx, p)
}

// pollDrain asks a draining pod for its state; a pod that has not accepted
// the drain request yet is sent it again.
func (r *GatewayPoolReconciler) pollDrain(ctx context.Context, pool *concordv1.GatewayPool, p *corev1.Pod,
	pods []corev1.Pod, deadline time.Time) (fleet.DrainState, error) {
	if _, ok := p.Annotations[concordv1.AnnotationDrainAcknowledged]; ok {
		return r.Drainer.State(ctx, p)
	}
	st, err := r.Drainer.Drain(ctx, p, r.drainRequest(pool, p, pods, deadline))
	if err != nil {
		return st, err
	}
	return st, r.acknowledge(ctx, p)
}

// acknowledge records that the pod accepted its drain.
func (r *GatewayPoolReconciler) acknowledge(ctx context.Context, p *corev1.Pod) error {
	patch := client.MergeFrom(p.DeepCopy())
	if p.Annotations == nil {
		p.Annotations = map[string]string{}
	}
	p.Annotations[concordv1.AnnotationDrainAcknowledged] = r.Clock.Now().UTC().Format(time.RFC3339)
	if err := r.Client.Patch(ctx, p, patch); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("annotate drain acknowledged on %s: %w", p.Name, err)
	}
	return nil
}

// drainRequest rebuilds the drain request of an already draining pod.
func (r *GatewayPoolReconciler) drainRequest(pool *concordv1.GatewayPool, p *corev1.Pod, pods []corev1.Pod, deadline time.Time) fleet.DrainRequest {
	req := fleet.DrainRequest{ReconnectJitter: durationOr(pool.Spec.Drain.ReconnectJitter, 10*time.Second), Deadline: deadline}
	name := p.Annotations[concordv1.AnnotationDrainSuccessor]
	for i := range pods {
		if pods[i].Name == name && name != "" {
			req.Successor, req.SuccessorAddress = name, adminAddress(&pods[i])
		}
	}
	return req
}

func (r *GatewayPoolReconciler) listPods(ctx context.Context, pool *concordv1.GatewayPool) ([]corev1.Pod, error) {
	var list corev1.PodList
	if err := r.Client.List(ctx, &list, client.InNamespace(pool.Namespace), client.MatchingLabels(gatewayPodLabels(pool))); err != nil {
		return nil, fmt.Errorf("list gateway pods: %w", err)
	}
	return list.Items, nil
}

// applyPoolObjects creates or updates the pool's Service and
// PodDisruptionBudget, both named after the pool and owned by it.
func (r *GatewayPoolReconciler) applyPoolObjects(ctx context.Context, pool *concordv1.GatewayPool) error {
	meta := metav1.ObjectMeta{Namespace: pool.Namespace, Name: pool.Name}
	svc := &corev1.Service{ObjectMeta: meta}
	if _, err := controllerutil.CreateOrUpdate(ctx, r.Client, svc, func() error {
		mutateGatewayService(pool, svc)
		return controllerutil.SetControllerReference(pool, svc, r.Scheme)
	}); err != nil {
		return fmt.Errorf("apply Service %s: %w", svc.Name, err)
	}
	pdb := &policyv1.PodDisruptionBudget{ObjectMeta: meta}
	if _, err := controllerutil.CreateOrUpdate(ctx, r.Client, pdb, func() error {
		mutateGatewayPDB(pool, pdb)
		return controllerutil.SetControllerReference(pool, pdb, r.Scheme)
	}); err != nil {
		return fmt.Errorf("apply PodDisruptionBudget %s: %w", pdb.Name, err)
	}
	return nil
}

// SetupWithManager registers the reconciler.
func (r *GatewayPoolReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&concordv1.GatewayPool{}).
		Owns(&corev1.Pod{}).
		Owns(&corev1.Service{}).
		Owns(&policyv1.PodDisruptionBudget{}).
		Named("gatewaypool").
		Complete(r)
}

func removeLeaving(pods []gatewayPod, leaving map[string]bool) []gatewayPod {
	out := pods[:0:0]
	for _, p := range pods {
		if !leaving[p.pod.Name] {
			out = append(out, p)
		}
	}
	return out
}

func findCondition(conds []metav1.Condition, t string) *metav1.Condition {
	for i := range conds {
		if conds[i].Type == t {
			return &conds[i]
		}
	}
	return nil
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
