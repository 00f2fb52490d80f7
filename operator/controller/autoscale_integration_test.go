//go:build integration

package controller

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	concordv1 "github.com/concord-chat/concord/apis/v1alpha1"
	"github.com/concord-chat/concord/operator/autoscale"
	"github.com/concord-chat/concord/operator/fleet"
)

// TestAutoscalerPlacesHotGuild runs the autoscaler as the operator (its
// client and recorder carry the generated RBAC) against the API server: a
// guild whose event age stays high gets a GuildPlacement, which the
// GuildPlacement controller turns into a dedicated pod; the decision is a
// Kubernetes Event on the ConcordCluster.
func TestAutoscalerPlacesHotGuild(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	c := &concordv1.ConcordCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "prod"},
		Spec: concordv1.ConcordClusterSpec{
			Image:   "concord:test",
			Storage: concordv1.StorageSpec{ContactPoints: []string{"scylla:9042"}},
			Kafka:   concordv1.KafkaSpec{Brokers: []string{"kafka:9092"}},
			Redis:   concordv1.RedisSpec{Address: "redis:6379"},
			Etcd:    concordv1.EtcdSpec{Endpoints: []string{"http://etcd:2379"}},
			AutoPlacement: &concordv1.AutoPlacementPolicy{
				Enabled: true, EventAgeThreshold: &metav1.Duration{Duration: 250 * time.Millisecond},
				SustainFor: &metav1.Duration{Duration: 2 * time.Minute}, MaxDedicated: 3,
				DedicatedPool: concordv1.PodPlacement{NodeSelector: map[string]string{"concord.dev/pool": "dedicated"}},
			},
		},
	}
	g.Expect(k8s.Create(ctx, c)).To(Succeed())
	const guild = "175928847299117063"
	mem.SetGuildStats(ns, "prod", []fleet.GuildSample{{GuildID: guild, Node: "prod-guild-2",
		EventAgeP99: 700 * time.Millisecond, QueueLength: 9000, Online: 120000}})

	clk := clocktesting.NewFakePassiveClock(time.Now())
	a := &autoscale.Autoscaler{Client: opClient, Clock: clk, Recorder: opRecorder, Stats: mem}
	// The operator's client reads from its cache: wait until it sees the cluster.
	g.Eventually(func(g Gomega) {
		var list concordv1.ConcordClusterList
		g.Expect(opClient.List(ctx, &list, client.InNamespace(ns))).To(Succeed())
		g.Expect(list.Items).To(HaveLen(1))
	}, timeout, poll).Should(Succeed())
	g.Expect(a.Round(ctx)).To(Succeed())
	g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: autoscale.PlacementName(guild)}, &concordv1.GuildPlacement{})).
		NotTo(Succeed(), "no placement before SustainFor")

	clk.SetTime(clk.Now().Add(3 * time.Minute))
	g.Expect(a.Round(ctx)).To(Succeed())
	var gp concordv1.GuildPlacement
	g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: autoscale.PlacementName(guild)}, &gp)).To(Succeed())
	g.Expect(gp.Labels).To(HaveKeyWithValue(concordv1.LabelPlacedBy, concordv1.PlacedByAutoscaler))
	g.Expect(gp.Spec.NodeSelector).To(HaveKeyWithValue("concord.dev/pool", "dedicated"))

	// The placement controller takes over.
	g.Eventually(func(g Gomega) {
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(&gp), &gp)).To(Succeed())
		g.Expect(gp.Status.Phase).To(Equal(concordv1.PlacementPending))
		g.Expect(gp.Status.PodName).To(Equal("prod-guild-" + guild))
	}, timeout, poll).Should(Succeed())

	// The decision is an Event on the cluster.
	g.Eventually(func(g Gomega) {
		var evs eventsv1.EventList
		g.Expect(k8s.List(ctx, &evs, client.InNamespace(ns))).To(Succeed())
		found := false
		for _, e := range evs.Items {
			if e.Regarding.Kind == "ConcordCluster" && e.Regarding.Name == "prod" && e.Reason == "AutoscalePlace" {
				g.Expect(e.Note).To(ContainSubstring(guild))
				found = true
			}
		}
		g.Expect(found).To(BeTrue(), "no AutoscalePlace event among %d events", len(evs.Items))
	}, timeout, poll).Should(Succeed())
}
