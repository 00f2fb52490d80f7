package controller

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"

	concordv1 "github.com/concord-chat/concord/apis/v1alpha1"
)

// With publicAddress NodeExternalIP an SFU is reached at its node's
// external IP on its hostPorts. The downward API gives a pod its node's
// status.hostIP, which is the node's internal address, and nothing about
// its external one; and the SFU must know the address it advertises
// before its first client (voice Ready carries it). So the operator
// chooses the node itself, among the schedulable nodes that have an
// ExternalIP and match the region's nodeSelector and tolerations: it
// pins the pod there with a required node affinity (the scheduler still
// checks resources and host ports) and sets CONCORD_VOICE_PUBLIC_IP to
// that node's ExternalIP. The node is the one with the fewest of the
// region's SFUs (without a port range two cannot share a node's ports).
// A cluster whose nodes have no ExternalIP at all (bare metal, kind) keeps
// the scheduler's choice and advertises status.hostIP, the address its
// clients reach the nodes at.

// nodeHosting is a node an SFU can be pinned to and the address it
// advertises there.
type nodeHosting struct {
	node, ip string
}

// externalIP is a node's first ExternalIP.
func externalIP(n *corev1.Node) string {
	for _, a := range n.Status.Addresses {
		if a.Type == corev1.NodeExternalIP && a.Address != "" {
			return a.Address
		}
	}
	return ""
}

// schedulable reports whether the region's pods may run on n: not
// cordoned, not NotReady, its labels matching the nodeSelector, its
// NoSchedule and NoExecute taints tolerated.
func schedulable(n *corev1.Node, vr *concordv1.VoiceRegion) bool {
	if n.Spec.Unschedulable || !n.DeletionTimestamp.IsZero() {
		return false
	}
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady && c.Status != corev1.ConditionTrue {
			return false
		}
	}
	if !labels.SelectorFromSet(vr.Spec.NodeSelector).Matches(labels.Set(n.Labels)) {
		return false
	}
	for _, t := range n.Spec.Taints {
		if t.Effect == corev1.TaintEffectPreferNoSchedule {
			continue
		}
		if !slices.ContainsFunc(vr.Spec.Tolerations, func(tol corev1.Toleration) bool { return tolerates(tol, t) }) {
			return false
		}
	}
	return true
}

// tolerates reports whether tol tolerates t, as the scheduler decides it
// for the Equal and Exists operators.
func tolerates(tol corev1.Toleration, t corev1.Taint) bool {
	if tol.Effect != "" && tol.Effect != t.Effect {
		return false
	}
	if tol.Key == "" {
		return tol.Operator == corev1.TolerationOpExists
	}
	if tol.Key != t.Key {
		return false
	}
	return tol.Operator == corev1.TolerationOpExists || tol.Value == t.Value
}

// chooseNode picks the node of a new NodeExternalIP SFU. ok is false when
// no node has an ExternalIP (the scheduler chooses, status.hostIP is
// advertised); a zero nodeHosting with ok true means nodes have external
// addresses but none can take another of the region's SFUs now.
func (r *VoiceRegionReconciler) chooseNode(ctx context.Context, vr *concordv1.VoiceRegion, pods []corev1.Pod) (nodeHosting, bool, error) {
	var nodes corev1.NodeList
	if err := r.Client.List(ctx, &nodes); err != nil {
		return nodeHosting{}, false, fmt.Errorf("list nodes: %w", err)
	}
	anyExternal := false
	per := map[string]int{}
	for _, p := range pods {
		if n := pinnedNode(&p); n != "" {
			per[n]++
		} else if p.Spec.NodeName != "" {
			per[p.Spec.NodeName]++
		}
	}
	var best *corev1.Node
	for i := range nodes.Items {
		n := &nodes.Items[i]
		if externalIP(n) == "" {
			continue
		}
		anyExternal = true
		if !schedulable(n, vr) || (vr.Spec.PortRange == nil && per[n.Name] > 0) {
			continue
		}
		if best == nil || per[n.Name] < per[best.Name] || (per[n.Name] == per[best.Name] && strings.Compare(n.Name, best.Name) < 0) {
			best = n
		}
	}
	if best == nil {
		return nodeHosting{}, anyExternal, nil
	}
	return nodeHosting{node: best.Name, ip: externalIP(best)}, true, nil
}

// pinnedNode is the node a pod's required affinity pins it to, if any.
func pinnedNode(p *corev1.Pod) string {
	return p.Annotations[annotationNode]
}

// annotationNode records the node an SFU pod was pinned to.
const annotationNode = "voice.concord.dev/node"

// pinToNode makes spec schedulable only on node, on top of any required
// node affinity it has.
func pinToNode(spec *corev1.PodSpec, node string) {
	req := corev1.NodeSelectorRequirement{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{node}}
	if spec.Affinity == nil {
		spec.Affinity = &corev1.Affinity{}
	}
	if spec.Affinity.NodeAffinity == nil {
		spec.Affinity.NodeAffinity = &corev1.NodeAffinity{}
	}
	na := spec.Affinity.NodeAffinity
	if na.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		na.RequiredDuringSchedulingIgnoredDuringExecution = &corev1.NodeSelector{}
	}
	terms := &na.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	if len(*terms) == 0 {
		*terms = []corev1.NodeSelectorTerm{{}}
	}
	// Terms are ORed, a term's requirements ANDed: pin every term.
	for i := range *terms {
		(*terms)[i].MatchFields = append((*terms)[i].MatchFields, req)
	}
}

// livePods filters a pod list to the ones not being deleted.
func livePods(list []corev1.Pod) []corev1.Pod {
	out := make([]corev1.Pod, 0, len(list))
	for _, p := range list {
		if p.DeletionTimestamp.IsZero() {
			out = append(out, p)
		}
	}
	return out
}
