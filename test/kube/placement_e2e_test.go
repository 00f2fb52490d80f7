//go:build e2e

package kube

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	concordv1 "github.com/concord-chat/concord/apis/v1alpha1"
)

// TestPlaceDedicated: `kubectl concord place <guild> --dedicated` (the
// plugin built from cli/cmd/kubectl-concord) starts a dedicated guild pod,
// the guild moves onto it (phase Placed, Ready True), and a session that
// was connected before the move keeps receiving the guild's messages.
func TestPlaceDedicated(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t, "place")
	c := dial(t, w.member, "member")
	post(t, w.owner, w.channel, "before the move")
	if err := c.Await("the message before the move", 30*time.Second, hasMessage("before the move")); err != nil {
		t.Fatal(err)
	}

	plugin := filepath.Join(t.TempDir(), "kubectl-concord")
	build := exec.Command("go", "build", "-o", plugin, "./cli/cmd/kubectl-concord")
	build.Dir = filepath.Join("..", "..")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build kubectl-concord: %v\n%s", err, out)
	}
	place := exec.Command(plugin, "-n", ns, "place", w.guild, "--dedicated", "--reason", "e2e")
	place.Env = append(os.Environ(), "KUBECONFIG="+nd.kubeconfig)
	out, err := place.CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl concord place: %v\n%s", err, out)
	}
	t.Logf("kubectl concord place: %s", out)
	name := "guild-" + w.guild
	t.Cleanup(func() {
		_ = k8s.Delete(context.Background(), &concordv1.GuildPlacement{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}})
	})
	var gp concordv1.GuildPlacement
	if err := awaitCondition(ctx, &gp, name, concordv1.ConditionReady, 3*time.Minute); err != nil {
		t.Fatal(err)
	}
	if gp.Status.Phase != concordv1.PlacementPlaced {
		t.Fatalf("GuildPlacement phase %s, want Placed", gp.Status.Phase)
	}
	var pod corev1.Pod
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: clusterName + "-guild-" + w.guild}, &pod); err != nil {
		t.Fatalf("the dedicated guild pod: %v", err)
	}
	if !podReady(&pod) {
		t.Fatalf("dedicated pod %s not Ready", pod.Name)
	}
	post(t, w.owner, w.channel, "after the move")
	if err := c.Await("the message after the move", 60*time.Second, hasMessage("after the move")); err != nil {
		t.Fatal(err)
	}
}
