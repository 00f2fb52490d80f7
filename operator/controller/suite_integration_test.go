//go:build integration

package controller

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"go.uber.org/zap/zapcore"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/yaml"

	concordv1 "github.com/concord-chat/concord/apis/v1alpha1"
	"github.com/concord-chat/concord/operator/fleet"
)

// The suite runs every reconciler in one manager against a real
// kube-apiserver and etcd (envtest). There is no kubelet, scheduler or
// controller-manager: tests play the kubelet (pod readiness, pod IPs) and the
// runtime (fleet.Memory: sessions, guild owners, loads).
var (
	k8s    client.Client // non-cached: every assertion reads the API server
	mem    *fleet.Memory
	scheme = runtime.NewScheme()
	// opClient and opRecorder act as the operator (generated RBAC).
	opClient   client.Client
	opRecorder events.EventRecorder
)

const (
	timeout = 20 * time.Second
	poll    = 50 * time.Millisecond
)

func TestMain(m *testing.M) {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		fmt.Fprintln(os.Stderr, "FAIL: KUBEBUILDER_ASSETS is unset. These tests need a real kube-apiserver and etcd:\n"+
			"  run `make test`, or\n"+
			"  export KUBEBUILDER_ASSETS=$(hack/envtest/build.sh) && go test -tags integration ./operator/...")
		os.Exit(1)
	}
	os.Exit(run(m))
}

func run(m *testing.M) int {
	logf.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.UseDevMode(true), zap.Level(zapLevel())))
	_ = clientgoscheme.AddToScheme(scheme)
	_ = concordv1.AddToScheme(scheme)

	env := &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join("..", "..", "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
	}
	cfg, err := env.Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, "FAIL: start envtest:", err)
		return 1
	}
	defer func() { _ = env.Stop() }()

	k8s, err = client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		fmt.Fprintln(os.Stderr, "FAIL: client:", err)
		return 1
	}
	// The manager runs as a user bound to the ClusterRole generated from the
	// RBAC markers (config/rbac/role.yaml): a missing marker fails the tests.
	mgrCfg, err := operatorIdentity(cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "FAIL: RBAC:", err)
		return 1
	}
	mgr, err := ctrl.NewManager(mgrCfg, ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "FAIL: manager:", err)
		return 1
	}
	mem = fleet.NewMemory()
	if err := SetupAll(mgr, Deps{
		Clock: clock.RealClock{}, Registries: mem, Drainer: mem, GuildStats: mem, VoiceLoads: mem,
		PollInterval: 100 * time.Millisecond, Resync: 200 * time.Millisecond,
	}); err != nil {
		fmt.Fprintln(os.Stderr, "FAIL: setup:", err)
		return 1
	}
	opClient, opRecorder = mgr.GetClient(), mgr.GetEventRecorder("concord-autoscaler")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	code := m.Run()
	cancel()
	if err := <-done; err != nil {
		fmt.Fprintln(os.Stderr, "manager:", err)
	}
	return code
}

func zapLevel() zapcore.Level {
	if os.Getenv("CONCORD_TEST_VERBOSE") != "" {
		return -1
	}
	return 1 // warnings and errors only
}

// operatorIdentity installs config/rbac/role.yaml, binds it to the user
// "concord-operator" and returns a config impersonating that user.
func operatorIdentity(cfg *rest.Config) (*rest.Config, error) {
	ctx := context.Background()
	b, err := os.ReadFile(filepath.Join("..", "..", "config", "rbac", "role.yaml"))
	if err != nil {
		return nil, err
	}
	var role rbacv1.ClusterRole
	if err := yaml.UnmarshalStrict(b, &role); err != nil {
		return nil, fmt.Errorf("parse role.yaml: %w", err)
	}
	if err := k8s.Create(ctx, &role); err != nil {
		return nil, fmt.Errorf("create ClusterRole: %w", err)
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "concord-operator"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: "concord-operator"}},
	}
	if err := k8s.Create(ctx, binding); err != nil {
		return nil, fmt.Errorf("create ClusterRoleBinding: %w", err)
	}
	out := rest.CopyConfig(cfg)
	out.Impersonate = rest.ImpersonationConfig{UserName: "concord-operator"}
	return out, nil
}

