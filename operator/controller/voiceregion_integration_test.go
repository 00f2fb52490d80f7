//go:build integration

package controller

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	concordv1 "github.com/concord-chat/concord/apis/v1alpha1"
	"github.com/concord-chat/concord/operator/fleet"
)

func TestVoiceRegionBufferAndDrain(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	newCluster(t, ns, "prod")
	reg := mem.RegistryFor(ns, "prod")
	vr := &concordv1.VoiceRegion{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "eu"},
		Spec: concordv1.VoiceRegionSpec{
			ClusterRef: concordv1.ClusterReference{Name: "prod"}, Region: "eu-west",
			MinServers: 1, MaxServers: 5, Buffer: intstr.FromInt32(1), CapacityPerServer: 100,
		},
	}
	g.Expect(k8s.Create(ctx, vr)).To(Succeed())
	labels := map[string]string{concordv1.LabelOwner: "eu", concordv1.LabelRole: concordv1.RoleVoice}

	// Idle: ceil(0/100) + 1 buffer = 1 server.
	var first string
	g.Eventually(func(g Gomega) {
		g.Expect(markPodsReady(g, ns, labels)).To(Equal(1))
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(vr), vr)).To(Succeed())
		g.Expect(vr.Status.ReadyServers).To(Equal(int32(1)))
		g.Expect(vr.Status.ObservedGeneration).To(Equal(vr.Generation))
		pods := listPods(g, ns, labels)
		p := pods[0]
		ct := p.Spec.Containers[0]
		g.Expect(ct.Args).To(Equal([]string{"serve", "--roles=voice"}))
		g.Expect(envValue(p.Spec, "CONCORD_VOICE_REGION")).To(Equal("eu-west"))
		g.Expect(envValue(p.Spec, "CONCORD_VOICE_LISTEN")).To(Equal("0.0.0.0:8443"))
		g.Expect(envValue(p.Spec, "CONCORD_VOICE_UDP")).To(Equal("0.0.0.0:50000"))
		g.Expect(envValue(p.Spec, "CONCORD_VOICE_WEBRTC_UDP")).To(Equal("0.0.0.0:50001"))
		// NodeExternalIP (the default): the node's address is advertised and
		// the voice ports are hostPorts on it.
		g.Expect(envValue(p.Spec, "CONCORD_VOICE_PUBLIC_IP")).To(Equal("$(CONCORD_HOST_IP)"))
		g.Expect(envValue(p.Spec, "CONCORD_VOICE_PUBLIC_HOST")).To(Equal("$(CONCORD_HOST_IP)"))
		hostIP := slices.IndexFunc(ct.Env, func(e corev1.EnvVar) bool { return e.Name == "CONCORD_HOST_IP" })
		publicIP := slices.IndexFunc(ct.Env, func(e corev1.EnvVar) bool { return e.Name == "CONCORD_VOICE_PUBLIC_IP" })
		g.Expect(hostIP).To(BeNumerically(">=", 0))
		g.Expect(hostIP).To(BeNumerically("<", publicIP), "dependent env expansion needs CONCORD_HOST_IP first")
		g.Expect(ct.Env[hostIP].ValueFrom.FieldRef.FieldPath).To(Equal("status.hostIP"))
		g.Expect(ct.Ports).To(ContainElements(
			corev1.ContainerPort{Name: "signal", ContainerPort: 8443, HostPort: 8443, Protocol: corev1.ProtocolTCP},
			corev1.ContainerPort{Name: "media", ContainerPort: 50000, HostPort: 50000, Protocol: corev1.ProtocolUDP},
			corev1.ContainerPort{Name: "webrtc", ContainerPort: 50001, HostPort: 50001, Protocol: corev1.ProtocolUDP},
		))
		g.Expect(ct.ReadinessProbe.HTTPGet.Path).To(Equal("/readyz"))
		g.Expect(ct.ReadinessProbe.HTTPGet.Port.StrVal).To(Equal("admin"))
		first = p.Name
	}, timeout, poll).Should(Succeed())

	// 150 participants in 3 calls: ceil(150/100) + 1 = 3 servers.
	mem.SetVoiceLoad(ns, first, fleet.VoiceLoad{ActiveCalls: 3, Participants: 150, Endpoint: "203.0.113.9:8443",
		LossRatio: 0.034, Jitter: 3240 * time.Microsecond, RTT: 45 * time.Millisecond, At: time.Now()})
	g.Eventually(func(g Gomega) {
		g.Expect(markPodsReady(g, ns, labels)).To(Equal(3))
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(vr), vr)).To(Succeed())
		g.Expect(vr.Status.DesiredServers).To(Equal(int32(3)))
		g.Expect(vr.Status.ReadyServers).To(Equal(int32(3)))
		g.Expect(vr.Status.ActiveCalls).To(Equal(int64(3)))
		g.Expect(vr.Status.Participants).To(Equal(int64(150)))
		g.Expect(vr.Status.Capacity).To(Equal(int64(300)))
		g.Expect(vr.Status.CapacityUsed).To(Equal("50%"))
		// Per-server load, as the SFU reported it.
		g.Expect(vr.Status.ServerLoads).To(HaveLen(3))
		g.Expect(vr.Status.ServerLoads).To(ContainElement(concordv1.VoiceServerStatus{
			Name: first, Endpoint: "203.0.113.9:8443", Ready: true, Reporting: true, Calls: 3, Participants: 150, Load: "150%",
			PacketLoss: "3.4%", Jitter: "3.2ms", RTT: "45ms",
		}))
	}, timeout, poll).Should(Succeed())

	// Calls spread: every server busy, then load falls to 20 participants on
	// the busiest server while one call lingers on another: desired = 2.
	// The idle server is deleted; the lingering call's server... is kept because
	// with 2 desired only one must go: the one with the fewest participants.
	pods := listPods(NewWithT(t), ns, labels)
	var others []string
	for _, p := range pods {
		if p.Name != first {
			others = append(others, p.Name)
		}
	}
	mem.SetVoiceLoad(ns, first, fleet.VoiceLoad{ActiveCalls: 1, Participants: 20})
	mem.SetVoiceLoad(ns, others[0], fleet.VoiceLoad{ActiveCalls: 1, Participants: 2})
	mem.SetVoiceLoad(ns, others[1], fleet.VoiceLoad{ActiveCalls: 1, Participants: 60})
	// 82 participants: ceil(82/100) + 1 = 2 servers; others[0] has the
	// fewest participants but an active call, so it drains instead of dying.
	g.Eventually(func(g Gomega) {
		var p corev1.Pod
		g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: others[0]}, &p)).To(Succeed())
		g.Expect(p.Annotations).To(HaveKey(concordv1.AnnotationDraining))
		g.Expect(reg.IsDraining(concordv1.RoleVoice, others[0])).To(BeTrue())
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(vr), vr)).To(Succeed())
		g.Expect(vr.Status.DrainingServers).To(Equal(int32(1)))
		g.Expect(vr.Status.Servers).To(Equal(int32(3)))
		g.Expect(vr.Status.Capacity).To(Equal(int64(200)))
	}, timeout, poll).Should(Succeed())
	g.Consistently(func(g Gomega) {
		var p corev1.Pod
		g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: others[0]}, &p)).To(Succeed())
		g.Expect(p.DeletionTimestamp).To(BeNil(), "a server with an active call is never killed")
	}, 600*time.Millisecond, poll).Should(Succeed())

	// The call ends: the drained server goes and its mark is cleared.
	mem.SetVoiceLoad(ns, others[0], fleet.VoiceLoad{})
	g.Eventually(func(g Gomega) {
		err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: others[0]}, &corev1.Pod{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "got %v", err)
		g.Expect(reg.IsDraining(concordv1.RoleVoice, others[0])).To(BeFalse())
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(vr), vr)).To(Succeed())
		g.Expect(vr.Status.Servers).To(Equal(int32(2)))
		g.Expect(vr.Status.DrainingServers).To(BeZero())
		st, _ := conditionStatus(vr.Status.Conditions, concordv1.ConditionReady)
		g.Expect(st).To(Equal(metav1.ConditionTrue))
	}, timeout, poll).Should(Succeed())
}

