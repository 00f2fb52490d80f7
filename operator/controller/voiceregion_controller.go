package controller

import (
	"context"
	"errors"
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
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	concordv1 "github.com/concord-chat/concord/apis/v1alpha1"
	"github.com/concord-chat/concord/operator/fleet"
)

// VoiceRegionReconciler keeps a region's SFU pods at the count that leaves
// the buffer of free capacity the spec asks for — Agones' fleet buffer
// policy, counted in participants: an integer buffer is that many servers'
// worth of free participants, a percentage is a share of total capacity.
// Surplus servers without calls are deleted; a server with active calls is
// drained (marked in the registry so guilds allocate no new calls on it,
// told over its admin endpoint) and deleted only when its last call ends.
type VoiceRegionReconciler struct {
	Client     client.Client
	Scheme     *runtime.Scheme
	Clock      clock.PassiveClock
	Recorder   events.EventRecorder
	Registries fleet.RegistryProvider
	Loads      fleet.VoiceLoads
	Drainer    fleet.Drainer
	// Secrets reads the Secrets spec.ice references, to refuse a region
	// whose pods could never start (an uncached reader: the operator
	// only gets Secrets, it does not watch them). Nil skips the check.
	Secrets client.Reader
	// Resync is how often loads are re-read (default 10s).
	Resync time.Duration
}

// +kubebuilder:rbac:groups=concord.dev,resources=voiceregions,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=concord.dev,resources=voiceregions/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=concord.dev,resources=voiceregions/finalizers,verbs=update
// +kubebuilder:rbac:groups="",resources=services,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get
// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch

// desiredServers applies the buffer policy: the smallest server count whose
// free capacity covers the buffer, within [lo, hi].
func desiredServers(participants int64, perServer int32, buffer intstr.IntOrString, lo, hi int32) int32 {
	cap := int64(max(perServer, 1))
	var n int64
	if buffer.Type == intstr.String {
		pct, _ := strconv.Atoi(trimPercent(buffer.StrVal))
		pct = min(max(pct, 0), 99)
		// free >= pct% of total  <=>  total >= used * 100 / (100 - pct)
		total := (participants*100 + int64(100-pct) - 1) / int64(100-pct)
		n = (total + cap - 1) / cap
		if pct > 0 && n*cap-participants <= 0 {
			n++
		}
	} else {
		n = (participants+cap-1)/cap + int64(buffer.IntValue())
	}
	return int32(min(max(n, int64(lo)), int64(hi)))
}

// loadPercent is participants against a server's capacity ("42%").
func loadPercent(participants int64, perServer int32) string {
	if perServer <= 0 {
		return ""
	}
	return strconv.FormatInt(participants*100/int64(perServer), 10) + "%"
}

func trimPercent(s string) string {
	if len(s) > 0 && s[len(s)-1] == '%' {
		return s[:len(s)-1]
	}
	return s
}

// sfu is one SFU pod with its load.
type sfu struct {
	pod *corev1.Pod
	// known is true when the load was read (a fresh report); a ready
	// server of unknown load may have calls, so it is never deleted.
	known    bool
	load     fleet.VoiceLoad
	draining bool
	ready    bool
}

// idle reports whether a server can go without ending calls: it reported
// no active calls, or it is not ready and reports nothing (it never
// started, or died).
func (s sfu) idle() bool {
	if !s.known {
		return !s.ready
	}
	return s.load.ActiveCalls == 0
}

// regionRound is what one reconcile of a VoiceRegion knows: what it
// fetched and the servers it keeps, as the steps go.
type regionRound struct {
	vr      *concordv1.VoiceRegion
	cluster *concordv1.ConcordCluster
	reg     fleet.Registry
	ice     iceSettings
	resync  time.Duration
	// list is every SFU pod of the region; servers are those still in
	// play (the steps drop the ones they delete); pendingLB are Services
	// waiting for an address (publicAddress LoadBalancer).
	list         []corev1.Pod
	servers      []sfu
	pendingLB    []*corev1.Service
	participants int64
	want         int
}

