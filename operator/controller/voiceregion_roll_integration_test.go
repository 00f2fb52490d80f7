//go:build integration

package controller

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	concordv1 "github.com/concord-chat/concord/apis/v1alpha1"
	"github.com/concord-chat/concord/operator/fleet"
)

// updateRegion changes vr's spec with change on the latest copy, again
// when the operator's status write got in between (409 Conflict).
func updateRegion(g *WithT, vr *concordv1.VoiceRegion, change func(*concordv1.VoiceRegion)) {
	ctx := context.Background()
	g.Eventually(func() error {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(vr), vr); err != nil {
			return err
		}
		change(vr)
		return k8s.Update(ctx, vr)
	}, specWait, poll).Should(Succeed())
}

// newRegion creates, in a new namespace holding the Cluster "prod", the
// VoiceRegion name (region eu-west, one to three servers) with edit
// applied to its spec, and returns it and the labels of its SFU pods.
func newRegion(t *testing.T, name string, edit func(*concordv1.VoiceRegionSpec)) (*concordv1.VoiceRegion, map[string]string) {
	t.Helper()
	ns := newNamespace(t)
	newCluster(t, ns, "prod")
	vr := &concordv1.VoiceRegion{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: concordv1.VoiceRegionSpec{
			ClusterRef: concordv1.ClusterReference{Name: "prod"}, Region: "eu-west", MinServers: 1, MaxServers: 3,
		},
	}
	edit(&vr.Spec)
	NewWithT(t).Expect(k8s.Create(context.Background(), vr)).To(Succeed())
	return vr, map[string]string{concordv1.LabelOwner: name, concordv1.LabelRole: concordv1.RoleVoice}
}

// newNode creates a node with the given addresses (and removes it at
// cleanup, waiting until the operator's cache no longer has it, so later
// tests see no nodes).
func newNode(t *testing.T, name string, unschedulable bool, addrs ...corev1.NodeAddress) *corev1.Node {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.NodeSpec{Unschedulable: unschedulable}}
	g.Expect(k8s.Create(ctx, n)).To(Succeed())
	// The API server taints a new node not-ready (TaintNodesByCondition);
	// a cluster's node controller lifts it once the kubelet reports in.
	n.Spec.Taints = nil
	g.Expect(k8s.Update(ctx, n)).To(Succeed())
	n.Status.Addresses = addrs
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
	g.Expect(k8s.Status().Update(ctx, n)).To(Succeed())
	t.Cleanup(func() {
		_ = k8s.Delete(ctx, n)
		NewWithT(t).Eventually(func(g Gomega) {
			err := opClient.Get(ctx, client.ObjectKey{Name: name}, &corev1.Node{})
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "node %s still cached: %v", name, err)
		}, specWait, poll).Should(Succeed())
	})
	return n
}

func external(ip string) corev1.NodeAddress {
	return corev1.NodeAddress{Type: corev1.NodeExternalIP, Address: ip}
}

func internal(ip string) corev1.NodeAddress {
	return corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: ip}
}

// pinned is the node a pod's required affinity pins it to.
func pinned(p corev1.Pod) string {
	a := p.Spec.Affinity
	if a == nil || a.NodeAffinity == nil || a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return ""
	}
	for _, term := range a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
		for _, f := range term.MatchFields {
			if f.Key == "metadata.name" && f.Operator == corev1.NodeSelectorOpIn && len(f.Values) == 1 {
				return f.Values[0]
			}
		}
	}
	return ""
}

