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

// Reconcile converges one VoiceRegion.
func (r *VoiceRegionReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	log := logf.FromContext(ctx)
	var vr concordv1.VoiceRegion
	if err := r.Client.Get(ctx, req.NamespacedName, &vr); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	resync := r.Resync
	if resync <= 0 {
		resync = 10 * time.Second
	}
	if !vr.DeletionTimestamp.IsZero() {
		// SFU pods go with their owner; nothing outside Kubernetes to release.
		if controllerutil.RemoveFinalizer(&vr, concordv1.Finalizer) {
			if err := r.Client.Update(ctx, &vr); err != nil && !apierrors.IsNotFound(err) {
				return ctrl.Result{}, fmt.Errorf("remove finalizer: %w", err)
			}
		}
		return ctrl.Result{}, nil
	}
	cluster, err := getCluster(ctx, r.Client, vr.Namespace, vr.Spec.ClusterRef)
	if err != nil {
		if apierrors.IsNotFound(err) {
			setCondition(&vr.Status.Conditions, vr.Generation, concordv1.ConditionDegraded, true, "ClusterNotFound", err.Error())
			vr.Status.ObservedGeneration = vr.Generation
			return ctrl.Result{RequeueAfter: resync}, updateStatus(ctx, r.Client, &vr, "VoiceRegion")
		}
		return ctrl.Result{}, err
	}
	ice, err := iceOf(&vr)
	reason := "InvalidICESettings"
	if err == nil {
		reason = "ICESecretNotFound"
		if err = ice.checkSecrets(ctx, r.Secrets, vr.Namespace); err != nil && !errors.Is(err, errICESecretMissing) {
			return ctrl.Result{}, err
		}
	}
	if err != nil {
		// New SFU pods would fail at start; the ones running keep theirs.
		// The resync retries: a Secret created later is picked up.
		setCondition(&vr.Status.Conditions, vr.Generation, concordv1.ConditionDegraded, true, reason, err.Error())
		vr.Status.ObservedGeneration = vr.Generation
		// The servers running keep serving: their loads stay current.
		if _, servers, err := r.observeServers(ctx, &vr); err == nil {
			serverStatus(&vr, servers, 0)
		} else {
			log.V(1).Info("SFU pods not observed", "err", err.Error())
		}
		return ctrl.Result{RequeueAfter: resync}, updateStatus(ctx, r.Client, &vr, "VoiceRegion")
	}
	reg, err := r.Registries.Registry(ctx, clusterKey(cluster))
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("open registry: %w", err)
	}
	if controllerutil.AddFinalizer(&vr, concordv1.Finalizer) {
		if err := r.Client.Update(ctx, &vr); err != nil {
			return ctrl.Result{}, fmt.Errorf("add finalizer: %w", err)
		}
	}

	list, servers, err := r.observeServers(ctx, &vr)
	if err != nil {
		return ctrl.Result{}, err
	}
	pods := map[string]bool{}
	for i := range list.Items {
		pods[list.Items[i].Name] = true
	}

	// With publicAddress LoadBalancer a server starts as a Service; its pod
	// follows once the Service has an address to advertise.
	var pendingLB []*corev1.Service
	if vr.Spec.PublicAddress == concordv1.PublicAddressLoadBalancer {
		created, pending, err := r.pendingServices(ctx, cluster, &vr, pods)
		if err != nil {
			return ctrl.Result{}, err
		}
		for _, p := range created {
			log.Info("SFU pod created", "pod", p.Name, "region", vr.Spec.Region)
			servers = append(servers, sfu{pod: p})
		}
		pendingLB = pending
	}

	// Drained servers whose last call ended go.
	kept := servers[:0]
	for _, s := range servers {
		if s.draining && s.idle() {
			if err := r.deleteServer(ctx, &vr, reg, s, "drained"); err != nil {
				return ctrl.Result{}, err
			}
			continue
		}
		kept = append(kept, s)
	}
	servers = kept

	// Servers made with other ICE settings roll, one at a time: the
	// oldest is drained (its calls move; a new server replaces it below),
	// the next once it is gone.
	iceHash := ice.hash()
	rolling := false
	var stale *sfu
	for i := range servers {
		s := &servers[i]
		if !staleICE(s.pod, iceHash) {
			continue
		}
		if s.draining {
			rolling = true
		} else if stale == nil || s.pod.CreationTimestamp.Before(&stale.pod.CreationTimestamp) {
			stale = s
		}
	}
	if stale != nil && !rolling {
		log.Info("SFU rolls: its ICE settings changed", "pod", stale.pod.Name)
		if stale.idle() {
			if err := r.deleteServer(ctx, &vr, reg, *stale, "ICE settings changed"); err != nil {
				return ctrl.Result{}, err
			}
			stale.pod = nil
			kept := servers[:0]
			for _, s := range servers {
				if s.pod != nil {
					kept = append(kept, s)
				}
			}
			servers = kept
		} else if err := r.drain(ctx, &vr, reg, stale); err != nil {
			return ctrl.Result{}, err
		}
	}

	var participants int64
	serving := len(pendingLB)
	for _, s := range servers {
		if !s.draining {
			participants += s.load.Participants
			serving++
		}
	}
	want := int(desiredServers(participants, vr.Spec.CapacityPerServer, vr.Spec.Buffer, vr.Spec.MinServers, vr.Spec.MaxServers))

	switch {
	case serving < want:
		// Take back draining servers first (busiest first): they are warm.
		slices.SortFunc(servers, func(a, b sfu) int { return int(b.load.Participants - a.load.Participants) })
		for i := range servers {
			if serving >= want {
				break
			}
			if s := &servers[i]; s.draining && !staleICE(s.pod, iceHash) {
				if err := r.undrain(ctx, &vr, reg, s); err != nil {
					return ctrl.Result{}, err
				}
				serving++
			}
		}
		used := usedSlots(list.Items)
		live := livePods(list.Items)
		for ; serving < want; serving++ {
			p, err := r.addServer(ctx, cluster, &vr, used, &live)
			if err != nil {
				return ctrl.Result{}, err
			}
			if p != nil {
				log.Info("SFU pod created", "pod", p.Name, "region", vr.Spec.Region)
				servers = append(servers, sfu{pod: p})
			}
		}
	case serving > want:
		// Servers still waiting for their LoadBalancer go first.
		for len(pendingLB) > 0 && serving > want {
			if err := r.Client.Delete(ctx, pendingLB[0]); client.IgnoreNotFound(err) != nil {
				return ctrl.Result{}, fmt.Errorf("delete pending SFU Service %s: %w", pendingLB[0].Name, err)
			}
			pendingLB = pendingLB[1:]
			serving--
		}
		if serving <= want {
			break
		}
		// Idle servers first (not ready, then fewest participants).
		var candidates []*sfu
		for i := range servers {
			if !servers[i].draining {
				candidates = append(candidates, &servers[i])
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
		for _, s := range candidates[:serving-want] {
			if s.idle() {
				if err := r.deleteServer(ctx, &vr, reg, *s, "idle surplus"); err != nil {
					return ctrl.Result{}, err
				}
				s.pod = nil
				continue
			}
			if err := r.drain(ctx, &vr, reg, s); err != nil {
				return ctrl.Result{}, err
			}
		}
		kept := servers[:0]
		for _, s := range servers {
			if s.pod != nil {
				kept = append(kept, s)
			}
		}
		servers = kept
	}

	// Status.
	st := &vr.Status
	serverStatus(&vr, servers, len(pendingLB))
	st.DesiredServers = int32(want)
	st.CapacityUsed = "0%"
	if st.Capacity > 0 {
		st.CapacityUsed = strconv.FormatInt(participants*100/st.Capacity, 10) + "%"
	}
	g := vr.Generation
	ready := int(st.ReadyServers) >= want
	setCondition(&st.Conditions, g, concordv1.ConditionReady, ready, "ReadyServers",
		fmt.Sprintf("%d/%d servers ready", st.ReadyServers, want))
	setCondition(&st.Conditions, g, concordv1.ConditionProgressing, !ready || st.DrainingServers > 0, "Scaling",
		fmt.Sprintf("%d servers, %d draining, %d desired", st.Servers, st.DrainingServers, want))
	setCondition(&st.Conditions, g, concordv1.ConditionDegraded, false, "Healthy", "")
	st.ObservedGeneration = g
	if err := updateStatus(ctx, r.Client, &vr, "VoiceRegion"); err != nil {
		return ctrl.Result{}, err
	}
	return ctrl.Result{RequeueAfter: resync}, nil
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
		Named("voiceregion").
		Complete(r)
}