// Reconcile converges one VoiceRegion in named steps: fetch the region
// and its cluster; finalize a deleted region; check the spec (ICE); apply
// the PodDisruptionBudget of its SFU pods; observe the SFU pods and their loads; start LoadBalancer servers; delete
// drained servers; roll servers with stale ICE settings; scale to the
// buffer policy; write status.
func (r *VoiceRegionReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var vr concordv1.VoiceRegion
	if err := r.Client.Get(ctx, req.NamespacedName, &vr); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	rd := &regionRound{vr: &vr, resync: r.Resync}
	if rd.resync <= 0 {
		rd.resync = 10 * time.Second
	}
	if !vr.DeletionTimestamp.IsZero() {
		return r.finalize(ctx, rd)
	}
	cluster, err := getCluster(ctx, r.Client, vr.Namespace, vr.Spec.ClusterRef)
	if err != nil {
		if apierrors.IsNotFound(err) {
			setCondition(&vr.Status.Conditions, vr.Generation, concordv1.ConditionDegraded, true, "ClusterNotFound", err.Error())
			vr.Status.ObservedGeneration = vr.Generation
			return ctrl.Result{RequeueAfter: rd.resync}, updateStatus(ctx, r.Client, &vr, "VoiceRegion")
		}
		return ctrl.Result{}, err
	}
	rd.cluster = cluster
	if ok, err := r.checkSpec(ctx, rd); !ok || err != nil {
		if err != nil {
			return ctrl.Result{}, err
		}
		return ctrl.Result{RequeueAfter: rd.resync}, updateStatus(ctx, r.Client, &vr, "VoiceRegion")
	}
	if rd.reg, err = r.Registries.Registry(ctx, clusterKey(cluster)); err != nil {
		return ctrl.Result{}, fmt.Errorf("open registry: %w", err)
	}
	if controllerutil.AddFinalizer(&vr, concordv1.Finalizer) {
		if err := r.Client.Update(ctx, &vr); err != nil {
			return ctrl.Result{}, fmt.Errorf("add finalizer: %w", err)
		}
	}
	if err := applyPDB(ctx, r.Client, r.Scheme, &vr, vr.Name,
		map[string]string{concordv1.LabelOwner: vr.Name, concordv1.LabelRole: concordv1.RoleVoice}); err != nil {
		return ctrl.Result{}, err
	}
	list, servers, err := r.observeServers(ctx, &vr)
	if err != nil {
		return ctrl.Result{}, err
	}
	rd.list, rd.servers = list.Items, servers
	for _, step := range []func(context.Context, *regionRound) error{
		r.startLoadBalanced, r.deleteDrained, r.rollStaleICE, r.scale,
	} {
		if err := step(ctx, rd); err != nil {
			return ctrl.Result{}, err
		}
	}
	return r.status(ctx, rd)
}

// finalize lets a deleted region go: SFU pods go with their owner, and
// nothing outside Kubernetes is left to release (load reports expire).
func (r *VoiceRegionReconciler) finalize(ctx context.Context, rd *regionRound) (ctrl.Result, error) {
	if controllerutil.RemoveFinalizer(rd.vr, concordv1.Finalizer) {
		if err := r.Client.Update(ctx, rd.vr); err != nil && !apierrors.IsNotFound(err) {
			return ctrl.Result{}, fmt.Errorf("remove finalizer: %w", err)
		}
	}
	return ctrl.Result{}, nil
}

// checkSpec refuses a region whose ICE settings are wrong or reference a
// missing Secret: new SFU pods would fail at start, so none is made and the
// region is Degraded (the running ones keep serving and their loads stay
// current in status). The resync retries: a Secret created later is picked
// up. It reports whether the region may proceed.
func (r *VoiceRegionReconciler) checkSpec(ctx context.Context, rd *regionRound) (bool, error) {
	vr := rd.vr
	ice, err := iceOf(vr)
	reason := "InvalidICESettings"
	if err == nil {
		reason = "ICESecretNotFound"
		if err = ice.checkSecrets(ctx, r.Secrets, vr.Namespace); err != nil && !errors.Is(err, errICESecretMissing) {
			return false, err
		}
	}
	if err == nil {
		rd.ice = ice
		return true, nil
	}
	setCondition(&vr.Status.Conditions, vr.Generation, concordv1.ConditionDegraded, true, reason, err.Error())
	vr.Status.ObservedGeneration = vr.Generation
	if _, servers, err := r.observeServers(ctx, vr); err == nil {
		serverStatus(vr, servers, 0)
	} else {
		logf.FromContext(ctx).V(1).Info("SFU pods not observed", "err", err.Error())
	}
	return false, nil
}