// TestVoiceRegionNodeExternalIP: with publicAddress NodeExternalIP and
// nodes that have external addresses, each SFU pod is pinned to a
// schedulable node with an ExternalIP and advertises that address (not
// status.hostIP, the node's internal one); a node already holding one of
// the region's SFUs (its hostPorts), a cordoned node and a node without
// an ExternalIP take none, so a second server waits until a node can
// take it.
func TestVoiceRegionNodeExternalIP(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	newNode(t, "sfu-node-a", false, internal("10.1.0.1"), external("203.0.113.21"))
	cordoned := newNode(t, "sfu-node-b", true, internal("10.1.0.2"), external("203.0.113.22"))
	newNode(t, "sfu-node-c", false, internal("10.1.0.3"))
	vr, labels := newRegion(t, "ext", func(s *concordv1.VoiceRegionSpec) { s.PublicAddress = concordv1.PublicAddressNodeExternalIP })
	ns := vr.Namespace
	g.Eventually(func(g Gomega) {
		pods := listPods(g, ns, labels)
		g.Expect(pods).To(HaveLen(1))
		g.Expect(pinned(pods[0])).To(Equal("sfu-node-a"))
		g.Expect(envValue(pods[0].Spec, "CONCORD_VOICE_PUBLIC_IP")).To(Equal("203.0.113.21"))
		g.Expect(envValue(pods[0].Spec, "CONCORD_VOICE_PUBLIC_HOST")).To(Equal("203.0.113.21"))
	}, specWait, poll).Should(Succeed())

	// Two servers wanted: no node can take the second (a holds one, b is
	// cordoned, c has no external address).
	updateRegion(g, vr, func(vr *concordv1.VoiceRegion) { vr.Spec.MinServers = 2 })
	g.Eventually(func(g Gomega) {
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(vr), vr)).To(Succeed())
		g.Expect(vr.Status.ObservedGeneration).To(Equal(vr.Generation))
		g.Expect(vr.Status.DesiredServers).To(Equal(int32(2)))
	}, specWait, poll).Should(Succeed())
	g.Expect(listPods(g, ns, labels)).To(HaveLen(1))

	// b is uncordoned: the second server goes there, with b's address.
	g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(cordoned), cordoned)).To(Succeed())
	cordoned.Spec.Unschedulable = false
	g.Expect(k8s.Update(ctx, cordoned)).To(Succeed())
	g.Eventually(func(g Gomega) {
		pods := listPods(g, ns, labels)
		g.Expect(pods).To(HaveLen(2))
		got := map[string]string{}
		for _, p := range pods {
			got[pinned(p)] = envValue(p.Spec, "CONCORD_VOICE_PUBLIC_IP")
		}
		g.Expect(got).To(Equal(map[string]string{"sfu-node-a": "203.0.113.21", "sfu-node-b": "203.0.113.22"}))
	}, specWait, poll).Should(Succeed())
}

// TestVoiceRegionICERollsPods: changing spec.ice rolls the SFU pods: the
// pod made with the old settings is drained while it has calls (never
// killed), a pod with the new settings replaces it, and the old one goes
// once its calls ended.
func TestVoiceRegionICERollsPods(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	vr, labels := newRegion(t, "roll", func(s *concordv1.VoiceRegionSpec) {
		s.CapacityPerServer = 100
		s.ICE = &concordv1.VoiceICE{Servers: []string{"stun:old.example:3478"}}
	})
	ns := vr.Namespace
	var old corev1.Pod
	g.Eventually(func(g Gomega) {
		g.Expect(markPodsReady(g, ns, labels)).To(Equal(1))
		old = listPods(g, ns, labels)[0]
		g.Expect(envValue(old.Spec, "CONCORD_VOICE_ICE_SERVERS")).To(Equal("stun:old.example:3478"))
	}, specWait, poll).Should(Succeed())
	mem.SetVoiceLoad(ns, old.Name, fleet.VoiceLoad{ActiveCalls: 2, Participants: 6})
	g.Eventually(func(g Gomega) {
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(vr), vr)).To(Succeed())
		g.Expect(vr.Status.ActiveCalls).To(Equal(int64(2)))
	}, specWait, poll).Should(Succeed())

	updateRegion(g, vr, func(vr *concordv1.VoiceRegion) { vr.Spec.ICE.Servers = []string{"stun:new.example:3478"} })
	var fresh string
	g.Eventually(func(g Gomega) {
		markPodsReady(g, ns, labels)
		var p corev1.Pod
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(&old), &p)).To(Succeed())
		g.Expect(p.DeletionTimestamp).To(BeNil(), "a server with calls is drained, never killed")
		g.Expect(p.Annotations).To(HaveKey(concordv1.AnnotationDraining))
		pods := listPods(g, ns, labels)
		g.Expect(pods).To(HaveLen(2))
		for _, q := range pods {
			if q.Name != old.Name {
				fresh = q.Name
				g.Expect(envValue(q.Spec, "CONCORD_VOICE_ICE_SERVERS")).To(Equal("stun:new.example:3478"))
				g.Expect(q.Annotations[annotationICEHash]).NotTo(Equal(old.Annotations[annotationICEHash]))
			}
		}
	}, specWait, poll).Should(Succeed())

	// The old server's calls moved: it goes; the new one stays.
	mem.SetVoiceLoad(ns, old.Name, fleet.VoiceLoad{})
	g.Eventually(func(g Gomega) {
		err := k8s.Get(ctx, client.ObjectKeyFromObject(&old), &corev1.Pod{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "got %v", err)
		pods := listPods(g, ns, labels)
		g.Expect(pods).To(HaveLen(1))
		g.Expect(pods[0].Name).To(Equal(fresh))
		g.Expect(pods[0].Annotations).NotTo(HaveKey(concordv1.AnnotationDraining))
	}, specWait, poll).Should(Succeed())
}