func TestVoiceRegionLoadBalancer(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	newCluster(t, ns, "prod")
	vr := &concordv1.VoiceRegion{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "lb"},
		Spec: concordv1.VoiceRegionSpec{ClusterRef: concordv1.ClusterReference{Name: "prod"}, Region: "us-east",
			MinServers: 2, MaxServers: 4, PublicAddress: concordv1.PublicAddressLoadBalancer,
			MediaPort: 40000, WebRTCPort: 40001},
	}
	g.Expect(k8s.Create(ctx, vr)).To(Succeed())
	labels := map[string]string{concordv1.LabelOwner: "lb", concordv1.LabelRole: concordv1.RoleVoice}

	// Services first; no pod before a Service has an address to advertise.
	var svcs corev1.ServiceList
	g.Eventually(func(g Gomega) {
		g.Expect(k8s.List(ctx, &svcs, client.InNamespace(ns), client.MatchingLabels(labels))).To(Succeed())
		g.Expect(svcs.Items).To(HaveLen(2))
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(vr), vr)).To(Succeed())
		g.Expect(vr.Status.Servers).To(Equal(int32(2)))
	}, timeout, poll).Should(Succeed())
	g.Consistently(func(g Gomega) {
		g.Expect(listPods(g, ns, labels)).To(BeEmpty())
	}, 600*time.Millisecond, poll).Should(Succeed())
	for i := range svcs.Items {
		svc := &svcs.Items[i]
		g.Expect(svc.Spec.Type).To(Equal(corev1.ServiceTypeLoadBalancer))
		g.Expect(svc.Spec.Ports).To(HaveLen(3)) // signal, media, webrtc
		g.Expect(svc.Spec.Selector).To(HaveKeyWithValue(concordv1.LabelPod, svc.Name))
		g.Expect(metav1.IsControlledBy(svc, vr)).To(BeTrue())
		// The cloud's load balancer controller assigns the address.
		svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: fmt.Sprintf("198.51.100.%d", i+1)}}
		g.Expect(k8s.Status().Update(ctx, svc)).To(Succeed())
	}
	g.Eventually(func(g Gomega) {
		pods := listPods(g, ns, labels)
		g.Expect(pods).To(HaveLen(2))
		ips := map[string]string{}
		for _, s := range svcs.Items {
			ips[s.Name] = s.Status.LoadBalancer.Ingress[0].IP
		}
		for _, p := range pods {
			g.Expect(ips).To(HaveKey(p.Name))
			g.Expect(p.Labels).To(HaveKeyWithValue(concordv1.LabelPod, p.Name))
			g.Expect(envValue(p.Spec, "CONCORD_VOICE_PUBLIC_IP")).To(Equal(ips[p.Name]))
			g.Expect(envValue(p.Spec, "CONCORD_VOICE_UDP")).To(Equal("0.0.0.0:40000"))
			for _, cp := range p.Spec.Containers[0].Ports {
				g.Expect(cp.HostPort).To(BeZero(), "no hostPorts behind a LoadBalancer")
			}
		}
	}, timeout, poll).Should(Succeed())

	// Scale-down deletes an idle server's Service with its pod.
	vr.Spec.MinServers, vr.Spec.MaxServers = 1, 1
	g.Eventually(func(g Gomega) {
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(vr), vr)).To(Succeed())
		vr.Spec.MinServers, vr.Spec.MaxServers = 1, 1
		g.Expect(k8s.Update(ctx, vr)).To(Succeed())
	}, timeout, poll).Should(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(listPods(g, ns, labels)).To(HaveLen(1))
		var list corev1.ServiceList
		g.Expect(k8s.List(ctx, &list, client.InNamespace(ns), client.MatchingLabels(labels))).To(Succeed())
		live := 0
		for _, s := range list.Items {
			if s.DeletionTimestamp.IsZero() {
				live++
			}
		}
		g.Expect(live).To(Equal(1))
	}, timeout, poll).Should(Succeed())
}