// startLoadBalanced creates the pods of servers whose LoadBalancer Service
// has an address now (publicAddress LoadBalancer: a server starts as a
// Service, its pod follows with the address to advertise).
func (r *VoiceRegionReconciler) startLoadBalanced(ctx context.Context, rd *regionRound) error {
	if rd.vr.Spec.PublicAddress != concordv1.PublicAddressLoadBalancer {
		return nil
	}
	pods := map[string]bool{}
	for i := range rd.list {
		pods[rd.list[i].Name] = true
	}
	created, pending, err := r.pendingServices(ctx, rd.cluster, rd.vr, pods)
	if err != nil {
		return err
	}
	for _, p := range created {
		logf.FromContext(ctx).Info("SFU pod created", "pod", p.Name, "region", rd.vr.Spec.Region)
		rd.servers = append(rd.servers, sfu{pod: p})
	}
	rd.pendingLB = pending
	return nil
}

// deleteDrained deletes drained servers whose last call ended.
func (r *VoiceRegionReconciler) deleteDrained(ctx context.Context, rd *regionRound) error {
	kept := rd.servers[:0]
	for _, s := range rd.servers {
		if s.draining && s.idle() {
			if err := r.deleteServer(ctx, rd.vr, rd.reg, s, "drained"); err != nil {
				return err
			}
			continue
		}
		kept = append(kept, s)
	}
	rd.servers = kept
	return nil
}

// rollStaleICE rolls servers made with other ICE settings, one at a time:
// the oldest is drained (its calls move; a new server replaces it in
// scale), the next once it is gone.
func (r *VoiceRegionReconciler) rollStaleICE(ctx context.Context, rd *regionRound) error {
	iceHash := rd.ice.hash()
	var stale *sfu
	for i := range rd.servers {
		s := &rd.servers[i]
		if !staleICE(s.pod, iceHash) {
			continue
		}
		if s.draining {
			return nil // one rolls at a time
		}
		if stale == nil || s.pod.CreationTimestamp.Before(&stale.pod.CreationTimestamp) {
			stale = s
		}
	}
	if stale == nil {
		return nil
	}
	logf.FromContext(ctx).Info("SFU rolls: its ICE settings changed", "pod", stale.pod.Name)
	if !stale.idle() {
		return r.drain(ctx, rd.vr, rd.reg, stale)
	}
	if err := r.deleteServer(ctx, rd.vr, rd.reg, *stale, "ICE settings changed"); err != nil {
		return err
	}
	stale.pod = nil
	rd.servers = withPods(rd.servers)
	return nil
}

// withPods drops the servers whose pod a step deleted (pod set to nil).
func withPods(servers []sfu) []sfu {
	kept := servers[:0]
	for _, s := range servers {
		if s.pod != nil {
			kept = append(kept, s)
		}
	}
	return kept
}

// scale applies the buffer policy: below it, draining servers are taken
// back first (busiest first: they are warm), then pods are added; above
// it, servers still waiting for a LoadBalancer go first, then idle ones
// (not ready, then fewest participants) are deleted and busy ones drained.
func (r *VoiceRegionReconciler) scale(ctx context.Context, rd *regionRound) error {
	vr := rd.vr
	serving := len(rd.pendingLB)
	for _, s := range rd.servers {
		if !s.draining {
			rd.participants += s.load.Participants
			serving++
		}
	}
	rd.want = int(desiredServers(rd.participants, vr.Spec.CapacityPerServer, vr.Spec.Buffer, vr.Spec.MinServers, vr.Spec.MaxServers))
	switch {
	case serving < rd.want:
		return r.scaleUp(ctx, rd, serving)
	case serving > rd.want:
		return r.scaleDown(ctx, rd, serving)
	}
	return nil
}

