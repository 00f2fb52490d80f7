//go:build e2e

package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	concordv1 "github.com/concord-chat/concord/apis/v1alpha1"
	"github.com/concord-chat/concord/internal/gwtest"
	"github.com/concord-chat/concord/internal/resttest"
	"github.com/concord-chat/concord/operator/podadmin"
)

// world is a guild with an owner and a member, made through the router.
type world struct {
	owner, member     string // tokens
	guild, channel    string
	ownerID, memberID string
}

func register(t *testing.T, name string) (token, id string) {
	t.Helper()
	var out struct {
		Token  string `json:"token"`
		UserID string `json:"user_id"`
	}
	resttest.Call(t, router, "", "POST", "/auth/register", map[string]string{"username": name, "password": "correct horse " + name}, &out)
	if out.Token == "" || out.UserID == "" {
		t.Fatalf("register %s: empty token or id", name)
	}
	return out.Token, out.UserID
}

func newWorld(t *testing.T, tag string) world {
	t.Helper()
	tag += "-" + runID
	var w world
	w.owner, w.ownerID = register(t, "owner-"+tag)
	w.member, w.memberID = register(t, "member-"+tag)
	var g struct{ ID string }
	resttest.Call(t, router, w.owner, "POST", "/guilds", map[string]string{"name": "e2e " + tag}, &g)
	var ch struct{ ID string }
	resttest.Call(t, router, w.owner, "POST", "/guilds/"+g.ID+"/channels", map[string]any{"name": "general", "type": 0}, &ch)
	var inv struct{ Code string }
	resttest.Call(t, router, w.owner, "POST", "/channels/"+ch.ID+"/invites", map[string]any{}, &inv)
	resttest.Call(t, router, w.member, "POST", "/invites/"+inv.Code, map[string]any{}, &map[string]any{})
	w.guild, w.channel = g.ID, ch.ID
	return w
}

// post sends a message as token and returns its id.
func post(t *testing.T, token, channel, content string) string {
	t.Helper()
	var m struct{ ID string }
	resttest.Call(t, router, token, "POST", "/channels/"+channel+"/messages", map[string]string{"content": content}, &m)
	return m.ID
}

// hasMessage is an Await condition: a MESSAGE_CREATE with that content.
func hasMessage(content string) func([]gwtest.Frame) bool {
	return func(fs []gwtest.Frame) bool {
		for _, f := range fs {
			if f.Type != "MESSAGE_CREATE" {
				continue
			}
			var m struct{ Content string }
			if json.Unmarshal(f.D, &m) == nil && m.Content == content {
				return true
			}
		}
		return false
	}
}

// awaitOnEither waits for a message on a session that may have moved: the
// message arrived before the move (on old) or after it (on cur, by replay
// or live).
func awaitOnEither(old, cur *gwtest.Conn, content string) error {
	if old != cur && hasMessage(content)(old.Frames()) {
		return nil
	}
	return cur.Await("the message "+content, 30*time.Second, hasMessage(content))
}

func dial(t *testing.T, token, name string) *gwtest.Conn {
	t.Helper()
	c, err := gwtest.Dial(gwtest.URL(router), token, gwtest.Options{Name: name})
	if err != nil {
		t.Fatalf("dial the gateway through the GatewayPool's Service: %v", err)
	}
	t.Cleanup(c.Close)
	if err := c.Await("READY", 30*time.Second, gwtest.HasType("READY")); err != nil {
		t.Fatal(err)
	}
	return c
}

