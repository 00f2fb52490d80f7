//go:build e2e

package kube

import (
	"context"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	concordv1 "github.com/concord-chat/concord/apis/v1alpha1"
)

// leaseName is the operator's leader-election Lease (LeaderElectionID).
const leaseName = "concord-operator.concord.dev"

// leader is the operator pod holding the Lease (its identity is the pod
// name and a suffix).
func leader(ctx context.Context) (string, error) {
	var l coordinationv1.Lease
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: operatorNS, Name: leaseName}, &l); err != nil {
		return "", err
	}
	if l.Spec.HolderIdentity == nil {
		return "", nil
	}
	id := *l.Spec.HolderIdentity
	if i := strings.LastIndex(id, "_"); i > 0 {
		id = id[:i]
	}
	return id, nil
}

// TestOperatorLeaderFailover: the chart runs two operator replicas with
// leader election (its defaults), spread by topology and covered by a
// PodDisruptionBudget. Deleting the leader's pod (as a rollout or a drained
// node would) hands the Lease to another replica (the leader gives it up
// on SIGTERM; the standby or the Deployment's replacement, whichever asks
// first, takes it), which then reconciles:
// a ConcordCluster change made after the deletion (spec.trustedProxies)
// reaches the api, live-api and live-gateway Deployments, and their new
// pods become Ready with it.
func TestOperatorLeaderFailover(t *testing.T) {
	ctx := context.Background()
	pods, err := kcs.CoreV1().Pods(operatorNS).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/component=operator"})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil {
			names = append(names, p.Name)
		}
	}
	if len(names) != 2 {
		t.Fatalf("operator pods %v, want the chart's two replicas", names)
	}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: operatorNS, Name: "concord-operator"}, &policyv1.PodDisruptionBudget{}); err != nil {
		t.Errorf("the operator's PodDisruptionBudget: %v", err)
	}
	old, err := leader(ctx)
	if err != nil || old == "" {
		t.Fatalf("no leader in Lease %s/%s: %q %v", operatorNS, leaseName, old, err)
	}
	deleted := time.Now()
	if err := kcs.CoreV1().Pods(operatorNS).Delete(ctx, old, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete the leader %s: %v", old, err)
	}
	var now string
	for deadline := time.Now().Add(time.Minute); ; {
		now, err = leader(ctx)
		if err == nil && now != "" && now != old {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the Lease still names %q a minute after its pod %s was deleted (%v)", now, old, err)
		}
		time.Sleep(500 * time.Millisecond) // the Lease is an object in the API: polled
	}
	t.Logf("leader %s -> %s in %v", old, now, time.Since(deleted).Round(100*time.Millisecond))

	proxies := []string{"10.244.0.0/16", "10.98.0.1"}
	patch := []byte(`{"spec":{"trustedProxies":["10.244.0.0/16","10.98.0.1"]}}`)
	c := &concordv1.ConcordCluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: clusterName}}
	if err := k8s.Patch(ctx, c, client.RawPatch(types.MergePatchType, patch)); err != nil {
		t.Fatalf("set trustedProxies: %v", err)
	}
	// Left set: reverting would roll the three Deployments again under
	// the tests that follow. The router's X-Forwarded-For (127.0.0.1 for
	// every client) is what the api pods believe from now on.
	for _, role := range []string{concordv1.RoleAPI, concordv1.RoleLiveAPI, concordv1.RoleLiveGateway} {
		name := clusterName + "-" + role
		deadline := time.Now().Add(3 * time.Minute)
		for {
			var d appsv1.Deployment
			err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &d)
			if err == nil && envOf(d.Spec.Template.Spec, "CONCORD_TRUSTED_PROXIES") == strings.Join(proxies, ",") &&
				d.Status.ObservedGeneration == d.Generation && d.Status.UpdatedReplicas == *d.Spec.Replicas &&
				d.Status.ReadyReplicas == *d.Spec.Replicas && d.Status.Replicas == *d.Spec.Replicas {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("Deployment %s did not roll out with CONCORD_TRUSTED_PROXIES under the new leader (err %v)\n%s", name, err, podReport(ctx))
			}
			time.Sleep(time.Second) // rollout status is polled, as kubectl rollout status does
		}
	}
	var gd appsv1.StatefulSet
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: clusterName + "-guild"}, &gd); err != nil {
		t.Fatal(err)
	}
	if v := envOf(gd.Spec.Template.Spec, "CONCORD_TRUSTED_PROXIES"); v != "" {
		t.Errorf("the guild role got CONCORD_TRUSTED_PROXIES=%q: it serves no clients", v)
	}
}

func envOf(spec corev1.PodSpec, name string) string {
	for _, e := range spec.Containers[0].Env {
		if e.Name == name {
			return e.Value
		}
	}
	return ""
}

