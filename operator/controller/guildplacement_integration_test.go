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
	"sigs.k8s.io/controller-runtime/pkg/client"

	concordv1 "github.com/concord-chat/concord/apis/v1alpha1"
)

func TestGuildPlacementPlaceAndRelease(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	newCluster(t, ns, "prod")
	reg := mem.RegistryFor(ns, "prod")
	const guild = "80351110224678912"
	reg.SetGuildOwner(guild, "prod-guild-1") // on the ring today

	gp := &concordv1.GuildPlacement{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "big-guild"},
		Spec: concordv1.GuildPlacementSpec{
			ClusterRef: concordv1.ClusterReference{Name: "prod"},
			GuildID:    guild,
			PodPlacement: concordv1.PodPlacement{
				NodeSelector: map[string]string{"concord.dev/pool": "dedicated"},
				Tolerations:  []corev1.Toleration{{Key: "concord.dev/dedicated", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
			},
			MoveTimeout: &metav1.Duration{Duration: time.Minute},
		},
	}
	g.Expect(k8s.Create(ctx, gp)).To(Succeed())
	podName := "prod-guild-" + guild
	labels := map[string]string{concordv1.LabelOwner: "big-guild", concordv1.LabelGuild: guild}

	// Pending: the dedicated pod exists on the dedicated pool.
	g.Eventually(func(g Gomega) {
		var p corev1.Pod
		g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: podName}, &p)).To(Succeed())
		g.Expect(p.Spec.NodeSelector).To(HaveKeyWithValue("concord.dev/pool", "dedicated"))
		g.Expect(p.Spec.Tolerations).To(ContainElement(gp.Spec.Tolerations[0]))
		g.Expect(p.Spec.Containers[0].Args).To(Equal([]string{"serve", "--roles=guild"}))
		g.Expect(envValue(p.Spec, "CONCORD_GUILD_DEDICATED")).To(Equal(guild))
		g.Expect(envValue(p.Spec, "CONCORD_ADMIN")).To(Equal("0.0.0.0:9090"))
		g.Expect(p.Spec.Containers[0].Ports).To(ContainElement(HaveField("Name", "admin")))
		g.Expect(metav1.IsControlledBy(&p, gp)).To(BeTrue())
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(gp), gp)).To(Succeed())
		g.Expect(gp.Status.Phase).To(Equal(concordv1.PlacementPending))
		g.Expect(gp.Status.ObservedGeneration).To(Equal(gp.Generation))
		g.Expect(gp.Finalizers).To(ContainElement(concordv1.Finalizer))
	}, timeout, poll).Should(Succeed())
	_, pinned := reg.Pin(guild)
	g.Expect(pinned).To(BeFalse(), "no pin before the dedicated node is ready")

	// Moving: the node is ready, the pin is written; the old owner still runs it.
	g.Eventually(func(g Gomega) {
		markPodsReady(g, ns, labels)
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(gp), gp)).To(Succeed())
		g.Expect(gp.Status.Phase).To(Equal(concordv1.PlacementMoving))
		node, ok := reg.Pin(guild)
		g.Expect(ok).To(BeTrue())
		g.Expect(node).To(Equal(podName))
		st, _ := conditionStatus(gp.Status.Conditions, concordv1.ConditionProgressing)
		g.Expect(st).To(Equal(metav1.ConditionTrue))
	}, timeout, poll).Should(Succeed())

	// Placed once the runtime reports the dedicated node as the owner.
	reg.SetGuildOwner(guild, podName)
	g.Eventually(func(g Gomega) {
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(gp), gp)).To(Succeed())
		g.Expect(gp.Status.Phase).To(Equal(concordv1.PlacementPlaced))
		g.Expect(gp.Status.Owner).To(Equal(podName))
		st, gen := conditionStatus(gp.Status.Conditions, concordv1.ConditionReady)
		g.Expect(st).To(Equal(metav1.ConditionTrue))
		g.Expect(gen).To(Equal(gp.Generation))
	}, timeout, poll).Should(Succeed())

	// Release: the pin goes, the placement waits for the guild to leave.
	g.Expect(k8s.Delete(ctx, gp)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(gp), gp)).To(Succeed())
		g.Expect(gp.Status.Phase).To(Equal(concordv1.PlacementReleasing))
		_, ok := reg.Pin(guild)
		g.Expect(ok).To(BeFalse())
	}, timeout, poll).Should(Succeed())
	g.Consistently(func(g Gomega) {
		g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: podName}, &corev1.Pod{})).To(Succeed())
	}, 500*time.Millisecond, poll).Should(Succeed(), "the dedicated node stays while the guild still runs there")

	reg.SetGuildOwner(guild, "prod-guild-1") // flushed and back on the ring
	g.Eventually(func(g Gomega) {
		err := k8s.Get(ctx, client.ObjectKeyFromObject(gp), &concordv1.GuildPlacement{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "got %v", err)
		err = k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: podName}, &corev1.Pod{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "got %v", err)
	}, timeout, poll).Should(Succeed())
}
