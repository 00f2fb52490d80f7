//go:build e2e

package kube

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	concordv1 "github.com/concord-chat/concord/apis/v1alpha1"
	"github.com/concord-chat/concord/operator/fleet/etcdfleet"
	"github.com/concord-chat/concord/runtime/adapters/registry"
	etcdreg "github.com/concord-chat/concord/runtime/adapters/registry/etcd"
	"github.com/concord-chat/concord/runtime/base/snowflake"
)

// openRegistry opens the suite cluster's runtime registry (the etcd on
// the host, under the run's prefix) the way the operator's etcdfleet does,
// to read what the operator leaves outside Kubernetes.
func openRegistry(t *testing.T) registry.Registry {
	t.Helper()
	reg, err := etcdreg.New(etcdreg.Config{Endpoints: []string{nd.etcd}, Prefix: "/e2e-" + runID + "/"})
	if err != nil {
		t.Fatalf("open the cluster's registry at %s: %v", nd.etcd, err)
	}
	t.Cleanup(func() { _ = reg.Close() })
	return reg
}

// pinOf is the node guild is pinned to in the registry's current guild
// snapshot, "" when it has no pin.
func pinOf(t *testing.T, ctx context.Context, reg registry.Registry, guild string) string {
	t.Helper()
	id, err := strconv.ParseUint(guild, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ch, err := reg.Watch(wctx, registry.RoleGuild)
	if err != nil {
		t.Fatalf("watch guild nodes: %v", err)
	}
	select {
	case s, ok := <-ch:
		if !ok {
			t.Fatal("the guild watch closed before its first snapshot")
		}
		return s.Pins[snowflake.ID(id)]
	case <-ctx.Done():
		t.Fatal(ctx.Err())
	}
	return ""
}

// awaitGone polls until o no longer exists: its finalizer was removed and
// the API server deleted it.
func awaitGone(t *testing.T, ctx context.Context, o client.Object, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := k8s.Get(ctx, client.ObjectKeyFromObject(o), o)
		if apierrors.IsNotFound(err) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%T %s still exists %v after its deletion (finalizers %v, err %v)\n%s", o, o.GetName(), timeout, o.GetFinalizers(), err, podReport(ctx))
		}
		time.Sleep(time.Second) // deletion is observed through the API: polled, as kubectl wait --for=delete does
	}
}

// TestFinalizersRelease: a GuildPlacement and a RelayTier leave state
// outside Kubernetes that their pods' garbage collection would not undo —
// the guild's pin and the guild's relay list in the cluster's registry.
// Each carries the operator's finalizer; deleting each releases that
// state (the pin and the relay list are gone from etcd), its pods go, the
// finalizer comes off and the object disappears, and the guild's session
// keeps receiving messages after each release.
func TestFinalizersRelease(t *testing.T) {
	ctx := context.Background()
	reg := openRegistry(t)
	w := newWorld(t, "finalize")
	c := dial(t, w.member, "member")

	var rt concordv1.RelayTier
	if err := sample("relaytier", &rt); err != nil {
		t.Fatal(err)
	}
	rt.ObjectMeta = metav1.ObjectMeta{Namespace: ns, Name: "finalize-" + w.guild}
	rt.Spec.ClusterRef.Name = clusterName
	rt.Spec.GuildID = w.guild
	rt.Spec.MinRelays = 1
	if err := k8s.Create(ctx, &rt); err != nil {
		t.Fatalf("create RelayTier: %v", err)
	}
	gp := &concordv1.GuildPlacement{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "finalize-" + w.guild},
		Spec: concordv1.GuildPlacementSpec{ClusterRef: concordv1.ClusterReference{Name: clusterName}, GuildID: w.guild,
			Reason: "e2e: the finalizer releases the pin"},
	}
	if err := k8s.Create(ctx, gp); err != nil {
		t.Fatalf("create GuildPlacement: %v", err)
	}
	t.Cleanup(func() {
		_ = k8s.Delete(context.Background(), gp)
		_ = k8s.Delete(context.Background(), &rt)
	})

	// Both in place: the pin names the dedicated pod, the relay list is
	// published, and each object holds the finalizer.
	if err := awaitCondition(ctx, gp, gp.Name, concordv1.ConditionReady, 3*time.Minute); err != nil {
		t.Fatal(err)
	}
	dedicated := gp.Status.PodName
	if got := pinOf(t, ctx, reg, w.guild); got != dedicated || dedicated == "" {
		t.Fatalf("guild %s is pinned to %q in the registry, want the placement's pod %q", w.guild, got, dedicated)
	}
	deadline := time.Now().Add(3 * time.Minute)
	for {
		err := k8s.Get(ctx, client.ObjectKeyFromObject(&rt), &rt)
		_, gerr := reg.Get(ctx, etcdfleet.RelaysKey(w.guild))
		if err == nil && rt.Status.ReadyRelays == 1 && gerr == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("RelayTier: status %+v (err %v), relay list in the registry: %v\n%s", rt.Status, err, gerr, podReport(ctx))
		}
		time.Sleep(time.Second) // polling the API and the registry, as kubectl get -w would
	}
	for _, o := range []client.Object{gp, &rt} {
		if !controllerutil.ContainsFinalizer(o, concordv1.Finalizer) {
			t.Fatalf("%T %s has no %s finalizer: %v", o, o.GetName(), concordv1.Finalizer, o.GetFinalizers())
		}
	}
	post(t, w.owner, w.channel, "on the dedicated pod")
	if err := c.Await("the message on the dedicated pod", time.Minute, hasMessage("on the dedicated pod")); err != nil {
		t.Fatal(err)
	}

	// The placement goes: the pin is released, the dedicated pod deleted,
	// the object gone.
	if err := k8s.Delete(ctx, gp); err != nil {
		t.Fatalf("delete GuildPlacement: %v", err)
	}
	awaitGone(t, ctx, gp, 3*time.Minute)
	if got := pinOf(t, ctx, reg, w.guild); got != "" {
		t.Fatalf("guild %s is still pinned to %q after its GuildPlacement was deleted", w.guild, got)
	}
	awaitGone(t, ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: dedicated}}, 3*time.Minute)
	post(t, w.owner, w.channel, "back on the ring")
	if err := c.Await("the message after the placement's release", time.Minute, hasMessage("back on the ring")); err != nil {
		t.Fatal(err)
	}

	// The tier goes: the relay list is withdrawn, the relay pods follow
	// their owner, the object is gone.
	relays, err := kcs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := k8s.Delete(ctx, &rt); err != nil {
		t.Fatalf("delete RelayTier: %v", err)
	}
	awaitGone(t, ctx, &rt, 3*time.Minute)
	if v, err := reg.Get(ctx, etcdfleet.RelaysKey(w.guild)); !errors.Is(err, registry.ErrNotFound) {
		t.Fatalf("guild %s's relay list is still in the registry after its RelayTier was deleted: %s (err %v)", w.guild, v, err)
	}
	for _, p := range relays.Items {
		for _, ref := range p.OwnerReferences {
			if ref.Kind == "RelayTier" && ref.Name == rt.Name {
				awaitGone(t, ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: p.Name}}, 3*time.Minute)
			}
		}
	}
	post(t, w.owner, w.channel, "without relays")
	if err := c.Await("the message after the tier's release", time.Minute, hasMessage("without relays")); err != nil {
		t.Fatal(err)
	}
}