// TestEverythingReady: every pod of the suite's namespace is Ready, and the
// resources' Ready conditions are True with Degraded False; the
// GatewayPool's Service has an endpoint per serving pod.
func TestEverythingReady(t *testing.T) {
	ctx := context.Background()
	pods, err := kcs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) == 0 {
		t.Fatal("no pods")
	}
	for _, p := range pods.Items {
		if !podReady(&p) {
			t.Errorf("pod %s is not Ready:\n%s", p.Name, podReport(ctx))
		}
		for _, cs := range p.Status.ContainerStatuses {
			if cs.Image != nd.image {
				t.Errorf("pod %s runs %s, want the local image %s", p.Name, cs.Image, nd.image)
			}
		}
	}
	var c concordv1.ConcordCluster
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: clusterName}, &c); err != nil {
		t.Fatal(err)
	}
	for _, want := range []struct {
		typ    string
		status metav1.ConditionStatus
	}{{concordv1.ConditionReady, metav1.ConditionTrue}, {concordv1.ConditionDegraded, metav1.ConditionFalse}} {
		found := false
		for _, cond := range c.Status.Conditions {
			if cond.Type == want.typ {
				found = true
				if cond.Status != want.status {
					t.Errorf("ConcordCluster %s=%s (%s: %s), want %s", cond.Type, cond.Status, cond.Reason, cond.Message, want.status)
				}
			}
		}
		if !found {
			t.Errorf("ConcordCluster has no %s condition", want.typ)
		}
	}
	if c.Status.ReadyRoles == "" || strings.Split(c.Status.ReadyRoles, "/")[0] != strings.Split(c.Status.ReadyRoles, "/")[1] {
		t.Errorf("ConcordCluster readyRoles %q", c.Status.ReadyRoles)
	}
	var gw concordv1.GatewayPool
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: poolName}, &gw); err != nil {
		t.Fatal(err)
	}
	if gw.Status.ReadyReplicas != *gw.Spec.Replicas {
		t.Errorf("GatewayPool ready %d of %d", gw.Status.ReadyReplicas, *gw.Spec.Replicas)
	}
	eps, err := servingEndpoints(ctx, poolName)
	if err != nil {
		t.Fatal(err)
	}
	if len(eps) != int(*gw.Spec.Replicas) {
		t.Errorf("GatewayPool Service has %d ready endpoints (%v), want %d", len(eps), eps, *gw.Spec.Replicas)
	}
}

// servingEndpoints are the ready addresses of a Service's EndpointSlices.
func servingEndpoints(ctx context.Context, svc string) ([]string, error) {
	slices, err := kcs.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{LabelSelector: "kubernetes.io/service-name=" + svc})
	if err != nil {
		return nil, err
	}
	var out []string
	for _, s := range slices.Items {
		for _, e := range s.Endpoints {
			if e.Conditions.Ready != nil && *e.Conditions.Ready {
				out = append(out, e.Addresses...)
			}
		}
	}
	return out, nil
}

// TestGatewayThroughService: a raw gateway client identifies through the
// GatewayPool's Service, receives READY and its guild, and a message posted
// over REST (the api Service) reaches it.
func TestGatewayThroughService(t *testing.T) {
	w := newWorld(t, "raw")
	c := dial(t, w.member, "member")
	if err := c.Await("GUILD_CREATE", 30*time.Second, gwtest.HasType("GUILD_CREATE")); err != nil {
		t.Fatal(err)
	}
	post(t, w.owner, w.channel, "hello through the Service")
	if err := c.Await("the message", 30*time.Second, hasMessage("hello through the Service")); err != nil {
		t.Fatal(err)
	}
}

// gatewayPods are the pool's pods, by name.
func gatewayPods(ctx context.Context) (map[string]corev1.Pod, error) {
	pods, err := kcs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: concordv1.LabelOwner + "=" + poolName + "," + concordv1.LabelRole + "=" + concordv1.RoleGateway})
	if err != nil {
		return nil, err
	}
	out := map[string]corev1.Pod{}
	for _, p := range pods.Items {
		out[p.Name] = p
	}
	return out, nil
}

// sessionsOn asks a gateway pod's admin endpoint how many sessions it holds.
func sessionsOn(ctx context.Context, p corev1.Pod) (int64, error) {
	// The admin endpoints take the cluster's admin token, derived from
	// the server key as the operator derives it.
	token, err := podadmin.ClusterToken(ctx, k8s, ns, clusterName)
	if err != nil {
		return 0, err
	}
	var st struct{ Sessions int64 }
	status, raw, err := resttest.Do(ctx, nil, http.MethodGet, "http://"+p.Status.PodIP+":9090/admin/drain", "Bearer "+token, nil, &st)
	if err != nil {
		return 0, err
	}
	if status != http.StatusOK {
		return 0, fmt.Errorf("GET /admin/drain on %s: %d %s", p.Name, status, raw)
	}
	return st.Sessions, nil
}

