//go:build e2e

package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	concordv1 "github.com/concord-chat/concord/apis/v1alpha1"
	"github.com/concord-chat/concord/runtime/domain/live/livetest"
	"github.com/concord-chat/concord/runtime/domain/live/moderation"
)

// TestLiveStream: a live stream through the live roles' Services, as
// viewers and the player's backend would use them: the creator (an
// account of the chat API) creates a stream and posts comments through
// the live-api Service; a viewer watching over SSE through the
// live-gateway Service sees the stream's state and each comment in order,
// its SSE id equal to the comment's seq, and the comments reached its
// gateway through the live-relay pods (their copy counter grew: the
// operator runs the router and gateways on the relay tree); one more
// viewer opening the stream afterwards gets the comments as its snapshot
// (the router filled the recent cache in Redis, which every live-gateway
// pod reads).
func TestLiveStream(t *testing.T) {
	ctx := context.Background()
	api, err := serviceAddr(ctx, clusterName+"-live-api")
	if err != nil {
		t.Fatal(err)
	}
	gw, err := serviceAddr(ctx, clusterName+"-live-gateway")
	if err != nil {
		t.Fatal(err)
	}
	e := livetest.Remote(t, "http://"+api, livetest.RemoteRoles{})
	creator := livetest.Register("http://" + router)(t)
	s := e.CreateStream(creator, "e2e "+runID)

	v := livetest.Watch(t, "http://"+gw, s.ID, livetest.Auth(creator.Token, ""), "")
	st := v.Next(time.Minute, "state")
	var state struct{ State string }
	if err := json.Unmarshal(st.Data, &state); err != nil || state.State != "live" {
		t.Fatalf("state event %s, want live (%v)", st.Data, err)
	}
	relays := relayPods(t, ctx)
	before := relayCopies(t, relays)
	var posted []livetest.Comment
	for i := range 5 {
		posted = append(posted, e.Post(creator, s.ID, fmt.Sprintf("comment %d", i), int64(i*1000)))
	}
	for i, p := range posted {
		ev := v.Next(time.Minute, "comment")
		var c livetest.Comment
		if err := json.Unmarshal(ev.Data, &c); err != nil {
			t.Fatalf("comment event %s: %v", ev.Data, err)
		}
		if c.ID != p.ID || c.Text != p.Text || ev.ID != strconv.FormatInt(p.Seq, 10) {
			t.Fatalf("comment %d on the live-gateway Service: id %s seq %s %q, want id %s seq %d %q", i, c.ID, ev.ID, c.Text, p.ID, p.Seq, p.Text)
		}
	}
	if after := relayCopies(t, relays); sum(after) <= sum(before) {
		t.Fatalf("live-relay copies %v -> %v: the comments did not travel through the relay pods", before, after)
	}
	late := livetest.Watch(t, "http://"+gw, s.ID, nil, "")
	late.Next(time.Minute, "state")
	snap := late.Comments(len(posted), time.Minute)
	for i, c := range snap {
		if c.ID != posted[i].ID {
			t.Fatalf("late viewer's snapshot[%d] is %s, want %s", i, c.ID, posted[i].ID)
		}
	}
}

