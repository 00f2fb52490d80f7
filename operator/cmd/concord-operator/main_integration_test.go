//go:build integration

package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	concordv1 "github.com/concord-chat/concord/apis/v1alpha1"
)

// TestBinaryReconciles builds concord-operator, runs it against a real API
// server with a kubeconfig (fleet=memory) and checks that it turns a
// ConcordCluster into its workloads: the wiring in main (scheme, flags,
// controllers, autoscaler) works as a process. Leader election is on, as
// by default (outside a cluster it needs the Lease's namespace): the
// process reconciles only once it holds the Lease.
func TestBinaryReconciles(t *testing.T) {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		t.Fatal("KUBEBUILDER_ASSETS is unset: run `make test`, or export KUBEBUILDER_ASSETS=$(hack/envtest/build.sh)")
	}
	env := &envtest.Environment{CRDDirectoryPaths: []string{filepath.Join("..", "..", "..", "config", "crd", "bases")}, ErrorIfCRDPathMissing: true}
	cfg, err := env.Start()
	if err != nil {
		t.Fatalf("start envtest: %v", err)
	}
	defer func() { _ = env.Stop() }()
	user, err := env.AddUser(envtest.User{Name: "operator-smoke", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	kc, err := user.KubeConfig()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kubeconfig, kc, 0o600); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "concord-operator")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var logs bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, "--kubeconfig="+kubeconfig, "--fleet=memory",
		"--metrics-bind-address=0", "--health-probe-bind-address=127.0.0.1:0", "--autoscale-interval=1s", "--leader-election-namespace=default")
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		cancel()
		<-exited
		if t.Failed() {
			t.Logf("operator output:\n%s", logs.String())
		}
	}()

	s := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(s)
	_ = concordv1.AddToScheme(s)
	k8s, err := client.New(cfg, client.Options{Scheme: s})
	if err != nil {
		t.Fatal(err)
	}
	c := &concordv1.ConcordCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "smoke"},
		Spec: concordv1.ConcordClusterSpec{
			Image:   "concord:test",
			Storage: concordv1.StorageSpec{ContactPoints: []string{"scylla:9042"}},
			Kafka:   concordv1.KafkaSpec{Brokers: []string{"kafka:9092"}},
			Redis:   concordv1.RedisSpec{Address: "redis:6379"},
			Etcd:    concordv1.EtcdSpec{Endpoints: []string{"http://etcd:2379"}},
		},
	}
	if err := k8s.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		var sts appsv1.StatefulSet
		err := k8s.Get(ctx, client.ObjectKey{Namespace: "default", Name: "smoke-guild"}, &sts)
		if err == nil {
			_ = k8s.Get(ctx, client.ObjectKeyFromObject(c), c)
			var l coordinationv1.Lease
			lerr := k8s.Get(ctx, client.ObjectKey{Namespace: "default", Name: "concord-operator.concord.dev"}, &l)
			if c.Status.ObservedGeneration == c.Generation && lerr == nil && l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity != "" {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the operator process did not reconcile the cluster within 60s (last error: %v)", err)
		}
		select {
		case err := <-exited:
			exited <- err
			t.Fatalf("operator exited early: %v", err)
		case <-time.After(200 * time.Millisecond): // poll the API server again
		}
	}
}