// spread dials sessions as token until every serving gateway pod holds
// more sessions than before it started (the Service balances connections
// at random; a pod's count also holds earlier tests' sessions, resumable
// for a while after they closed), and returns them.
func spread(t *testing.T, ctx context.Context, token string) []*gwtest.Conn {
	t.Helper()
	counts := func() map[string]int64 {
		pods, err := gatewayPods(ctx)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]int64{}
		for _, p := range pods {
			if p.DeletionTimestamp != nil || !podReady(&p) {
				continue
			}
			n, err := sessionsOn(ctx, p)
			if err != nil {
				t.Fatal(err)
			}
			out[p.Name] = n
		}
		return out
	}
	base := counts()
	var conns []*gwtest.Conn
	for i := 0; i < 40; i++ {
		conns = append(conns, dial(t, token, fmt.Sprintf("session-%d", i)))
		all := true
		for name, n := range counts() {
			if n <= base[name] {
				all = false
			}
		}
		if all && len(conns) >= 2 {
			return conns
		}
	}
	t.Fatalf("40 sessions through the Service and a gateway pod still holds none of them")
	return nil
}

// follow keeps a session alive across a drain the way a bot library does:
// on op 7 (RECONNECT) it reconnects through the Service and RESUMEs. It
// returns the session's connection after the move (or the same one when
// its pod did not drain), failing when a RESUME was refused.
func follow(t *testing.T, c *gwtest.Conn, token string, moved func() bool) *gwtest.Conn {
	t.Helper()
	err := c.Await("RECONNECT or the end of the drain", 3*time.Minute, func([]gwtest.Frame) bool {
		return c.Ops(7) > 0 || moved()
	})
	if err != nil && c.Ops(7) == 0 {
		t.Fatal(err)
	}
	if c.Ops(7) == 0 {
		return c
	}
	id, seq := c.SessionID(), c.Seq()
	c.Close()
	// Like a bot library, resume again when the connection ends before
	// RESUMED without INVALID_SESSION: until every kube-proxy rule has
	// caught up with the endpoints, a new connection can still reach the
	// draining pod, which closes it (1001).
	deadline := time.Now().Add(time.Minute)
	for attempt := 1; ; attempt++ {
		r, err := gwtest.Dial(gwtest.URL(router), token, gwtest.Options{Name: "resumed", Resume: &gwtest.Resume{SessionID: id, Seq: seq}})
		if err == nil {
			if _, _, err = r.Next("RESUMED", 30*time.Second, nil); err == nil {
				t.Cleanup(r.Close)
				if attempt > 1 {
					t.Logf("session %s resumed at attempt %d", id, attempt)
				}
				return r
			}
			r.Close()
			if r.InvalidSession() {
				t.Fatalf("session %s: RESUME refused with INVALID_SESSION: %v", id, err)
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("session %s was not resumed: %v", id, err)
		}
		t.Logf("resume %s, attempt %d: %v", id, attempt, err)
		time.Sleep(200 * time.Millisecond * time.Duration(attempt)) // a client's backoff between reconnects
	}
}

// TestScaleDownResumes: with sessions on both gateway pods, the GatewayPool
// is scaled from two to one. The operator drains one pod: its sessions get
// op 7, RESUME through the Service onto the other pod (RESUMED, not a new
// READY), and a message posted while they move reaches every session.
func TestScaleDownResumes(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t, "scale")
	conns := spread(t, ctx, w.member)
	before, err := gatewayPods(ctx)
	if err != nil {
		t.Fatal(err)
	}
	setReplicas(t, ctx, 1)
	t.Cleanup(func() { setReplicas(t, context.Background(), 2) })

	gone := func() bool {
		pods, err := gatewayPods(ctx)
		if err != nil {
			return false
		}
		for name := range before {
			if _, ok := pods[name]; !ok {
				return true
			}
		}
		return false
	}
	post(t, w.owner, w.channel, "during the drain")
	moved := 0
	olds := append([]*gwtest.Conn(nil), conns...)
	for i, c := range conns {
		r := follow(t, c, w.member, gone)
		if r != c {
			moved++
		}
		conns[i] = r
	}
	if moved == 0 {
		t.Fatal("no session received op 7 although both pods held sessions")
	}
	for i, c := range conns {
		if err := awaitOnEither(olds[i], c, "during the drain"); err != nil {
			t.Fatal(err)
		}
	}
	post(t, w.owner, w.channel, "after the drain")
	for _, c := range conns {
		if err := c.Await("the message posted after the drain", 30*time.Second, hasMessage("after the drain")); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("%d of %d sessions moved by RESUME", moved, len(conns))
}

func setReplicas(t *testing.T, ctx context.Context, n int32) {
	t.Helper()
	patch := []byte(fmt.Sprintf(`{"spec":{"replicas":%d}}`, n))
	gw := &concordv1.GatewayPool{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: poolName}}
	if err := k8s.Patch(ctx, gw, client.RawPatch(types.MergePatchType, patch)); err != nil {
		t.Fatalf("scale GatewayPool to %d: %v", n, err)
	}
	if n == 2 {
		if err := awaitReadyReplicas(ctx, n); err != nil {
			t.Error(err)
		}
	}
}

