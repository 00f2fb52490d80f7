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

// TestLiveModeration: the live-moderation pod scores every comment with
// the classifier shipped in the image and retracts an offensive one, which
// a viewer on the live-gateway Service sees as a retract event with the
// classifier's reason.
func TestLiveModeration(t *testing.T) {
	ctx := context.Background()
	e, gw := liveEnv(t, ctx)
	creator, fan, troll := e.NewUser(), e.NewUser(), e.NewUser()
	s := e.CreateStream(creator, "moderated "+runID)
	v := livetest.Watch(t, "http://"+gw, s.ID, nil, "")
	v.Next(time.Minute, "state")

	c := e.Post(fan, s.ID, "what a great stream, thanks!", 0)
	bad := e.Post(troll, s.ID, "shut up you stupid moron", 1000)
	got := v.Comments(2, time.Minute)
	if got[0].ID != c.ID || got[1].ID != bad.ID {
		t.Fatalf("viewer got %v, want %s then %s", ids(got), c.ID, bad.ID)
	}
	ev := v.Next(time.Minute, "retract")
	var rt struct {
		CommentID string `json:"comment_id"`
		Reason    string `json:"reason"`
	}
	if err := json.Unmarshal(ev.Data, &rt); err != nil || rt.CommentID != bad.ID || rt.Reason != moderation.Reason {
		t.Fatalf("retract %s (%v), want %s with reason %q from the live-moderation pod", ev.Data, err, bad.ID, moderation.Reason)
	}
}

// TestLiveRelayFailover: four watched streams, their comments going
// through the relay pods; the relay pod owning the most of them (by the
// copies that grew) is deleted as a rolling update or an eviction would:
// comments posted meanwhile still reach every viewer, in order and once
// each. Once the Deployment's replacement is Ready it owns some of the
// streams (ownership is rendezvous hashing over the announced nodes: with
// four streams it owns none only one time in sixteen), and a comment on
// every stream still reaches its viewer through the relay pods.
func TestLiveRelayFailover(t *testing.T) {
	ctx := context.Background()
	e, gw := liveEnv(t, ctx)
	creator, fan := e.NewUser(), e.NewUser()
	type watched struct {
		s livetest.Stream
		v *livetest.Viewer
	}
	var streams []watched
	for i := range 4 {
		s := e.CreateStream(creator, fmt.Sprintf("relay failover %d %s", i, runID))
		v := livetest.Watch(t, "http://"+gw, s.ID, nil, "")
		v.Next(time.Minute, "state")
		streams = append(streams, watched{s, v})
	}
	relays := relayPods(t, ctx)
	if len(relays) < 2 {
		t.Fatalf("live-relay pods %v: the suite runs two", podNames(relays))
	}
	// Each stream's owner: the pod whose copies grew with its comment.
	owned := map[string]int{}
	for i, w := range streams {
		before := relayCopies(t, relays)
		c := e.Post(fan, w.s.ID, "before the relay goes", int64(i))
		if got := w.v.Comments(1, time.Minute); got[0].ID != c.ID {
			t.Fatalf("stream %d: viewer got %+v, want %s", i, got[0], c.ID)
		}
		after := relayCopies(t, relays)
		owner := ""
		for name, n := range after {
			if n > before[name] {
				owner = name
			}
		}
		if owner == "" {
			t.Fatalf("stream %d: live-relay copies %v -> %v: the comment did not travel through a relay pod", i, before, after)
		}
		owned[owner]++
	}
	victim := ""
	for name, n := range owned {
		if victim == "" || n > owned[victim] {
			victim = name
		}
	}

	// The owner relay goes as Kubernetes takes pods away (SIGTERM, grace).
	if err := kcs.CoreV1().Pods(ns).Delete(ctx, victim, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete relay pod %s: %v", victim, err)
	}
	deleted := time.Now()
	var posted [][]livetest.Comment
	for _, w := range streams {
		var cs []livetest.Comment
		for i := range 2 {
			cs = append(cs, e.Post(e.NewUser(), w.s.ID, fmt.Sprintf("after the relay went %d", i), int64(1000+i*1000)))
		}
		posted = append(posted, cs)
	}
	for i, w := range streams {
		got := w.v.Comments(len(posted[i]), 2*time.Minute)
		for j := range posted[i] {
			if got[j].ID != posted[i][j].ID {
				t.Fatalf("stream %d: after deleting relay %s the viewer got %v, want %v in order", i, victim, ids(got), ids(posted[i]))
			}
		}
	}
	t.Logf("relay pod %s (owner of %d of %d streams) deleted: every viewer had the comments posted meanwhile %s later",
		victim, owned[victim], len(streams), time.Since(deleted).Round(time.Millisecond))

	// The Deployment's replacement joins and takes its share of streams.
	deadline := time.Now().Add(3 * time.Minute)
	for {
		relays = relayPods(t, ctx)
		if len(relays) == 2 && !hasPod(relays, victim) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("live-relay pods %v: want 2 ready without %s\n%s", podNames(relays), victim, podReport(ctx))
		}
		time.Sleep(time.Second) // polling the API, as kubectl get -w would
	}
	before := relayCopies(t, relays)
	for i, w := range streams {
		last := e.Post(fan, w.s.ID, "with the replacement relay", 5000)
		if got := w.v.Comments(1, time.Minute); got[0].ID != last.ID {
			t.Fatalf("stream %d: viewer got %+v after the replacement relay %v joined, want %s (no duplicates before it)", i, got[0], podNames(relays), last.ID)
		}
	}
	if after := relayCopies(t, relays); sum(after) <= sum(before) {
		t.Fatalf("live-relay copies %v -> %v after the replacement: the comments did not travel through the relay pods", before, after)
	}
}

// liveEnv is the live-comments API on the live-api Service (accounts from
// the chat API through the ingress) and the live-gateway Service's address.
func liveEnv(t *testing.T, ctx context.Context) (*livetest.Env, string) {
	t.Helper()
	api, err := serviceAddr(ctx, clusterName+"-live-api")
	if err != nil {
		t.Fatal(err)
	}
	gw, err := serviceAddr(ctx, clusterName+"-live-gateway")
	if err != nil {
		t.Fatal(err)
	}
	return livetest.Remote(t, "http://"+api, livetest.RemoteRoles{NewUser: livetest.Register("http://" + router)}), gw
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
