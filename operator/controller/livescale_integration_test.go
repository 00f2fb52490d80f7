//go:build integration

package controller

import (
	"context"
	"errors"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	concordv1 "github.com/concord-chat/concord/apis/v1alpha1"
	"github.com/concord-chat/concord/operator/autoscale"
	"github.com/concord-chat/concord/operator/fleet"
)

// TestAutoscalerScalesLiveGateways runs the autoscaler as the operator
// (its cached client and recorder, with the generated RBAC) against the
// API server, feeding it the live gateways' viewers: the live-gateway
// Deployment grows in the round that sees a surge, holds through a drop
// and through a round without the signal, and shrinks once the viewers
// have stayed low for the window, marking the emptiest gateway pods to go
// first; status.liveGateway carries the viewers and the decision, and
// each decision is an Event on the ConcordCluster.
func TestAutoscalerScalesLiveGateways(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	c := newCluster(t, ns, "prod")
	key := types.NamespacedName{Namespace: ns, Name: "prod"}
	editCluster(g, key, c, func(c *concordv1.ConcordCluster) {
		c.Spec.Live = &concordv1.LiveSpec{}
		c.Spec.Autoscaling = &concordv1.AutoscalingPolicy{LiveGateway: &concordv1.LiveGatewayAutoscaling{
			MaxReplicas: 10, ScaleDownAfter: &metav1.Duration{Duration: 10 * time.Minute}}}
	})
	g.Expect(k8s.Get(ctx, key, c)).To(Succeed())
	// The CRD's defaults: 25,000 viewers per gateway, at least 2.
	pol := c.Spec.Autoscaling.LiveGateway
	g.Expect(pol.ViewersPerGateway).To(BeEquivalentTo(25_000))
	g.Expect(pol.MinReplicas).To(BeEquivalentTo(2))

	deployment := func(want int32) {
		t.Helper()
		g.Eventually(func(g Gomega) {
			var d appsv1.Deployment
			g.Expect(k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: "prod-live-gateway"}, &d)).To(Succeed())
			g.Expect(*d.Spec.Replicas).To(Equal(want))
		}, timeout, poll).Should(Succeed())
	}
	deployment(2)

	clk := clocktesting.NewFakePassiveClock(time.Now().Truncate(time.Second))
	a := &autoscale.Autoscaler{Client: opClient, Clock: clk, Recorder: opRecorder, Stats: mem, Viewers: mem}
	// round runs one autoscaler round once the operator's cache has seen
	// the previous one, and returns the status it wrote.
	var last metav1.Time
	round := func() *concordv1.LiveGatewayScaleStatus {
		t.Helper()
		g.Eventually(func(g Gomega) {
			var cached concordv1.ConcordCluster
			g.Expect(opClient.Get(ctx, key, &cached)).To(Succeed())
			g.Expect(cached.Spec.Live).NotTo(BeNil())
			if !last.IsZero() {
				g.Expect(cached.Status.LiveGateway).NotTo(BeNil())
				g.Expect(cached.Status.LiveGateway.ObservedAt.Equal(&last)).To(BeTrue())
				g.Expect(cached.Spec.Live.Gateway.Replicas).To(Equal(ptrTo(cached.Status.LiveGateway.Replicas)))
			}
		}, timeout, poll).Should(Succeed())
		g.Expect(a.Round(ctx)).To(Succeed())
		var got concordv1.ConcordCluster
		g.Expect(k8s.Get(ctx, key, &got)).To(Succeed())
		g.Expect(got.Status.LiveGateway).NotTo(BeNil())
		last = got.Status.LiveGateway.ObservedAt
		return got.Status.LiveGateway
	}
	viewers := func(per ...int64) {
		var gws []fleet.GatewayViewers
		for i, n := range per {
			gws = append(gws, fleet.GatewayViewers{Gateway: "prod-live-gateway-" + string(rune('a'+i)), Viewers: n, Streams: 3})
		}
		mem.SetLiveViewers(ns, "prod", gws)
	}

	// A surge: 120,000 viewers on two gateways need 5 at once.
	viewers(70_000, 50_000)
	st := round()
	g.Expect(st.Viewers).To(BeEquivalentTo(120_000))
	g.Expect(st.Gateways).To(BeEquivalentTo(2))
	g.Expect(st.BusiestGatewayViewers).To(BeEquivalentTo(70_000))
	g.Expect(st.RecommendedReplicas).To(BeEquivalentTo(5))
	g.Expect(st.Replicas).To(BeEquivalentTo(5))
	g.Expect(st.SignalOK).To(BeTrue())
	g.Expect(st.LastScaleTime).NotTo(BeNil())
	deployment(5)
	expectEvent(g, ns, "AutoscaleScaleLiveGateway", "live gateways 2 -> 5")

	// The audience leaves: nothing moves inside the window.
	viewers(6_000, 4_000)
	clk.SetTime(clk.Now().Add(time.Minute))
	st = round()
	g.Expect(st.Viewers).To(BeEquivalentTo(10_000))
	g.Expect(st.RecommendedReplicas).To(BeEquivalentTo(2))
	g.Expect(st.Replicas).To(BeEquivalentTo(5))
	g.Expect(st.Message).To(ContainSubstring("shrinking after"))

	// The directory cannot be read: the replicas stay, the status and a
	// Warning say so.
	mem.SetLiveViewersError(ns, "prod", errors.New("etcd: context deadline exceeded"))
	clk.SetTime(clk.Now().Add(time.Minute))
	st = round()
	g.Expect(st.SignalOK).To(BeFalse())
	g.Expect(st.Replicas).To(BeEquivalentTo(5))
	g.Expect(st.Message).To(ContainSubstring("deadline exceeded"))
	expectEvent(g, ns, "LiveViewersUnknown", "keeping 5 replicas")

	// The signal returns, still low: 10 minutes of readings later the role
	// shrinks to its minimum.
	mem.SetLiveViewersError(ns, "prod", nil)
	viewers(6_000, 4_000)
	clk.SetTime(clk.Now().Add(time.Minute))
	g.Expect(round().Replicas).To(BeEquivalentTo(5))
	clk.SetTime(clk.Now().Add(9 * time.Minute))
	g.Expect(round().Replicas).To(BeEquivalentTo(5))
	deployment(5)
	// Five gateway pods, two of them with viewers: before shrinking, each
	// pod's deletion cost becomes its viewers, so the ReplicaSet removes
	// the three empty ones and cuts nobody.
	for _, name := range []string{"a", "b", "c", "d", "e"} {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "prod-live-gateway-" + name, Labels: selectorLabels(c, concordv1.RoleLiveGateway)},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "concord", Image: "concord:test"}}},
		}
		g.Expect(k8s.Create(ctx, pod)).To(Succeed())
	}
	g.Eventually(func(g Gomega) {
		var pods corev1.PodList
		g.Expect(opClient.List(ctx, &pods, client.InNamespace(ns))).To(Succeed())
		g.Expect(pods.Items).To(HaveLen(5))
	}, timeout, poll).Should(Succeed())
	clk.SetTime(clk.Now().Add(time.Minute))
	st = round()
	g.Expect(st.Replicas).To(BeEquivalentTo(2))
	for name, cost := range map[string]string{"a": "6000", "b": "4000", "c": "0", "d": "0", "e": "0"} {
		var pod corev1.Pod
		g.Expect(k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: "prod-live-gateway-" + name}, &pod)).To(Succeed())
		g.Expect(pod.Annotations).To(HaveKeyWithValue(autoscale.AnnotationDeletionCost, cost), name)
	}
	g.Expect(st.SignalOK).To(BeTrue())
	deployment(2)
	expectEvent(g, ns, "AutoscaleScaleLiveGateway", "live gateways 5 -> 2")
}

// expectEvent waits for an Event on the ConcordCluster prod with reason
// and a note containing note.
func expectEvent(g *WithT, ns, reason, note string) {
	g.Eventually(func(g Gomega) {
		var evs eventsv1.EventList
		g.Expect(k8s.List(context.Background(), &evs, client.InNamespace(ns))).To(Succeed())
		var notes []string
		for _, e := range evs.Items {
			if e.Regarding.Kind == "ConcordCluster" && e.Regarding.Name == "prod" && e.Reason == reason {
				notes = append(notes, e.Note)
				if reason == "LiveViewersUnknown" {
					g.Expect(e.Type).To(Equal(corev1.EventTypeWarning))
				}
			}
		}
		g.Expect(notes).To(ContainElement(ContainSubstring(note)), "events %s", reason)
	}, timeout, poll).Should(Succeed())
}