func awaitReadyReplicas(ctx context.Context, n int32) error {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	for {
		var gw concordv1.GatewayPool
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: poolName}, &gw); err == nil &&
			gw.Status.ReadyReplicas == n && gw.Status.DrainingPods == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("GatewayPool not back to %d ready replicas:\n%s", n, podReport(context.Background()))
		case <-time.After(time.Second):
		}
	}
}

// TestEvictionDrains: the Eviction API (what kubectl drain calls) evicts
// one gateway pod while sessions are on both; a second eviction while it is
// going is refused with 429 by the pool's PodDisruptionBudget; the evicted
// pod's preStop hook holds it up while the operator drains it, so its
// sessions get op 7 and RESUME on the other pod, and the pool is back to
// two serving pods.
func TestEvictionDrains(t *testing.T) {
	ctx := context.Background()
	if err := awaitReadyReplicas(ctx, 2); err != nil {
		t.Fatal(err)
	}
	w := newWorld(t, "evict")
	conns := spread(t, ctx, w.member)
	pods, err := gatewayPods(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for n := range pods {
		names = append(names, n)
	}
	if len(names) != 2 {
		t.Fatalf("gateway pods %v", names)
	}
	evict := func(name string) error {
		return kcs.PolicyV1().Evictions(ns).Evict(ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}})
	}
	if err := evict(names[0]); err != nil {
		t.Fatalf("evict %s: %v", names[0], err)
	}
	err = evict(names[1])
	if err == nil {
		t.Fatalf("a second gateway pod was evicted while %s was going: the PodDisruptionBudget did not hold", names[0])
	}
	if !apierrors.IsTooManyRequests(err) {
		t.Fatalf("second eviction: %v, want 429 from the PodDisruptionBudget", err)
	}
	gone := func() bool {
		_, err := kcs.CoreV1().Pods(ns).Get(ctx, names[0], metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	}
	post(t, w.owner, w.channel, "during the eviction")
	moved := 0
	olds := append([]*gwtest.Conn(nil), conns...)
	for i, c := range conns {
		r := follow(t, c, w.member, gone)
		if r != c {
			moved++
		}
		conns[i] = r
	}
	if moved == 0 {
		t.Fatalf("no session on the evicted pod %s received op 7: it stopped without draining", names[0])
	}
	for i, c := range conns {
		if err := awaitOnEither(olds[i], c, "during the eviction"); err != nil {
			t.Fatal(err)
		}
	}
	if err := awaitReadyReplicas(ctx, 2); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d of %d sessions moved by RESUME off the evicted pod", moved, len(conns))
}
