//go:build integration

package controller

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	concordv1 "github.com/concord-chat/concord/apis/v1alpha1"
	"github.com/concord-chat/concord/operator/fleet"
)

func TestRelayTierScaling(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	newCluster(t, ns, "prod")
	reg := mem.RegistryFor(ns, "prod")
	const guild = "41771983423143937"
	mem.SetGuildStats(ns, "prod", []fleet.GuildSample{{GuildID: guild, Online: 40000}, {GuildID: "7", Online: 10}})

	tier := &concordv1.RelayTier{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "big"},
		Spec: concordv1.RelayTierSpec{
			ClusterRef: concordv1.ClusterReference{Name: "prod"}, GuildID: guild, MinRelays: 1, MaxRelays: 4,
		},
	}
	g.Expect(k8s.Create(ctx, tier)).To(Succeed())
	labels := map[string]string{concordv1.LabelOwner: "big", concordv1.LabelRole: concordv1.RoleRelay}

	// ceil(40000 / 15000) = 3 relays, published once ready.
	g.Eventually(func(g Gomega) {
		g.Expect(markPodsReady(g, ns, labels)).To(Equal(3))
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(tier), tier)).To(Succeed())
		g.Expect(tier.Status.Online).To(Equal(int64(40000)))
		g.Expect(tier.Status.DesiredRelays).To(Equal(int32(3)))
		g.Expect(tier.Status.ReadyRelays).To(Equal(int32(3)))
		g.Expect(tier.Status.ObservedGeneration).To(Equal(tier.Generation))
		g.Expect(reg.Relays(guild)).To(HaveLen(3))
		g.Expect(reg.Relays(guild)).To(Equal(tier.Status.Endpoints))
		st, _ := conditionStatus(tier.Status.Conditions, concordv1.ConditionReady)
		g.Expect(st).To(Equal(metav1.ConditionTrue))
	}, timeout, poll).Should(Succeed())
	g.Expect(reg.Relays("7")).To(BeEmpty())

	// Above the bound: max 4.
	mem.SetGuildStats(ns, "prod", []fleet.GuildSample{{GuildID: guild, Online: 200000}})
	g.Eventually(func(g Gomega) {
		markPodsReady(g, ns, labels)
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(tier), tier)).To(Succeed())
		g.Expect(tier.Status.DesiredRelays).To(Equal(int32(4)))
		g.Expect(listPods(g, ns, labels)).To(HaveLen(4))
		g.Expect(reg.Relays(guild)).To(HaveLen(4))
	}, timeout, poll).Should(Succeed())

	// Quiet guild: down to minRelays, endpoints withdrawn before pods go.
	mem.SetGuildStats(ns, "prod", []fleet.GuildSample{{GuildID: guild, Online: 100}})
	g.Eventually(func(g Gomega) {
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(tier), tier)).To(Succeed())
		g.Expect(tier.Status.DesiredRelays).To(Equal(int32(1)))
		g.Expect(listPods(g, ns, labels)).To(HaveLen(1))
		g.Expect(reg.Relays(guild)).To(HaveLen(1))
	}, timeout, poll).Should(Succeed())

	// Deletion withdraws the relays from the registry.
	g.Expect(k8s.Delete(ctx, tier)).To(Succeed())
	g.Eventually(func(g Gomega) {
		err := k8s.Get(ctx, client.ObjectKeyFromObject(tier), &concordv1.RelayTier{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "got %v", err)
		g.Expect(reg.Relays(guild)).To(BeEmpty())
	}, timeout, poll).Should(Succeed())
}

func TestRelayTierSelector(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	newCluster(t, ns, "prod")
	reg := mem.RegistryFor(ns, "prod")
	mem.SetGuildStats(ns, "prod", []fleet.GuildSample{
		{GuildID: "1", Online: 20000}, {GuildID: "2", Online: 16000}, {GuildID: "3", Online: 50},
	})
	tier := &concordv1.RelayTier{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "shared"},
		Spec: concordv1.RelayTierSpec{
			ClusterRef:    concordv1.ClusterReference{Name: "prod"},
			GuildSelector: &concordv1.GuildSelector{MinOnline: 15000},
			MinRelays:     1, MaxRelays: 10,
		},
	}
	g.Expect(k8s.Create(ctx, tier)).To(Succeed())
	labels := map[string]string{concordv1.LabelOwner: "shared", concordv1.LabelRole: concordv1.RoleRelay}
	g.Eventually(func(g Gomega) {
		markPodsReady(g, ns, labels)
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(tier), tier)).To(Succeed())
		g.Expect(tier.Status.Guilds).To(Equal([]string{"1", "2"}))
		g.Expect(tier.Status.DesiredRelays).To(Equal(int32(3))) // ceil(36000 / 15000)
		g.Expect(reg.Relays("1")).To(HaveLen(3))
		g.Expect(reg.Relays("2")).To(HaveLen(3))
		g.Expect(reg.Relays("3")).To(BeEmpty())
	}, timeout, poll).Should(Succeed())
}
