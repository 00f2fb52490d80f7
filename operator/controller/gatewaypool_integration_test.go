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

func newPool(t *testing.T, ns, name string, replicas int32, drainTimeout time.Duration) *concordv1.GatewayPool {
	t.Helper()
	p := &concordv1.GatewayPool{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: concordv1.GatewayPoolSpec{
			ClusterRef: concordv1.ClusterReference{Name: "prod"},
			Replicas:   &replicas,
			Drain:      concordv1.DrainPolicy{Timeout: &metav1.Duration{Duration: drainTimeout}, BatchSize: 1},
		},
	}
	if err := k8s.Create(context.Background(), p); err != nil {
		t.Fatalf("create GatewayPool: %v", err)
	}
	return p
}

func poolLabels(name string) map[string]string {
	return map[string]string{concordv1.LabelOwner: name, concordv1.LabelRole: concordv1.RoleGateway}
}

func setReplicas(g *WithT, pool *concordv1.GatewayPool, n int32) {
	g.Eventually(func() error {
		if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(pool), pool); err != nil {
			return err
		}
		pool.Spec.Replicas = &n
		return k8s.Update(context.Background(), pool)
	}, timeout, poll).Should(Succeed())
}

func TestGatewayPoolScaleAndDrain(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	newCluster(t, ns, "prod")
	pool := newPool(t, ns, "users", 3, time.Hour)
	labels := poolLabels("users")

	// Scale up: three pods with the serving readiness gate, turned on.
	g.Eventually(func(g Gomega) {
		g.Expect(markPodsReady(g, ns, labels)).To(Equal(3))
		for _, p := range listPods(g, ns, labels) {
			g.Expect(p.Spec.ReadinessGates).To(ContainElement(corev1.PodReadinessGate{ConditionType: concordv1.ReadinessGateServing}))
			g.Expect(podCondition(&p, concordv1.ReadinessGateServing)).To(Equal(corev1.ConditionTrue))
			g.Expect(metav1.IsControlledBy(&p, pool)).To(BeTrue())
		}
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(pool), pool)).To(Succeed())
		g.Expect(pool.Status.ReadyReplicas).To(Equal(int32(3)))
		g.Expect(pool.Status.ObservedGeneration).To(Equal(pool.Generation))
		st, _ := conditionStatus(pool.Status.Conditions, concordv1.ConditionReady)
		g.Expect(st).To(Equal(metav1.ConditionTrue))
		st, _ = conditionStatus(pool.Status.Conditions, concordv1.ConditionProgressing)
		g.Expect(st).To(Equal(metav1.ConditionFalse))
	}, timeout, poll).Should(Succeed())

	// Sessions: the pod with the fewest sessions is the cheapest to drain;
	// the ready pod with the fewest others receives them.
	pods := listPods(NewWithT(t), ns, labels)
	sessions := []int64{900, 5, 400}
	for i, p := range pods {
		mem.SetSessions(ns, p.Name, sessions[i])
	}
	victim, successor := pods[1].Name, pods[2].Name
	reg := mem.RegistryFor(ns, "prod")

	setReplicas(g, pool, 2)
	g.Eventually(func(g Gomega) {
		var p corev1.Pod
		g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: victim}, &p)).To(Succeed())
		g.Expect(p.Annotations).To(HaveKey(concordv1.AnnotationDraining))
		g.Expect(p.Annotations[concordv1.AnnotationDrainSuccessor]).To(Equal(successor))
		g.Expect(podCondition(&p, concordv1.ReadinessGateServing)).To(Equal(corev1.ConditionFalse))
		g.Expect(reg.IsDraining(concordv1.RoleGateway, victim)).To(BeTrue())
		reqs := mem.DrainRequests(ns, victim)
		g.Expect(reqs).To(HaveLen(1))
		g.Expect(reqs[0].Successor).To(Equal(successor))
		g.Expect(reqs[0].ReconnectJitter).To(Equal(10 * time.Second))
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(pool), pool)).To(Succeed())
		g.Expect(pool.Status.DrainingPods).To(Equal(int32(1)))
		g.Expect(pool.Status.DrainingSessions).To(Equal(int64(5)))
		g.Expect(pool.Status.Replicas).To(Equal(int32(2)))
	}, timeout, poll).Should(Succeed())

	// While sessions remain the pod stays (the drain timeout is an hour).
	g.Consistently(func(g Gomega) {
		var p corev1.Pod
		g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: victim}, &p)).To(Succeed())
		g.Expect(p.DeletionTimestamp).To(BeNil())
	}, 500*time.Millisecond, poll).Should(Succeed())

	// The gateway handed everything over: the pod goes, the mark is cleared.
	mem.SetSessions(ns, victim, 0)
	g.Eventually(func(g Gomega) {
		err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: victim}, &corev1.Pod{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "got %v", err)
		g.Expect(reg.IsDraining(concordv1.RoleGateway, victim)).To(BeFalse())
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(pool), pool)).To(Succeed())
		g.Expect(pool.Status.DrainingPods).To(BeZero())
		g.Expect(pool.Status.DrainingSessions).To(BeZero())
		g.Expect(listPods(g, ns, labels)).To(HaveLen(2))
	}, timeout, poll).Should(Succeed())

	// A drain asked for by hand (kubectl concord gateway drain): the pod
	// drains at once and a replacement keeps the pool at two.
	manual := listPods(NewWithT(t), ns, labels)[0].Name
	mem.SetSessions(ns, manual, 12)
	g.Eventually(func() error {
		var p corev1.Pod
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: manual}, &p); err != nil {
			return err
		}
		patch := client.MergeFrom(p.DeepCopy())
		p.Annotations = map[string]string{concordv1.AnnotationDrainRequested: "test"}
		return k8s.Patch(ctx, &p, patch)
	}, timeout, poll).Should(Succeed())
	g.Eventually(func(g Gomega) {
		var p corev1.Pod
		g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: manual}, &p)).To(Succeed())
		g.Expect(p.Annotations).To(HaveKey(concordv1.AnnotationDraining))
		g.Expect(mem.DrainRequests(ns, manual)).To(HaveLen(1))
		g.Expect(listPods(g, ns, labels)).To(HaveLen(3)) // two serving + the draining one
	}, timeout, poll).Should(Succeed())
	mem.SetSessions(ns, manual, 0)
	g.Eventually(func(g Gomega) {
		markPodsReady(g, ns, labels)
		g.Expect(listPods(g, ns, labels)).To(HaveLen(2))
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(pool), pool)).To(Succeed())
		g.Expect(pool.Status.ReadyReplicas).To(Equal(int32(2)))
		g.Expect(pool.Status.DrainingPods).To(BeZero())
	}, timeout, poll).Should(Succeed())

	// Deletion: the finalizer clears registry marks, then the pool goes.
	g.Expect(k8s.Delete(ctx, pool)).To(Succeed())
	g.Eventually(func(g Gomega) {
		err := k8s.Get(ctx, client.ObjectKeyFromObject(pool), &concordv1.GatewayPool{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "got %v", err)
	}, timeout, poll).Should(Succeed())
}