// TestDegradedSaysWhy: a ConcordCluster whose image the node does not
// have (imagePullPolicy Never, as on this node) creates its workloads, but
// their pods cannot start: the cluster's Degraded condition turns True with
// reason PodsFailing and a message naming a pod and the kubelet's reason
// (ErrImageNeverPull), and Ready stays False. Deleting the cluster removes
// everything it made (its finalizer and owner references).
func TestDegradedSaysWhy(t *testing.T) {
	ctx := context.Background()
	var c concordv1.ConcordCluster
	if err := sample("concordcluster", &c); err != nil {
		t.Fatal(err)
	}
	c.ObjectMeta = metav1.ObjectMeta{Namespace: ns, Name: "broken"}
	c.Spec.Image, c.Spec.ImagePullPolicy = "concord.local/concord:not-on-this-node", corev1.PullNever
	for _, r := range []*concordv1.RoleSpec{&c.Spec.Roles.API, &c.Spec.Roles.Guild, &c.Spec.Roles.Data,
		&c.Spec.Roles.ReadState, &c.Spec.Roles.Presence, &c.Spec.Roles.Relay} {
		one(r)
	}
	c.Spec.Live, c.Spec.AutoPlacement, c.Spec.Autoscaling = nil, nil, nil
	c.Spec.Storage = concordv1.StorageSpec{ContactPoints: []string{nd.cassandra}, Keyspace: "broken_" + runID, Consistency: "ONE"}
	c.Spec.Kafka = concordv1.KafkaSpec{Brokers: []string{nd.kafka}, TopicPrefix: "broken" + runID + "."}
	c.Spec.Redis = concordv1.RedisSpec{Address: nd.redis}
	c.Spec.Etcd = concordv1.EtcdSpec{Endpoints: []string{nd.etcd}, Prefix: "/broken-" + runID + "/"}
	if err := k8s.Create(ctx, &c); err != nil {
		t.Fatalf("create ConcordCluster: %v", err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), &c) })
	var got concordv1.ConcordCluster
	for deadline := time.Now().Add(2 * time.Minute); ; {
		err := k8s.Get(ctx, client.ObjectKeyFromObject(&c), &got)
		d := meta.FindStatusCondition(got.Status.Conditions, concordv1.ConditionDegraded)
		if err == nil && d != nil && d.Status == metav1.ConditionTrue {
			if d.Reason != "PodsFailing" || !strings.Contains(d.Message, "ErrImageNeverPull") || !strings.Contains(d.Message, "broken-") {
				t.Fatalf("Degraded %s: %s, want PodsFailing naming a pod and ErrImageNeverPull", d.Reason, d.Message)
			}
			t.Logf("Degraded %s: %s", d.Reason, d.Message)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("ConcordCluster broken not Degraded: %+v (err %v)", got.Status.Conditions, err)
		}
		time.Sleep(time.Second) // conditions are polled, as kubectl wait does
	}
	if meta.IsStatusConditionTrue(got.Status.Conditions, concordv1.ConditionReady) {
		t.Fatal("a cluster whose pods cannot start is Ready")
	}
	if err := k8s.Delete(ctx, &c); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(2 * time.Minute); ; {
		err := k8s.Get(ctx, client.ObjectKeyFromObject(&c), &got)
		var ds appsv1.DeploymentList
		lerr := k8s.List(ctx, &ds, client.InNamespace(ns), client.MatchingLabels{concordv1.LabelCluster: "broken"})
		if apierrors.IsNotFound(err) && lerr == nil && len(ds.Items) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("ConcordCluster broken still there (%v) or its Deployments (%d) after deletion", err, len(ds.Items))
		}
		time.Sleep(time.Second)
	}
}

// TestDisruptionAndSpread: every pod the operator made in the suite's
// namespace (the cluster's roles, the gateway pool, the SFUs; relay tiers
// and dedicated guild pods when a test left any) is covered by exactly the
// PodDisruptionBudgets of its owner, carries topology spread over zones
// and nodes and a startup probe; a gateway pod's grace period covers its
// pool's drain timeout (its preStop hook holds it while it drains).
func TestDisruptionAndSpread(t *testing.T) {
	ctx := context.Background()
	pods, err := kcs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pdbs, err := kcs.PolicyV1().PodDisruptionBudgets(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var pool concordv1.GatewayPool
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: poolName}, &pool); err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, p := range pods.Items {
		if p.DeletionTimestamp != nil || p.Labels[concordv1.LabelCluster] != clusterName {
			continue
		}
		checked++
		role := p.Labels[concordv1.LabelRole]
		covered := 0
		for _, b := range pdbs.Items {
			sel, err := metav1.LabelSelectorAsSelector(b.Spec.Selector)
			if err == nil && sel.Matches(labels.Set(p.Labels)) {
				covered++
			}
		}
		// A dedicated guild pod (GuildPlacement) has no budget: evicting it
		// returns its guild to the ring.
		dedicated := role == concordv1.RoleGuild && strings.HasPrefix(p.Name, clusterName+"-guild-") && p.Name != clusterName+"-guild-0"
		if !dedicated && covered == 0 {
			t.Errorf("pod %s (role %s) is covered by no PodDisruptionBudget", p.Name, role)
		}
		keys := map[string]bool{}
		for _, c := range p.Spec.TopologySpreadConstraints {
			keys[c.TopologyKey] = true
		}
		if !keys[corev1.LabelTopologyZone] || !keys[corev1.LabelHostname] {
			t.Errorf("pod %s: topology spread %v, want zone and hostname", p.Name, p.Spec.TopologySpreadConstraints)
		}
		if p.Spec.Containers[0].StartupProbe == nil {
			t.Errorf("pod %s has no startup probe", p.Name)
		}
		if role == concordv1.RoleGateway {
			drain := pool.Spec.Drain.Timeout.Duration
			if g := p.Spec.TerminationGracePeriodSeconds; g == nil || time.Duration(*g)*time.Second < drain {
				t.Errorf("gateway pod %s: grace %v shorter than the drain timeout %v", p.Name, g, drain)
			}
		}
	}
	if checked == 0 {
		t.Fatal("no pods of the cluster")
	}
}