// newNamespace creates a namespace per test so tests do not see each other.
func newNamespace(t *testing.T) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "concord-test-"}}
	if err := k8s.Create(context.Background(), ns); err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	return ns.Name
}

// editCluster applies edit to the ConcordCluster key names (read into c)
// and updates it, again on a conflict with the operator's own writes,
// until it succeeds.
func editCluster(g Gomega, key types.NamespacedName, c *concordv1.ConcordCluster, edit func(c *concordv1.ConcordCluster)) {
	ctx := context.Background()
	g.Eventually(func(g Gomega) {
		g.Expect(k8s.Get(ctx, key, c)).To(Succeed())
		edit(c)
		g.Expect(k8s.Update(ctx, c)).To(Succeed())
	}, timeout, poll).Should(Succeed())
}

// newCluster creates a minimal ConcordCluster.
func newCluster(t *testing.T, ns, name string) *concordv1.ConcordCluster {
	t.Helper()
	c := &concordv1.ConcordCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: concordv1.ConcordClusterSpec{
			Image:   "concord:test",
			Storage: concordv1.StorageSpec{ContactPoints: []string{"scylla:9042"}},
			Kafka:   concordv1.KafkaSpec{Brokers: []string{"kafka:9092"}},
			Redis:   concordv1.RedisSpec{Address: "redis:6379"},
			Etcd:    concordv1.EtcdSpec{Endpoints: []string{"http://etcd:2379"}},
		},
	}
	if err := k8s.Create(context.Background(), c); err != nil {
		t.Fatalf("create ConcordCluster: %v", err)
	}
	return c
}

// markPodsReady plays the kubelet: every pod matching labels gets an IP
// and PodReady=True. It returns how many pods it saw.
func markPodsReady(g Gomega, ns string, labels map[string]string) int {
	var pods corev1.PodList
	g.Expect(k8s.List(context.Background(), &pods, client.InNamespace(ns), client.MatchingLabels(labels))).To(Succeed())
	n := 0
	for i := range pods.Items {
		p := &pods.Items[i]
		if !p.DeletionTimestamp.IsZero() {
			continue
		}
		n++
		if podReady(p) && p.Status.PodIP != "" {
			continue
		}
		patch := client.StrategicMergeFrom(p.DeepCopy())
		p.Status.PodIP = fmt.Sprintf("10.0.%d.%d", len(p.Name)%250, i+1)
		p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{
			Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now(),
		})
		err := k8s.Status().Patch(context.Background(), p, patch)
		if !apierrors.IsNotFound(err) {
			g.Expect(err).To(Succeed())
		}
	}
	return n
}

// listPods lists live pods matching labels.
func listPods(g Gomega, ns string, labels map[string]string) []corev1.Pod {
	var pods corev1.PodList
	g.Expect(k8s.List(context.Background(), &pods, client.InNamespace(ns), client.MatchingLabels(labels))).To(Succeed())
	var out []corev1.Pod
	for _, p := range pods.Items {
		if p.DeletionTimestamp.IsZero() {
			out = append(out, p)
		}
	}
	return out
}

// conditionStatus returns a condition's status and observed generation.
func conditionStatus(conds []metav1.Condition, t string) (metav1.ConditionStatus, int64) {
	c := meta.FindStatusCondition(conds, t)
	if c == nil {
		return "", 0
	}
	return c.Status, c.ObservedGeneration
}

// envValue returns the value of a plain env var of the pod's first container.
func envValue(spec corev1.PodSpec, name string) string {
	for _, e := range spec.Containers[0].Env {
		if e.Name == name {
			return e.Value
		}
	}
	return ""
}