func (r *VoiceRegionReconciler) scaleUp(ctx context.Context, rd *regionRound, serving int) error {
	iceHash := rd.ice.hash()
	servers := rd.servers
	slices.SortFunc(servers, func(a, b sfu) int { return int(b.load.Participants - a.load.Participants) })
	for i := range servers {
		if serving >= rd.want {
			break
		}
		if s := &servers[i]; s.draining && !staleICE(s.pod, iceHash) {
			if err := r.undrain(ctx, rd.vr, rd.reg, s); err != nil {
				return err
			}
			serving++
		}
	}
	used := usedSlots(rd.list)
	live := livePods(rd.list)
	for ; serving < rd.want; serving++ {
		p, err := r.addServer(ctx, rd.cluster, rd.vr, used, &live)
		if err != nil {
			return err
		}
		if p != nil {
			logf.FromContext(ctx).Info("SFU pod created", "pod", p.Name, "region", rd.vr.Spec.Region)
			rd.servers = append(rd.servers, sfu{pod: p})
		}
	}
	return nil
}

func (r *VoiceRegionReconciler) scaleDown(ctx context.Context, rd *regionRound, serving int) error {
	for len(rd.pendingLB) > 0 && serving > rd.want {
		if err := r.Client.Delete(ctx, rd.pendingLB[0]); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("delete pending SFU Service %s: %w", rd.pendingLB[0].Name, err)
		}
		rd.pendingLB = rd.pendingLB[1:]
		serving--
	}
	if serving <= rd.want {
		return nil
	}
	var candidates []*sfu
	for i := range rd.servers {
		if !rd.servers[i].draining {
			candidates = append(candidates, &rd.servers[i])
		}
	}
	slices.SortFunc(candidates, func(a, b *sfu) int {
		if a.ready != b.ready {
			if !a.ready {
				return -1
			}
			return 1
		}
		return int(a.load.Participants - b.load.Participants)
	})
	for _, s := range candidates[:serving-rd.want] {
		if s.idle() {
			if err := r.deleteServer(ctx, rd.vr, rd.reg, *s, "idle surplus"); err != nil {
				return err
			}
			s.pod = nil
			continue
		}
		if err := r.drain(ctx, rd.vr, rd.reg, s); err != nil {
			return err
		}
	}
	rd.servers = withPods(rd.servers)
	return nil
}

// status writes the servers, their loads and the conditions.
func (r *VoiceRegionReconciler) status(ctx context.Context, rd *regionRound) (ctrl.Result, error) {
	vr := rd.vr
	st := &vr.Status
	serverStatus(vr, rd.servers, len(rd.pendingLB))
	st.DesiredServers = int32(rd.want)
	st.CapacityUsed = "0%"
	if st.Capacity > 0 {
		st.CapacityUsed = strconv.FormatInt(rd.participants*100/st.Capacity, 10) + "%"
	}
	g := vr.Generation
	ready := int(st.ReadyServers) >= rd.want
	failing := failingPods(rd.list)
	if ready {
		setCondition(&st.Conditions, g, concordv1.ConditionReady, true, "ReadyServers", fmt.Sprintf("%d/%d servers ready", st.ReadyServers, rd.want))
	} else {
		setCondition(&st.Conditions, g, concordv1.ConditionReady, false, "ServersNotReady", fmt.Sprintf("%d/%d servers ready%s", st.ReadyServers, rd.want, failing))
	}
	if !ready || st.DrainingServers > 0 {
		setCondition(&st.Conditions, g, concordv1.ConditionProgressing, true, "Scaling",
			fmt.Sprintf("%d servers, %d draining, %d desired", st.Servers, st.DrainingServers, rd.want))
	} else {
		setCondition(&st.Conditions, g, concordv1.ConditionProgressing, false, "Converged",
			fmt.Sprintf("%d servers, %d desired", st.Servers, rd.want))
	}
	if failing != "" {
		setCondition(&st.Conditions, g, concordv1.ConditionDegraded, true, ReasonPodsFailing, strings.TrimPrefix(failing, "; "))
	} else {
		setCondition(&st.Conditions, g, concordv1.ConditionDegraded, false, "Healthy", "")
	}
	st.ObservedGeneration = g
	if err := updateStatus(ctx, r.Client, vr, "VoiceRegion"); err != nil {
		return ctrl.Result{}, err
	}
	return ctrl.Result{RequeueAfter: rd.resync}, nil
}