// TestVoiceRegionUnknownLoadIsNeverKilled: a ready SFU whose load report is
// missing or stale may have calls, so scale-down drains it instead of
// deleting it, and deletes it only once it reports no calls.
func TestVoiceRegionUnknownLoadIsNeverKilled(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	newCluster(t, ns, "prod")
	vr := &concordv1.VoiceRegion{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ap"},
		Spec: concordv1.VoiceRegionSpec{ClusterRef: concordv1.ClusterReference{Name: "prod"}, Region: "ap-south",
			MinServers: 2, MaxServers: 2, CapacityPerServer: 100},
	}
	g.Expect(k8s.Create(ctx, vr)).To(Succeed())
	labels := map[string]string{concordv1.LabelOwner: "ap", concordv1.LabelRole: concordv1.RoleVoice}
	var names []string
	g.Eventually(func(g Gomega) {
		g.Expect(markPodsReady(g, ns, labels)).To(Equal(2))
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(vr), vr)).To(Succeed())
		g.Expect(vr.Status.ReadyServers).To(Equal(int32(2)))
		names = nil
		for _, p := range listPods(g, ns, labels) {
			names = append(names, p.Name)
		}
	}, timeout, poll).Should(Succeed())
	stale := fmt.Errorf("load of voice server is 30s old")
	for _, n := range names {
		mem.SetVoiceLoadError(ns, n, stale)
	}
	g.Eventually(func(g Gomega) {
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(vr), vr)).To(Succeed())
		vr.Spec.MinServers, vr.Spec.MaxServers = 1, 1
		g.Expect(k8s.Update(ctx, vr)).To(Succeed())
	}, timeout, poll).Should(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(vr), vr)).To(Succeed())
		g.Expect(vr.Status.DrainingServers).To(Equal(int32(1)))
		for _, s := range vr.Status.ServerLoads {
			g.Expect(s.Reporting).To(BeFalse())
		}
	}, timeout, poll).Should(Succeed())
	g.Consistently(func(g Gomega) {
		g.Expect(listPods(g, ns, labels)).To(HaveLen(2), "a server of unknown load is never deleted")
	}, 600*time.Millisecond, poll).Should(Succeed())

	// Reports resume with no calls: the drained server goes.
	for _, n := range names {
		mem.SetVoiceLoadError(ns, n, nil)
	}
	g.Eventually(func(g Gomega) {
		g.Expect(listPods(g, ns, labels)).To(HaveLen(1))
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(vr), vr)).To(Succeed())
		g.Expect(vr.Status.DrainingServers).To(BeZero())
		g.Expect(vr.Status.ServerLoads).To(HaveLen(1))
		g.Expect(vr.Status.ServerLoads[0].Reporting).To(BeTrue())
	}, timeout, poll).Should(Succeed())
}

