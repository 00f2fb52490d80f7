//go:build integration

package controller

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
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
		g.Expect(envValue(pods[0].Spec, "CONCORD_VOICE_REGION")).To(Equal("eu-west"))
		g.Expect(envValue(pods[0].Spec, "CONCORD_VOICE_UDP_PORTS")).To(Equal("50000-50999"))
		first = pods[0].Name
	}, timeout, poll).Should(Succeed())

	// 150 participants in 3 calls: ceil(150/100) + 1 = 3 servers.
	mem.SetVoiceLoad(ns, first, fleet.VoiceLoad{ActiveCalls: 3, Participants: 150})
	g.Eventually(func(g Gomega) {
		g.Expect(markPodsReady(g, ns, labels)).To(Equal(3))
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(vr), vr)).To(Succeed())
		g.Expect(vr.Status.DesiredServers).To(Equal(int32(3)))
		g.Expect(vr.Status.ReadyServers).To(Equal(int32(3)))
		g.Expect(vr.Status.ActiveCalls).To(Equal(int64(3)))
		g.Expect(vr.Status.Participants).To(Equal(int64(150)))
		g.Expect(vr.Status.Capacity).To(Equal(int64(300)))
		g.Expect(vr.Status.CapacityUsed).To(Equal("50%"))
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
	wide := &concordv1.VoiceRegion{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "wide"},
		Spec: concordv1.VoiceRegionSpec{ClusterRef: concordv1.ClusterReference{Name: "prod"}, Region: "us-east",
			PublicAddress: concordv1.PublicAddressLoadBalancer, UDPPorts: &concordv1.PortRange{Min: 50000, Max: 50999}},
	}
	err := k8s.Create(ctx, wide)
	g.Expect(err).To(HaveOccurred())
	g.Expect(err.Error()).To(ContainSubstring("fewer than 100 ports"))

	vr := &concordv1.VoiceRegion{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "lb"},
		Spec: concordv1.VoiceRegionSpec{ClusterRef: concordv1.ClusterReference{Name: "prod"}, Region: "us-east",
			MinServers: 2, MaxServers: 4, PublicAddress: concordv1.PublicAddressLoadBalancer,
			UDPPorts: &concordv1.PortRange{Min: 40000, Max: 40009}},
	}
	g.Expect(k8s.Create(ctx, vr)).To(Succeed())
	labels := map[string]string{concordv1.LabelOwner: "lb", concordv1.LabelRole: concordv1.RoleVoice}
	g.Eventually(func(g Gomega) {
		pods := listPods(g, ns, labels)
		g.Expect(pods).To(HaveLen(2))
		for _, p := range pods {
			var svc corev1.Service
			g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: p.Name}, &svc)).To(Succeed())
			g.Expect(svc.Spec.Type).To(Equal(corev1.ServiceTypeLoadBalancer))
			g.Expect(svc.Spec.Ports).To(HaveLen(11)) // signal + 10 UDP ports
			g.Expect(svc.Spec.Selector).To(HaveKeyWithValue(concordv1.LabelPod, p.Name))
			g.Expect(p.Labels).To(HaveKeyWithValue(concordv1.LabelPod, p.Name))
			g.Expect(metav1.IsControlledBy(&svc, &p)).To(BeTrue())
			g.Expect(envValue(p.Spec, "CONCORD_VOICE_SERVICE")).To(Equal(p.Name))
		}
	}, timeout, poll).Should(Succeed())
}
