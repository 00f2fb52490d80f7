//go:build integration

package controller

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	concordv1 "github.com/concord-chat/concord/apis/v1alpha1"
)

// TestConcordClusterLive runs the live-comment roles from spec.live: one
// Deployment each with the backends its role needs, Services for the two
// HTTP roles and the relay nodes, the routers and gateways on the relay
// tree, status per role, and removal when spec.live goes.
func TestConcordClusterLive(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	c := newCluster(t, ns, "prod")
	key := types.NamespacedName{Namespace: ns, Name: "prod"}
	editCluster(g, key, c, func(c *concordv1.ConcordCluster) {
		c.Spec.Live = &concordv1.LiveSpec{Gateway: concordv1.RoleSpec{Replicas: ptrTo(int32(3))}, Prefix: "prod.live."}
	})
	// Roles left out get their default replicas (live-archiver and
	// live-moderation 1, the others 2).
	want := map[string]int32{"live-api": 2, "live-gateway": 3, "live-router": 2, "live-archiver": 1,
		"live-relay": 2, "live-moderation": 1}
	g.Eventually(func(g Gomega) {
		for role, replicas := range want {
			var d appsv1.Deployment
			g.Expect(k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: "prod-" + role}, &d)).To(Succeed())
			g.Expect(metav1.IsControlledBy(&d, c)).To(BeTrue())
			g.Expect(*d.Spec.Replicas).To(Equal(replicas), role)
			spec := d.Spec.Template.Spec
			ct := spec.Containers[0]
			g.Expect(ct.Args).To(Equal([]string{"serve", "--roles=" + role}))
			g.Expect(ct.ReadinessProbe.HTTPGet.Path).To(Equal("/readyz"))
			g.Expect(envValue(spec, "CONCORD_EVENTLOG")).To(Equal("kafka://kafka:9092?topic_prefix=concord."))
			g.Expect(envValue(spec, "CONCORD_STORE")).To(Equal("cassandra://scylla:9042/concord"))
			g.Expect(envValue(spec, "CONCORD_REGISTRY")).To(Equal("etcd://etcd:2379"))
			g.Expect(envValue(spec, "CONCORD_LIVE_PREFIX")).To(Equal("prod.live."))
			// live-archiver refuses --redis; live-relay and
			// live-moderation do not use it; the others need it.
			if role == concordv1.RoleLiveArchiver || role == concordv1.RoleLiveRelay || role == concordv1.RoleLiveModeration {
				g.Expect(envValue(spec, "CONCORD_REDIS")).To(BeEmpty())
			} else {
				g.Expect(envValue(spec, "CONCORD_REDIS")).To(Equal("redis://redis:6379"))
			}
			g.Expect(k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: "prod-" + role}, &policyv1.PodDisruptionBudget{})).To(Succeed())
			var svc corev1.Service
			err := k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: "prod-" + role}, &svc)
			switch role {
			case concordv1.RoleLiveAPI, concordv1.RoleLiveGateway:
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(svc.Spec.ClusterIP).NotTo(Equal(corev1.ClusterIPNone))
				g.Expect(svc.Spec.Selector).To(HaveKeyWithValue(concordv1.LabelRole, role))
				g.Expect(svc.Spec.Ports[0].Name).To(Equal("http"))
			case concordv1.RoleLiveRelay:
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(svc.Spec.ClusterIP).To(Equal(corev1.ClusterIPNone))
				g.Expect(svc.Spec.Selector).To(HaveKeyWithValue(concordv1.LabelRole, role))
				g.Expect(svc.Spec.Ports[0].Name).To(Equal("relay"))
			default:
				g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "%s has no Service: %v", role, err)
			}
		}
		g.Expect(k8s.Get(ctx, key, c)).To(Succeed())
		names := []string{}
		for _, r := range c.Status.Roles {
			names = append(names, r.Name)
		}
		g.Expect(names).To(ContainElements("live-api", "live-gateway", "live-router", "live-archiver", "live-relay", "live-moderation"))
		g.Expect(c.Status.ReadyRoles).To(HaveSuffix("/12"))
		var d appsv1.Deployment
		g.Expect(k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: "prod-live-router"}, &d)).To(Succeed())
		g.Expect(envValue(d.Spec.Template.Spec, "CONCORD_LIVE_RELAY")).To(Equal("tree"))
	}, timeout, poll).Should(Succeed())

	// Relay nodes scaled to none: routers and gateways fall back to Redis
	// pub/sub rather than publish to a tree without nodes.
	editCluster(g, key, c, func(c *concordv1.ConcordCluster) {
		c.Spec.Live.Relay.Replicas = ptrTo(int32(0))
	})
	g.Eventually(func(g Gomega) {
		for _, role := range []string{"live-router", "live-gateway"} {
			var d appsv1.Deployment
			g.Expect(k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: "prod-" + role}, &d)).To(Succeed())
			g.Expect(envValue(d.Spec.Template.Spec, "CONCORD_LIVE_RELAY")).To(Equal("redis"), role)
		}
		var d appsv1.Deployment
		g.Expect(k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: "prod-live-relay"}, &d)).To(Succeed())
		g.Expect(*d.Spec.Replicas).To(BeZero())
	}, timeout, poll).Should(Succeed())

	// Scaling one role leaves the others alone.
	editCluster(g, key, c, func(c *concordv1.ConcordCluster) {
		c.Spec.Live.Router.Replicas = ptrTo(int32(4))
	})
	g.Eventually(func(g Gomega) {
		var d appsv1.Deployment
		g.Expect(k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: "prod-live-router"}, &d)).To(Succeed())
		g.Expect(*d.Spec.Replicas).To(Equal(int32(4)))
		g.Expect(k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: "prod-live-gateway"}, &d)).To(Succeed())
		g.Expect(*d.Spec.Replicas).To(Equal(int32(3)))
	}, timeout, poll).Should(Succeed())

	// spec.live removed: the live roles go.
	editCluster(g, key, c, func(c *concordv1.ConcordCluster) {
		c.Spec.Live = nil
	})
	g.Eventually(func(g Gomega) {
		for role := range want {
			name := types.NamespacedName{Namespace: ns, Name: "prod-" + role}
			err := k8s.Get(ctx, name, &appsv1.Deployment{})
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "%s: %v", role, err)
			err = k8s.Get(ctx, name, &corev1.Service{})
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "%s Service: %v", role, err)
		}
		g.Expect(k8s.Get(ctx, key, c)).To(Succeed())
		g.Expect(c.Status.ReadyRoles).To(HaveSuffix("/6"))
	}, timeout, poll).Should(Succeed())
}