// TestVoiceRegionICESettings: a region's ICE/TURN annotations reach its
// SFU pods as the CONCORD_VOICE_ICE_* environment the voice role reads —
// the servers and TTL as values, the credentials only as references to
// the named Secret's keys — and a region with a malformed setting makes
// no pod and says why in its Degraded condition.
func TestVoiceRegionICESettings(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	newCluster(t, ns, "prod")
	vr := &concordv1.VoiceRegion{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "turn", Annotations: map[string]string{
			AnnotationICEServers:       "turn:turn.example:3478?transport=udp, stun:turn.example:3478",
			AnnotationICESecret:        "coturn",
			AnnotationICECredentialTTL: "90m",
		}},
		Spec: concordv1.VoiceRegionSpec{ClusterRef: concordv1.ClusterReference{Name: "prod"}, Region: "eu-west", MinServers: 1, MaxServers: 2},
	}
	g.Expect(k8s.Create(ctx, vr)).To(Succeed())
	labels := map[string]string{concordv1.LabelOwner: "turn", concordv1.LabelRole: concordv1.RoleVoice}
	g.Eventually(func(g Gomega) {
		pods := listPods(g, ns, labels)
		g.Expect(pods).NotTo(BeEmpty())
		spec := pods[0].Spec
		g.Expect(envValue(spec, "CONCORD_VOICE_ICE_SERVERS")).To(Equal("turn:turn.example:3478?transport=udp,stun:turn.example:3478"))
		g.Expect(envValue(spec, "CONCORD_VOICE_ICE_CREDENTIAL_TTL")).To(Equal("90m"))
		for name, key := range map[string]string{"CONCORD_VOICE_ICE_USERNAME": "username", "CONCORD_VOICE_ICE_CREDENTIAL": "credential", "CONCORD_VOICE_ICE_SECRET": "secret"} {
			i := slices.IndexFunc(spec.Containers[0].Env, func(e corev1.EnvVar) bool { return e.Name == name })
			g.Expect(i).To(BeNumerically(">=", 0), name)
			e := spec.Containers[0].Env[i]
			g.Expect(e.Value).To(BeEmpty(), "%s carries a credential in the pod spec", name)
			g.Expect(e.ValueFrom).NotTo(BeNil(), name)
			g.Expect(e.ValueFrom.SecretKeyRef).NotTo(BeNil(), name)
			g.Expect(e.ValueFrom.SecretKeyRef.Name).To(Equal("coturn"))
			g.Expect(e.ValueFrom.SecretKeyRef.Key).To(Equal(key))
			g.Expect(*e.ValueFrom.SecretKeyRef.Optional).To(BeTrue())
		}
	}, 30*time.Second, 100*time.Millisecond).Should(Succeed())

	bad := &concordv1.VoiceRegion{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bad", Annotations: map[string]string{AnnotationICEServers: "http://turn.example"}},
		Spec:       concordv1.VoiceRegionSpec{ClusterRef: concordv1.ClusterReference{Name: "prod"}, Region: "us-east", MinServers: 1, MaxServers: 2},
	}
	g.Expect(k8s.Create(ctx, bad)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(bad), bad)).To(Succeed())
		c := meta.FindStatusCondition(bad.Status.Conditions, concordv1.ConditionDegraded)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
		g.Expect(c.Reason).To(Equal("InvalidICESettings"))
		g.Expect(c.Message).To(ContainSubstring(AnnotationICEServers))
	}, 30*time.Second, 100*time.Millisecond).Should(Succeed())
	g.Expect(listPods(g, ns, map[string]string{concordv1.LabelOwner: "bad", concordv1.LabelRole: concordv1.RoleVoice})).To(BeEmpty())
}