// staleICE reports whether p was made with ICE settings other than those
// hashing to hash. A pod from before the hash was recorded is not rolled
// for it.
func staleICE(p *corev1.Pod, hash string) bool {
	h, ok := p.Annotations[annotationICEHash]
	return ok && h != hash
}

// observeServers lists the region's SFU pods and reads the load of each
// not being deleted.
func (r *VoiceRegionReconciler) observeServers(ctx context.Context, vr *concordv1.VoiceRegion) (corev1.PodList, []sfu, error) {
	var list corev1.PodList
	if err := r.Client.List(ctx, &list, client.InNamespace(vr.Namespace),
		client.MatchingLabels{concordv1.LabelOwner: vr.Name, concordv1.LabelRole: concordv1.RoleVoice}); err != nil {
		return list, nil, fmt.Errorf("list SFU pods: %w", err)
	}
	var servers []sfu
	for i := range list.Items {
		p := &list.Items[i]
		if !p.DeletionTimestamp.IsZero() {
			continue
		}
		s := sfu{pod: p, ready: podReady(p)}
		_, s.draining = drainStarted(p)
		if l, err := r.Loads.VoiceLoad(ctx, p); err == nil {
			s.load, s.known = l, true
		} else if s.ready {
			logf.FromContext(ctx).V(1).Info("voice load unavailable", "pod", p.Name, "err", err.Error())
		}
		servers = append(servers, s)
	}
	return list, servers, nil
}

// serverStatus writes the servers' part of vr's status: counts, each
// server's load, and the totals; pending are LoadBalancer servers
// without a pod yet.
func serverStatus(vr *concordv1.VoiceRegion, servers []sfu, pending int) {
	var participants int64
	for _, s := range servers {
		if !s.draining {
			participants += s.load.Participants
		}
	}
	st := &vr.Status
	st.Servers, st.ReadyServers, st.DrainingServers = int32(len(servers)), 0, 0
	st.ActiveCalls, st.Participants, st.Capacity = 0, 0, 0
	st.Servers += int32(pending)
	st.ServerLoads = st.ServerLoads[:0]
	for _, s := range servers {
		st.ServerLoads = append(st.ServerLoads, concordv1.VoiceServerStatus{
			Name: s.pod.Name, Endpoint: s.load.Endpoint, Ready: s.ready, Draining: s.draining,
			Reporting: s.known, Calls: s.load.ActiveCalls, Participants: s.load.Participants,
			PacketsForwarded: int64(s.load.PacketsForwarded), Load: loadPercent(s.load.Participants, vr.Spec.CapacityPerServer),
		})
		if s.known {
			e := &st.ServerLoads[len(st.ServerLoads)-1]
			e.PacketLoss = strconv.FormatFloat(s.load.LossRatio*100, 'f', 1, 64) + "%"
			e.Jitter = s.load.Jitter.Round(100 * time.Microsecond).String()
			if s.load.RTT > 0 {
				e.RTT = s.load.RTT.Round(100 * time.Microsecond).String()
			}
		}
	}
	slices.SortFunc(st.ServerLoads, func(a, b concordv1.VoiceServerStatus) int { return strings.Compare(a.Name, b.Name) })
	for _, s := range servers {
		st.ActiveCalls += s.load.ActiveCalls
		st.Participants += s.load.Participants
		if s.draining {
			st.DrainingServers++
			continue
		}
		st.Capacity += int64(vr.Spec.CapacityPerServer)
		if s.ready {
			st.ReadyServers++
		}
	}
	st.CapacityUsed = "0%"
	if st.Capacity > 0 {
		st.CapacityUsed = strconv.FormatInt(participants*100/st.Capacity, 10) + "%"
	}
}

