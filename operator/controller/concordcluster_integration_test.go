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
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	concordv1 "github.com/concord-chat/concord/apis/v1alpha1"
)

func TestConcordClusterLifecycle(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	c := newCluster(t, ns, "prod")
	key := types.NamespacedName{Namespace: ns, Name: "prod"}

	// Defaults from the CRD schema.
	g.Expect(k8s.Get(ctx, key, c)).To(Succeed())
	g.Expect(c.Spec.Storage.Keyspace).To(Equal("concord"))
	g.Expect(c.Spec.Storage.Consistency).To(Equal("LOCAL_QUORUM"))

	// Every role's workload, Service and PDB, owned by the cluster.
	g.Eventually(func(g Gomega) {
		for _, role := range clusterRoles {
			name := types.NamespacedName{Namespace: ns, Name: "prod-" + role}
			var obj client.Object = &appsv1.Deployment{}
			if role == concordv1.RoleGuild {
				obj = &appsv1.StatefulSet{}
			}
			g.Expect(k8s.Get(ctx, name, obj)).To(Succeed(), role)
			g.Expect(metav1.IsControlledBy(obj, c)).To(BeTrue(), role)
			svc := &corev1.Service{}
			g.Expect(k8s.Get(ctx, name, svc)).To(Succeed(), role)
			g.Expect(metav1.IsControlledBy(svc, c)).To(BeTrue())
			pdb := &policyv1.PodDisruptionBudget{}
			g.Expect(k8s.Get(ctx, name, pdb)).To(Succeed(), role)
			g.Expect(pdb.Spec.MaxUnavailable.IntValue()).To(Equal(1))
		}
		var cm corev1.ConfigMap
		g.Expect(k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: "prod-config"}, &cm)).To(Succeed())
		g.Expect(cm.Data["config.yaml"]).To(ContainSubstring("scylla:9042"))
		g.Expect(cm.Data["config.yaml"]).To(ContainSubstring("http://etcd:2379"))
	}, timeout, poll).Should(Succeed())

	var sts appsv1.StatefulSet
	g.Expect(k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: "prod-guild"}, &sts)).To(Succeed())
	g.Expect(*sts.Spec.Replicas).To(Equal(int32(3)))
	g.Expect(sts.Spec.Template.Spec.Containers[0].Args).To(ContainElement("--roles=guild"))
	g.Expect(sts.Spec.Template.Spec.Containers[0].Image).To(Equal("concord:test"))
	g.Expect(envValue(sts.Spec.Template.Spec, "CONCORD_REGISTRY")).To(Equal("etcd://etcd:2379"))
	g.Expect(envValue(sts.Spec.Template.Spec, "CONCORD_STORE")).To(Equal("cassandra://scylla:9042/concord"))
	// The admin listener: CONCORD_ADMIN on the container port "admin",
	// which the api Service's admin port (kubectl-concord) targets.
	g.Expect(envValue(sts.Spec.Template.Spec, "CONCORD_ADMIN")).To(Equal("0.0.0.0:9090"))
	g.Expect(sts.Spec.Template.Spec.Containers[0].Ports).To(ContainElement(
		corev1.ContainerPort{Name: "admin", ContainerPort: PortAdmin, Protocol: corev1.ProtocolTCP}))
	g.Expect(envValue(sts.Spec.Template.Spec, "CONCORD_REDIS")).To(BeEmpty(), "serve refuses --redis on guild nodes")
	var apiSvc corev1.Service
	g.Expect(k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: "prod-api"}, &apiSvc)).To(Succeed())
	g.Expect(apiSvc.Spec.Ports).To(ContainElement(SatisfyAll(
		HaveField("Name", "admin"), HaveField("Port", int32(PortAdmin)), HaveField("TargetPort.StrVal", "admin"))))
	var apiDep appsv1.Deployment
	g.Expect(k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: "prod-api"}, &apiDep)).To(Succeed())
	g.Expect(envValue(apiDep.Spec.Template.Spec, "CONCORD_ADMIN")).To(Equal("0.0.0.0:9090"))
	g.Expect(apiDep.Spec.Template.Spec.Containers[0].Ports).To(ContainElement(HaveField("Name", "admin")))

	// Status: not ready until the workloads report ready replicas.
	g.Eventually(func(g Gomega) {
		g.Expect(k8s.Get(ctx, key, c)).To(Succeed())
		g.Expect(controllerutil.ContainsFinalizer(c, concordv1.Finalizer)).To(BeTrue())
		g.Expect(c.Status.ObservedGeneration).To(Equal(c.Generation))
		st, gen := conditionStatus(c.Status.Conditions, concordv1.ConditionReady)
		g.Expect(st).To(Equal(metav1.ConditionFalse))
		g.Expect(gen).To(Equal(c.Generation))
		st, _ = conditionStatus(c.Status.Conditions, concordv1.ConditionProgressing)
		g.Expect(st).To(Equal(metav1.ConditionTrue))
		g.Expect(c.Status.ReadyRoles).To(Equal("0/6"))
	}, timeout, poll).Should(Succeed())

	// Play the controller-manager: workloads report ready replicas.
	for _, role := range clusterRoles {
		name := types.NamespacedName{Namespace: ns, Name: "prod-" + role}
		if role == concordv1.RoleGuild {
			var s appsv1.StatefulSet
			g.Expect(k8s.Get(ctx, name, &s)).To(Succeed())
			s.Status.Replicas, s.Status.ReadyReplicas = *s.Spec.Replicas, *s.Spec.Replicas
			g.Expect(k8s.Status().Update(ctx, &s)).To(Succeed())
			continue
		}
		var d appsv1.Deployment
		g.Expect(k8s.Get(ctx, name, &d)).To(Succeed())
		d.Status.Replicas, d.Status.ReadyReplicas = *d.Spec.Replicas, *d.Spec.Replicas
		g.Expect(k8s.Status().Update(ctx, &d)).To(Succeed())
	}
	g.Eventually(func(g Gomega) {
		g.Expect(k8s.Get(ctx, key, c)).To(Succeed())
		st, _ := conditionStatus(c.Status.Conditions, concordv1.ConditionReady)
		g.Expect(st).To(Equal(metav1.ConditionTrue))
		g.Expect(c.Status.ReadyRoles).To(Equal("6/6"))
	}, timeout, poll).Should(Succeed())

	// Scale a role: the Deployment follows, the generation is observed.
	g.Expect(k8s.Get(ctx, key, c)).To(Succeed())
	c.Spec.Roles.API.Replicas = ptrTo(int32(5))
	g.Expect(k8s.Update(ctx, c)).To(Succeed())
	g.Eventually(func(g Gomega) {
		var d appsv1.Deployment
		g.Expect(k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: "prod-api"}, &d)).To(Succeed())
		g.Expect(*d.Spec.Replicas).To(Equal(int32(5)))
		g.Expect(k8s.Get(ctx, key, c)).To(Succeed())
		g.Expect(c.Status.ObservedGeneration).To(Equal(c.Generation))
		st, _ := conditionStatus(c.Status.Conditions, concordv1.ConditionReady)
		g.Expect(st).To(Equal(metav1.ConditionFalse)) // 2 of 5 ready
	}, timeout, poll).Should(Succeed())

	// Deletion: the finalizer releases the cluster's GuildPlacements first.
	gp := &concordv1.GuildPlacement{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "hot"},
		Spec:       concordv1.GuildPlacementSpec{ClusterRef: concordv1.ClusterReference{Name: "prod"}, GuildID: "1234"},
	}
	g.Expect(k8s.Create(ctx, gp)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(gp), gp)).To(Succeed())
		g.Expect(gp.Finalizers).To(ContainElement(concordv1.Finalizer))
		g.Expect(k8s.Get(ctx, key, c)).To(Succeed())
		g.Expect(c.Status.DedicatedGuilds).To(Equal(int32(1)))
	}, timeout, poll).Should(Succeed())
	g.Expect(k8s.Delete(ctx, c)).To(Succeed())
	g.Eventually(func(g Gomega) {
		err := k8s.Get(ctx, client.ObjectKeyFromObject(gp), &concordv1.GuildPlacement{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "placement should be released and gone, got %v", err)
		err = k8s.Get(ctx, key, &concordv1.ConcordCluster{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "cluster should be gone, got %v", err)
	}, timeout, poll).Should(Succeed())
}

func TestValidation(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	ref := concordv1.ClusterReference{Name: "prod"}

	// RelayTier: exactly one of guildID and guildSelector; min <= max; defaults.
	both := &concordv1.RelayTier{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "both"}, Spec: concordv1.RelayTierSpec{
		ClusterRef: ref, GuildID: "1", GuildSelector: &concordv1.GuildSelector{MinOnline: 10}, MinRelays: 1, MaxRelays: 2}}
	err := k8s.Create(ctx, both)
	g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "got %v", err)
	g.Expect(err.Error()).To(ContainSubstring("exactly one of guildID and guildSelector"))
	inverted := &concordv1.RelayTier{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "inv"}, Spec: concordv1.RelayTierSpec{
		ClusterRef: ref, GuildID: "1", MinRelays: 5, MaxRelays: 2}}
	err = k8s.Create(ctx, inverted)
	g.Expect(err).To(HaveOccurred())
	g.Expect(err.Error()).To(ContainSubstring("minRelays must not exceed maxRelays"))
	ok := &concordv1.RelayTier{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ok"}, Spec: concordv1.RelayTierSpec{
		ClusterRef: ref, GuildID: "1", MinRelays: 1, MaxRelays: 20}}
	g.Expect(k8s.Create(ctx, ok)).To(Succeed())
	g.Expect(ok.Spec.SessionsPerRelay).To(Equal(int64(15000)))

	// GuildPlacement: the guild id is a snowflake and immutable.
	bad := &concordv1.GuildPlacement{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bad"},
		Spec: concordv1.GuildPlacementSpec{ClusterRef: ref, GuildID: "not-a-snowflake"}}
	g.Expect(apierrors.IsInvalid(k8s.Create(ctx, bad))).To(BeTrue())
	gp := &concordv1.GuildPlacement{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "gp"},
		Spec: concordv1.GuildPlacementSpec{ClusterRef: ref, GuildID: "42"}}
	g.Expect(k8s.Create(ctx, gp)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(gp), gp)).To(Succeed())
		gp.Spec.GuildID = "43"
		err := k8s.Update(ctx, gp)
		g.Expect(apierrors.IsConflict(err)).To(BeFalse()) // the controller wrote status meanwhile: retry
		g.Expect(err).To(HaveOccurred())
		g.Expect(err.Error()).To(ContainSubstring("guildID is immutable"))
	}, timeout, poll).Should(Succeed())

	// VoiceRegion: bounds and ports.
	vr := &concordv1.VoiceRegion{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "vr"}, Spec: concordv1.VoiceRegionSpec{
		ClusterRef: ref, Region: "eu-west", MinServers: 3, MaxServers: 1}}
	err = k8s.Create(ctx, vr)
	g.Expect(err).To(HaveOccurred())
	g.Expect(err.Error()).To(ContainSubstring("minServers must not exceed maxServers"))
	vr = &concordv1.VoiceRegion{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "vr"}, Spec: concordv1.VoiceRegionSpec{
		ClusterRef: ref, Region: "eu-west", MediaPort: 50000, WebRTCPort: 50000}}
	err = k8s.Create(ctx, vr)
	g.Expect(err).To(HaveOccurred())
	g.Expect(err.Error()).To(ContainSubstring("mediaPort and webrtcPort must differ"))

	// GatewayPool defaults.
	pool := &concordv1.GatewayPool{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "gw"},
		Spec: concordv1.GatewayPoolSpec{ClusterRef: ref}}
	g.Expect(k8s.Create(ctx, pool)).To(Succeed())
	g.Expect(*pool.Spec.Replicas).To(Equal(int32(2)))
	g.Expect(pool.Spec.SessionsPerPod).To(Equal(int32(50000)))
	g.Expect(pool.Spec.ClientClass).To(Equal(concordv1.ClientClassUsers))
	g.Expect(pool.Spec.Drain.Timeout.Duration.String()).To(Equal("5m0s"))
	g.Expect(pool.Spec.Drain.BatchSize).To(Equal(int32(1)))

	// A pool whose cluster does not exist is Degraded, with the generation observed.
	g.Eventually(func(g Gomega) {
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(pool), pool)).To(Succeed())
		st, gen := conditionStatus(pool.Status.Conditions, concordv1.ConditionDegraded)
		g.Expect(st).To(Equal(metav1.ConditionTrue))
		g.Expect(gen).To(Equal(pool.Generation))
	}, timeout, poll).Should(Succeed())
}
