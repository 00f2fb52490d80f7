package autoscale

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	concordv1 "github.com/concord-chat/concord/apis/v1alpha1"
	"github.com/concord-chat/concord/operator/fleet"
)

func TestAutoscalerCreatesPlacementAndRecordsEvent(t *testing.T) {
	s := runtime.NewScheme()
	_ = concordv1.AddToScheme(s)
	c := cluster()
	c.Spec.AutoPlacement.DedicatedPool.NodeSelector = map[string]string{"pool": "dedicated"}
	cl := fake.NewClientBuilder().WithScheme(s).WithObjects(c).Build()
	mem := fleet.NewMemory()
	mem.SetGuildStats("ns", "prod", []fleet.GuildSample{{GuildID: "99", Node: "prod-guild-0",
		EventAgeP50: 80 * time.Millisecond, EventAgeP99: 600 * time.Millisecond, QueueLength: 4000, Online: 9000}})
	clk := clocktesting.NewFakePassiveClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	rec := events.NewFakeRecorder(10)
	a := &Autoscaler{Client: cl, Clock: clk, Recorder: rec, Stats: mem}
	ctx := context.Background()

	if err := a.Round(ctx); err != nil {
		t.Fatal(err)
	}
	var list concordv1.GuildPlacementList
	_ = cl.List(ctx, &list)
	if len(list.Items) != 0 {
		t.Fatalf("placement created before SustainFor")
	}
	if got := testutil.ToFloat64(GuildEventAge.WithLabelValues("ns", "prod", "99", "0.99")); got != 0.6 {
		t.Fatalf("event age gauge = %v, want 0.6", got)
	}
	if got := testutil.ToFloat64(ClusterEventAge.WithLabelValues("ns", "prod")); got != 0.6 {
		t.Fatalf("cluster event age gauge = %v, want 0.6", got)
	}

	// The counter is the process's (a Prometheus default): the round's
	// decision is its increase.
	placedBefore := testutil.ToFloat64(Decisions.WithLabelValues("ns", "prod", "Place"))
	clk.SetTime(clk.Now().Add(3 * time.Minute))
	if err := a.Round(ctx); err != nil {
		t.Fatal(err)
	}
	var gp concordv1.GuildPlacement
	if err := cl.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "auto-99"}, &gp); err != nil {
		t.Fatalf("placement: %v", err)
	}
	if gp.Spec.GuildID != "99" || gp.Labels[concordv1.LabelPlacedBy] != concordv1.PlacedByAutoscaler ||
		gp.Spec.NodeSelector["pool"] != "dedicated" || !strings.Contains(gp.Spec.Reason, "600ms") {
		t.Fatalf("placement = %+v", gp)
	}
	select {
	case e := <-rec.Events:
		if !strings.Contains(e, "AutoscalePlace") || !strings.Contains(e, "guild 99") {
			t.Fatalf("event = %q", e)
		}
	default:
		t.Fatal("no Kubernetes Event recorded for the decision")
	}
	if got := testutil.ToFloat64(Decisions.WithLabelValues("ns", "prod", "Place")) - placedBefore; got != 1 {
		t.Fatalf("decisions counter rose by %v, want 1", got)
	}
}

func TestAutoscalerScalesGuildRole(t *testing.T) {
	s := runtime.NewScheme()
	_ = concordv1.AddToScheme(s)
	c := cluster()
	c.Spec.AutoPlacement = nil
	three := int32(3)
	c.Spec.Roles.Guild.Replicas = &three
	c.Spec.Autoscaling = &concordv1.AutoscalingPolicy{Guild: &concordv1.GuildAutoscaling{MinReplicas: 2, MaxReplicas: 4,
		TargetEventAge: d(100 * time.Millisecond)}}
	cl := fake.NewClientBuilder().WithScheme(s).WithObjects(c).Build()
	mem := fleet.NewMemory()
	mem.SetGuildStats("ns", "prod", []fleet.GuildSample{{GuildID: "1", Node: "n0", EventAgeP99: time.Second}})
	a := &Autoscaler{Client: cl, Clock: clocktesting.NewFakePassiveClock(time.Now()), Recorder: events.NewFakeRecorder(10), Stats: mem}
	if err := a.Round(context.Background()); err != nil {
		t.Fatal(err)
	}
	var got concordv1.ConcordCluster
	_ = cl.Get(context.Background(), client.ObjectKeyFromObject(c), &got)
	if *got.Spec.Roles.Guild.Replicas != 4 {
		t.Fatalf("guild replicas = %d, want 4 (bounded by MaxReplicas)", *got.Spec.Roles.Guild.Replicas)
	}
}