// TestLiveModerationAndRelayFailover: the live-moderation pod scores every
// comment with the classifier shipped in the image and retracts an
// offensive one, which a viewer on the live-gateway Service sees as a
// retract event with the classifier's reason; then the relay pod that owns
// the stream (the one whose copies grew) is deleted as a rolling update or
// an eviction would: comments posted meanwhile still reach the viewer, in
// order and once each, and once the Deployment has replaced the pod the
// stream's comments go through the relay pods again.
func TestLiveModerationAndRelayFailover(t *testing.T) {
	ctx := context.Background()
	api, err := serviceAddr(ctx, clusterName+"-live-api")
	if err != nil {
		t.Fatal(err)
	}
	gw, err := serviceAddr(ctx, clusterName+"-live-gateway")
	if err != nil {
		t.Fatal(err)
	}
	register := livetest.Register("http://" + router)
	e := livetest.Remote(t, "http://"+api, livetest.RemoteRoles{NewUser: register})
	creator, fan, troll := register(t), register(t), register(t)
	s := e.CreateStream(creator, "moderated "+runID)
	v := livetest.Watch(t, "http://"+gw, s.ID, nil, "")
	v.Next(time.Minute, "state")

	relays := relayPods(t, ctx)
	before := relayCopies(t, relays)
	c := e.Post(fan, s.ID, "what a great stream, thanks!", 0)
	if got := v.Comments(1, time.Minute); got[0].ID != c.ID {
		t.Fatalf("viewer got %+v, want %s", got[0], c.ID)
	}
	after := relayCopies(t, relays)
	owner := ""
	for name, n := range after {
		if n > before[name] {
			owner = name
		}
	}
	if owner == "" {
		t.Fatalf("live-relay copies %v -> %v: the comment did not travel through a relay pod", before, after)
	}

	bad := e.Post(troll, s.ID, "shut up you stupid moron", 1000)
	if got := v.Comments(1, time.Minute); got[0].ID != bad.ID {
		t.Fatalf("viewer got %+v, want %s", got[0], bad.ID)
	}
	ev := v.Next(time.Minute, "retract")
	var rt struct {
		CommentID string `json:"comment_id"`
		Reason    string `json:"reason"`
	}
	if err := json.Unmarshal(ev.Data, &rt); err != nil || rt.CommentID != bad.ID || rt.Reason != moderation.Reason {
		t.Fatalf("retract %s (%v), want %s with reason %q from the live-moderation pod", ev.Data, err, bad.ID, moderation.Reason)
	}

	// The owner relay goes as Kubernetes takes pods away (SIGTERM, grace).
	if err := kcs.CoreV1().Pods(ns).Delete(ctx, owner, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete relay pod %s: %v", owner, err)
	}
	deleted := time.Now()
	var posted []livetest.Comment
	for i := range 3 {
		posted = append(posted, e.Post(e.NewUser(), s.ID, fmt.Sprintf("after the relay went %d", i), int64(2000+i*1000)))
	}
	got := v.Comments(len(posted), 2*time.Minute)
	for i := range posted {
		if got[i].ID != posted[i].ID {
			t.Fatalf("after deleting relay %s the viewer got %v, want %v in order", owner, ids(got), ids(posted))
		}
	}
	t.Logf("relay pod %s deleted: the viewer had the %d comments posted meanwhile %s later", owner, len(posted), time.Since(deleted).Round(time.Millisecond))

	// The Deployment's replacement joins; the path is the relay tree again.
	deadline := time.Now().Add(3 * time.Minute)
	for {
		relays = relayPods(t, ctx)
		if len(relays) == 2 && !hasPod(relays, owner) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("live-relay pods %v: want 2 ready without %s\n%s", podNames(relays), owner, podReport(ctx))
		}
		time.Sleep(time.Second) // polling the API, as kubectl get -w would
	}
	before = relayCopies(t, relays)
	last := e.Post(fan, s.ID, "back on the relay tree", 6000)
	if got := v.Comments(1, time.Minute); got[0].ID != last.ID {
		t.Fatalf("viewer got %+v after the replacement relay, want %s (no duplicates before it)", got[0], last.ID)
	}
	if after := relayCopies(t, relays); sum(after) <= sum(before) {
		t.Fatalf("live-relay copies %v -> %v after the replacement: the comment did not travel through the relay pods", before, after)
	}
}

// relayPods are the cluster's ready live-relay pods that are not going.
func relayPods(t *testing.T, ctx context.Context) []corev1.Pod {
	t.Helper()
	pods, err := kcs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{
		LabelSelector: concordv1.LabelCluster + "=" + clusterName + "," + concordv1.LabelRole + "=" + concordv1.RoleLiveRelay})
	if err != nil {
		t.Fatalf("list live-relay pods: %v", err)
	}
	var out []corev1.Pod
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil && podReady(&p) {
			out = append(out, p)
		}
	}
	if len(out) == 0 {
		t.Fatalf("no ready live-relay pod\n%s", podReport(ctx))
	}
	return out
}

// relayCopies reads concord_live_relay_copies_total (messages a relay
// node copied to its subscribers) from each pod's admin endpoint.
func relayCopies(t *testing.T, pods []corev1.Pod) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	for _, p := range pods {
		out[p.Name] = livetest.Metric(t, "http://"+p.Status.PodIP+":9090", "concord_live_relay_copies_total")
	}
	return out
}

func sum(m map[string]float64) float64 {
	var s float64
	for _, v := range m {
		s += v
	}
	return s
}

func hasPod(pods []corev1.Pod, name string) bool {
	for _, p := range pods {
		if p.Name == name {
			return true
		}
	}
	return false
}

func podNames(pods []corev1.Pod) []string {
	out := make([]string, len(pods))
	for i, p := range pods {
		out[i] = p.Name
	}
	return out
}

func ids(cs []livetest.Comment) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.ID
	}
	return out
}