// TestVoiceRegionDegradedKeepsLoadsCurrent: a region whose ICE settings
// became invalid is Degraded and makes no pod, but the servers already
// running keep being reported: status.serverLoads follows their loads.
func TestVoiceRegionDegradedKeepsLoadsCurrent(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	vr, labels := newRegion(t, "deg", func(s *concordv1.VoiceRegionSpec) { s.CapacityPerServer = 100 })
	ns := vr.Namespace
	var pod corev1.Pod
	g.Eventually(func(g Gomega) {
		g.Expect(markPodsReady(g, ns, labels)).To(Equal(1))
		pod = listPods(g, ns, labels)[0]
	}, specWait, poll).Should(Succeed())
	mem.SetVoiceLoad(ns, pod.Name, fleet.VoiceLoad{ActiveCalls: 1, Participants: 3})
	g.Eventually(func(g Gomega) {
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(vr), vr)).To(Succeed())
		g.Expect(vr.Status.ServerLoads).To(HaveLen(1))
		g.Expect(vr.Status.ServerLoads[0].Participants).To(Equal(int64(3)))
	}, specWait, poll).Should(Succeed())

	// A TURN server whose Secret does not exist: Degraded.
	updateRegion(g, vr, func(vr *concordv1.VoiceRegion) {
		vr.Spec.ICE = &concordv1.VoiceICE{Servers: []string{"turn:t.example:3478"},
			SharedSecret: &concordv1.SecretKeyReference{Name: "missing", Key: "secret"}}
	})
	g.Eventually(func(g Gomega) {
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(vr), vr)).To(Succeed())
		g.Expect(meta.IsStatusConditionTrue(vr.Status.Conditions, concordv1.ConditionDegraded)).To(BeTrue())
	}, specWait, poll).Should(Succeed())

	// The running server's load changes; the status follows it.
	mem.SetVoiceLoad(ns, pod.Name, fleet.VoiceLoad{ActiveCalls: 4, Participants: 17})
	g.Eventually(func(g Gomega) {
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(vr), vr)).To(Succeed())
		g.Expect(meta.IsStatusConditionTrue(vr.Status.Conditions, concordv1.ConditionDegraded)).To(BeTrue())
		g.Expect(vr.Status.ServerLoads).To(HaveLen(1))
		g.Expect(vr.Status.ServerLoads[0].Calls).To(Equal(int64(4)))
		g.Expect(vr.Status.ServerLoads[0].Participants).To(Equal(int64(17)))
		g.Expect(vr.Status.ActiveCalls).To(Equal(int64(4)))
	}, specWait, poll).Should(Succeed())
}
