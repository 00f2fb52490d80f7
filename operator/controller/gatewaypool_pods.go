package controller

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/rand"

	concordv1 "github.com/concord-chat/concord/apis/v1alpha1"
)

// gatewayPodLabels are the labels of a pool's pods (the pool's selector).
func gatewayPodLabels(pool *concordv1.GatewayPool) map[string]string {
	return map[string]string{
		concordv1.LabelCluster: pool.Spec.ClusterRef.Name,
		concordv1.LabelRole:    concordv1.RoleGateway,
		concordv1.LabelOwner:   pool.Name,
	}
}

// gatewayPodSpec is the pod spec of one gateway of the pool: the runtime's
// gateway role with the pool's ports, the client class, the sessions target
// and the concord.dev/serving readiness gate the operator turns off to drain.
func gatewayPodSpec(c *concordv1.ConcordCluster, pool *concordv1.GatewayPool) corev1.PodSpec {
	port := pool.Spec.Port
	if port == 0 {
		port = PortHTTP
	}
	extra := []corev1.EnvVar{
		env("CONCORD_GATEWAY_CLIENT_CLASS", string(pool.Spec.ClientClass)),
		env("CONCORD_GATEWAY_SESSIONS_TARGET", strconv.Itoa(int(pool.Spec.SessionsPerPod))),
		env("CONCORD_GATEWAY_POOL", pool.Name),
	}
	if len(pool.Spec.TrustedProxies) > 0 {
		// --trusted-proxies, as every setting reaches the runtime: through
		// its environment fallback.
		extra = append(extra, env("CONCORD_TRUSTED_PROXIES", strings.Join(pool.Spec.TrustedProxies, ",")))
	}
	spec := runtimePodSpec(c, pool.Spec.Image, []string{concordv1.RoleGateway}, extra, pool.Spec.PodPlacement)
	ct := &spec.Containers[0]
	// The admin listener (drain) is AdminPort, else PortAdmin; when that
	// is the WebSocket port itself, the WebSocket listener serves /admin.
	admin := pool.Spec.AdminPort
	if admin == 0 {
		admin = PortAdmin
	}
	envs := ct.Env[:0]
	for _, e := range ct.Env {
		switch e.Name {
		case "CONCORD_HTTP":
			e.Value = "0.0.0.0:" + strconv.Itoa(int(port))
		case "CONCORD_ADMIN":
			if admin == port {
				continue
			}
			e.Value = "0.0.0.0:" + strconv.Itoa(int(admin))
		}
		envs = append(envs, e)
	}
	ct.Env = envs
	ct.Ports = []corev1.ContainerPort{
		{Name: "http", ContainerPort: port, Protocol: corev1.ProtocolTCP},
		{Name: "grpc", ContainerPort: PortGRPC, Protocol: corev1.ProtocolTCP},
	}
	if admin != port {
		ct.Ports = append(ct.Ports, corev1.ContainerPort{Name: "admin", ContainerPort: admin, Protocol: corev1.ProtocolTCP})
	}
	spec.ReadinessGates = []corev1.PodReadinessGate{{ConditionType: concordv1.ReadinessGateServing}}
	// A pod deleted by anyone but the operator (an eviction, kubectl
	// delete) waits in preStop for up to the drain timeout while the
	// operator drains it, then lets it go at once; the grace period covers
	// that wait and SIGTERM's own shutdown after it.
	drain := int64(durationOr(pool.Spec.Drain.Timeout, 5*time.Minute).Seconds())
	ct.Lifecycle = &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Sleep: &corev1.SleepAction{Seconds: drain}}}
	grace := drain + 30
	spec.TerminationGracePeriodSeconds = &grace
	return spec
}