func TestGatewayPoolDrainTimeout(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	newCluster(t, ns, "prod")
	pool := newPool(t, ns, "bots", 2, time.Second)
	labels := poolLabels("bots")
	g.Eventually(func(g Gomega) {
		g.Expect(markPodsReady(g, ns, labels)).To(Equal(2))
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(pool), pool)).To(Succeed())
		g.Expect(pool.Status.ReadyReplicas).To(Equal(int32(2)))
	}, timeout, poll).Should(Succeed())
	for _, p := range listPods(NewWithT(t), ns, labels) {
		mem.SetSessions(ns, p.Name, 70) // never drains
	}
	setReplicas(g, pool, 1)
	// Deleted after the timeout although sessions remained; Degraded says so.
	g.Eventually(func(g Gomega) {
		g.Expect(listPods(g, ns, labels)).To(HaveLen(1))
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(pool), pool)).To(Succeed())
		c := findCondition(pool.Status.Conditions, concordv1.ConditionDegraded)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Reason).To(Equal("DrainTimeout"))
		g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
	}, timeout, poll).Should(Succeed())
}

func TestGatewayPoolRollout(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	newCluster(t, ns, "prod")
	pool := newPool(t, ns, "live", 2, time.Hour)
	labels := poolLabels("live")
	var oldRev string
	var oldPods []string
	g.Eventually(func(g Gomega) {
		g.Expect(markPodsReady(g, ns, labels)).To(Equal(2))
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(pool), pool)).To(Succeed())
		g.Expect(pool.Status.UpdatedReplicas).To(Equal(int32(2)))
		g.Expect(pool.Status.ReadyReplicas).To(Equal(int32(2)))
		oldRev = pool.Status.CurrentRevision
	}, timeout, poll).Should(Succeed())
	for _, p := range listPods(NewWithT(t), ns, labels) {
		oldPods = append(oldPods, p.Name)
	}

	// A template change rolls the pool: surge one, drain one, never below
	// two ready serving pods; each old pod leaves through a drain.
	g.Eventually(func() error {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(pool), pool); err != nil {
			return err
		}
		pool.Spec.SessionsPerPod = 20000
		return k8s.Update(ctx, pool)
	}, timeout, poll).Should(Succeed())
	g.Eventually(func(g Gomega) {
		markPodsReady(g, ns, labels)
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(pool), pool)).To(Succeed())
		g.Expect(pool.Status.CurrentRevision).NotTo(Equal(oldRev))
		g.Expect(pool.Status.ReadyReplicas).To(BeNumerically(">=", 2), "never below the desired ready pods")
		g.Expect(pool.Status.UpdatedReplicas).To(Equal(int32(2)))
		g.Expect(pool.Status.DrainingPods).To(BeZero())
		pods := listPods(g, ns, labels)
		g.Expect(pods).To(HaveLen(2))
		for _, p := range pods {
			g.Expect(p.Labels[concordv1.LabelRevision]).To(Equal(pool.Status.CurrentRevision))
			g.Expect(envValue(p.Spec, "CONCORD_GATEWAY_SESSIONS_TARGET")).To(Equal("20000"))
			g.Expect(envValue(p.Spec, "CONCORD_ADMIN")).NotTo(BeEmpty())
			g.Expect(p.Spec.Containers[0].Ports).To(ContainElement(HaveField("Name", "admin")))
		}
	}, timeout, poll).Should(Succeed())
	for _, name := range oldPods {
		g.Expect(mem.DrainRequests(ns, name)).To(HaveLen(1), "old pod %s must leave through a drain", name)
	}
}
