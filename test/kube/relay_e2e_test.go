//go:build e2e

package kube

import (
	"context"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	concordv1 "github.com/concord-chat/concord/apis/v1alpha1"
)

// TestRelayTierGrows: a RelayTier from the sample, for a guild with a
// connected session, starts its relay pods (Ready, published endpoints);
// raising minRelays by one adds a relay pod that becomes ready and is
// published too, and the guild's messages keep reaching the session.
func TestRelayTierGrows(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t, "relay")
	c := dial(t, w.member, "member")
	var rt concordv1.RelayTier
	if err := sample("relaytier", &rt); err != nil {
		t.Fatal(err)
	}
	rt.ObjectMeta = metav1.ObjectMeta{Namespace: ns, Name: "guild-" + w.guild}
	rt.Spec.ClusterRef.Name = clusterName
	rt.Spec.GuildID = w.guild
	rt.Spec.MinRelays = 1
	if err := k8s.Create(ctx, &rt); err != nil {
		t.Fatalf("create RelayTier: %v", err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), &rt) })
	awaitRelays := func(n int32) {
		t.Helper()
		deadline := time.Now().Add(3 * time.Minute)
		for {
			var got concordv1.RelayTier
			err := k8s.Get(ctx, client.ObjectKeyFromObject(&rt), &got)
			if err == nil && got.Status.ReadyRelays == n && len(got.Status.Endpoints) == int(n) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("RelayTier: want %d ready and published relays, status %+v (err %v)\n%s", n, got.Status, err, podReport(ctx))
			}
			time.Sleep(time.Second) // polling the API, as kubectl get -w would
		}
	}
	awaitRelays(1)
	patch := []byte(fmt.Sprintf(`{"spec":{"minRelays":%d}}`, 2))
	if err := k8s.Patch(ctx, &rt, client.RawPatch(types.MergePatchType, patch)); err != nil {
		t.Fatalf("grow the RelayTier: %v", err)
	}
	awaitRelays(2)
	post(t, w.owner, w.channel, "through the relays")
	if err := c.Await("the message after the tier grew", 30*time.Second, hasMessage("through the relays")); err != nil {
		t.Fatal(err)
	}
}