// templateRevision hashes the pod spec and labels; a pod whose revision
// label differs is outdated and leaves through a drain.
func templateRevision(spec corev1.PodSpec, labels map[string]string) (string, error) {
	b, err := json.Marshal(struct {
		Spec   corev1.PodSpec    `json:"spec"`
		Labels map[string]string `json:"labels"`
	}{spec, labels})
	if err != nil {
		return "", fmt.Errorf("hash pod template: %w", err)
	}
	h := fnv.New32a()
	_, _ = h.Write(b)
	return rand.SafeEncodeString(strconv.FormatUint(uint64(h.Sum32()), 10)), nil
}

// newGatewayPod builds one pod of the pool at the given revision.
func newGatewayPod(c *concordv1.ConcordCluster, pool *concordv1.GatewayPool, spec corev1.PodSpec, revision string) *corev1.Pod {
	labels := withLabels(roleLabels(c, concordv1.RoleGateway), gatewayPodLabels(pool))
	labels[concordv1.LabelRevision] = revision
	labels["concord.dev/client-class"] = string(pool.Spec.ClientClass)
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: pool.Namespace,
			Name:      pool.Name + "-" + rand.String(5),
			Labels:    labels,
		},
		Spec: *spec.DeepCopy(),
	}
}

// gatewayPod is one pod of a pool with what the reconciler learnt about it.
type gatewayPod struct {
	pod      *corev1.Pod
	ready    bool
	current  bool // on the current revision
	sessions int64
}

// pickVictims orders serving pods by how cheaply they leave and returns the
// first n: not ready first, then outdated, then fewest sessions, then the
// youngest (its clients have reconnected least recently).
func pickVictims(pods []gatewayPod, n int) []gatewayPod {
	s := slices.Clone(pods)
	slices.SortStableFunc(s, func(a, b gatewayPod) int {
		if a.ready != b.ready {
			if !a.ready {
				return -1
			}
			return 1
		}
		if a.current != b.current {
			if !a.current {
				return -1
			}
			return 1
		}
		if a.sessions != b.sessions {
			if a.sessions < b.sessions {
				return -1
			}
			return 1
		}
		return b.pod.CreationTimestamp.Compare(a.pod.CreationTimestamp.Time)
	})
	if n > len(s) {
		n = len(s)
	}
	return s[:n]
}

// pickSuccessor returns the ready current-revision pod with the fewest
// sessions that is not leaving, or nil when none is.
func pickSuccessor(pods []gatewayPod, leaving map[string]bool) *gatewayPod {
	var best *gatewayPod
	for i := range pods {
		p := &pods[i]
		if leaving[p.pod.Name] || !p.ready || !p.current {
			continue
		}
		if best == nil || p.sessions < best.sessions {
			best = p
		}
	}
	return best
}

// mutateGatewayService fills the pool's Service: the address clients
// connect to. It selects every pod of the pool, and the concord.dev/serving
// readiness gate keeps a draining pod out of its endpoints, so new
// connections reach only serving gateways while a drain hands sessions over.
func mutateGatewayService(pool *concordv1.GatewayPool, s *corev1.Service) {
	port := pool.Spec.Port
	if port == 0 {
		port = PortHTTP
	}
	s.Labels = withLabels(s.Labels, gatewayPodLabels(pool))
	s.Spec.Selector = gatewayPodLabels(pool)
	s.Spec.Ports = []corev1.ServicePort{
		{Name: "http", Port: port, TargetPort: intstr.FromString("http"), Protocol: corev1.ProtocolTCP},
	}
}

// mutateGatewayPDB fills the pool's PodDisruptionBudget: voluntary
// disruptions (kubectl drain, the Eviction API) take one gateway at a
// time, so its sessions always have somewhere to resume.
func mutateGatewayPDB(pool *concordv1.GatewayPool, p *policyv1.PodDisruptionBudget) {
	mu := intstr.FromInt32(1)
	p.Labels = withLabels(p.Labels, gatewayPodLabels(pool))
	p.Spec.MaxUnavailable = &mu
	p.Spec.Selector = &metav1.LabelSelector{MatchLabels: gatewayPodLabels(pool)}
}