// drain marks a busy surplus server draining: no new calls, deleted when
// its calls end.
func (r *VoiceRegionReconciler) drain(ctx context.Context, vr *concordv1.VoiceRegion, reg fleet.Registry, s *sfu) error {
	p := s.pod
	patch := client.MergeFrom(p.DeepCopy())
	if p.Annotations == nil {
		p.Annotations = map[string]string{}
	}
	p.Annotations[concordv1.AnnotationDraining] = r.Clock.Now().UTC().Format(time.RFC3339)
	if err := r.Client.Patch(ctx, p, patch); err != nil {
		return fmt.Errorf("annotate draining SFU %s: %w", p.Name, err)
	}
	if err := reg.MarkDraining(ctx, concordv1.RoleVoice, p.Name); err != nil {
		return fmt.Errorf("mark SFU %s draining: %w", p.Name, err)
	}
	if _, err := r.Drainer.Drain(ctx, p, fleet.DrainRequest{}); err != nil {
		logf.FromContext(ctx).Info("SFU drain call failed; the registry mark still stops new calls", "pod", p.Name, "err", err.Error())
	}
	s.draining = true
	logf.FromContext(ctx).Info("SFU draining", "pod", p.Name, "calls", s.load.ActiveCalls)
	r.Recorder.Eventf(vr, p, corev1.EventTypeNormal, "Draining", "Drain",
		"%s has %d active calls; it takes no new calls and goes when they end", p.Name, s.load.ActiveCalls)
	return nil
}

// undrain returns a draining server to service.
func (r *VoiceRegionReconciler) undrain(ctx context.Context, vr *concordv1.VoiceRegion, reg fleet.Registry, s *sfu) error {
	p := s.pod
	patch := client.MergeFrom(p.DeepCopy())
	delete(p.Annotations, concordv1.AnnotationDraining)
	if err := r.Client.Patch(ctx, p, patch); err != nil {
		return fmt.Errorf("undrain SFU %s: %w", p.Name, err)
	}
	if err := reg.ClearDraining(ctx, concordv1.RoleVoice, p.Name); err != nil {
		return fmt.Errorf("clear draining mark of SFU %s: %w", p.Name, err)
	}
	s.draining = false
	r.Recorder.Eventf(vr, p, corev1.EventTypeNormal, "Undrained", "Scale", "%s takes calls again", p.Name)
	return nil
}

// deleteServer deletes an SFU pod that has no active calls.
func (r *VoiceRegionReconciler) deleteServer(ctx context.Context, vr *concordv1.VoiceRegion, reg fleet.Registry, s sfu, why string) error {
	if s.load.ActiveCalls > 0 {
		return fmt.Errorf("refusing to delete SFU %s with %d active calls", s.pod.Name, s.load.ActiveCalls)
	}
	if err := r.Client.Delete(ctx, s.pod); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("delete SFU %s: %w", s.pod.Name, err)
	}
	if vr.Spec.PublicAddress == concordv1.PublicAddressLoadBalancer {
		svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: s.pod.Namespace, Name: s.pod.Name}}
		if err := r.Client.Delete(ctx, svc); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("delete Service of SFU %s: %w", s.pod.Name, err)
		}
	}
	if err := reg.ClearDraining(ctx, concordv1.RoleVoice, s.pod.Name); err != nil {
		return fmt.Errorf("clear draining mark of SFU %s: %w", s.pod.Name, err)
	}
	logf.FromContext(ctx).Info("SFU removed", "pod", s.pod.Name, "why", why)
	r.Recorder.Eventf(vr, s.pod, corev1.EventTypeNormal, "ServerRemoved", "Scale", "%s removed (%s)", s.pod.Name, why)
	return nil
}

// SetupWithManager registers the reconciler.
func (r *VoiceRegionReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&concordv1.VoiceRegion{}).
		Owns(&corev1.Pod{}).
		Owns(&corev1.Service{}).
		Owns(&policyv1.PodDisruptionBudget{}).
		Named("voiceregion").
		Complete(r)
}
