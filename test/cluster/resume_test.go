//go:build integration

package cluster

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/concord-chat/concord/internal/gwtest"
	"github.com/concord-chat/concord/runtime/adapters/registry"
)

// TestResumeOnOtherGatewayNode is the phone changing networks behind a
// load balancer that picks the other node: a client identifies on
// gateway-1, its TCP connection drops without a close frame, messages are
// posted meanwhile, and it RESUMEs on gateway-2. gateway-2 takes the
// session from gateway-1 and answers with the missed MESSAGE_CREATEs in
// order, then RESUMED, the sequence numbers running on without a gap
// across both connections; later messages arrive on gateway-2, and
// gateway-1 no longer holds the session. A RESUME with another user's
// token takes nothing, an unknown session gets op 9, and once the node
// holding the session is killed a RESUME elsewhere gets op 9, as before
// takeovers (the client identifies again).
func TestResumeOnOtherGatewayNode(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	env := setupCluster(t, ctx, "resume")
	common := env.nodeArgs("--data-dir="+t.TempDir(), "--log-level=info")
	core := startNode(t, "core-1", freeAddr(t), append([]string{"--roles=guild,api", "--grpc=" + freeAddr(t), "--worker=1"}, common...)...)
	// No --admin: the admin endpoints (and the takeover's) are on the
	// HTTP listener, as in `make run-cluster`.
	gw1 := startNode(t, "gateway-1", freeAddr(t), append([]string{"--roles=gateway", "--grpc=" + freeAddr(t), "--worker=2"}, common...)...)
	gw2 := startNode(t, "gateway-2", freeAddr(t), append([]string{"--roles=gateway", "--grpc=" + freeAddr(t), "--worker=3"}, common...)...)
	deadline := time.Now().Add(45 * time.Second)
	for _, p := range []*proc{core, gw1, gw2} {
		p.waitReady(t, deadline)
	}
	reg := env.registry(t)
	waitRing(t, watchRing(t, ctx, reg, registry.RoleGateway), 2)

	api := rest{addr: core.http, client: &http.Client{Timeout: 30 * time.Second}}
	owner := newUser(t, api, "res")
	other := register(t, api, "thief")
	guildID := createGuild(t, api, owner.token, "resumed")
	channel := firstChannel(t, api, owner.token, guildID)
	post := func(content string) string {
		t.Helper()
		var m struct {
			ID string `json:"id"`
		}
		api.must(t, owner.token, "POST", "/channels/"+channel+"/messages", map[string]any{"content": content}, &m)
		return m.ID
	}
	// hasMessages reports whether frames hold every id of want.
	hasMessages := func(want []string) func([]dispatch) bool {
		return func(frames []dispatch) bool {
			got := map[string]bool{}
			for _, m := range messages(frames) {
				got[m.ID] = true
			}
			for _, id := range want {
				if !got[id] {
					return false
				}
			}
			return true
		}
	}

	c1, err := gwtest.Dial(gwtest.URL(gw1.http), owner.token, gwtest.Options{Name: "phone on gateway-1"})
	if err != nil {
		t.Fatal(err)
	}
	if err := c1.Await("GUILD_CREATE", 20*time.Second, func(f []dispatch) bool { return len(guildCreates(f, guildID)) > 0 }); err != nil {
		t.Fatal(err)
	}
	before := []string{post("before the cut")}
	if err := c1.Await("the first message", 20*time.Second, hasMessages(before)); err != nil {
		t.Fatal(err)
	}
	// The cut: no close frame, the session stays resumable on gateway-1.
	c1.Close()
	sid, seq, old := c1.SessionID(), c1.Seq(), c1.Frames()
	if sid == "" {
		t.Fatal("no session id in READY")
	}
	var missed []string
	for i := range 5 {
		missed = append(missed, post(fmt.Sprintf("missed %d", i)))
	}

	// The RESUME lands on the other node.
	c2, err := gwtest.Dial(gwtest.URL(gw2.http), owner.token, gwtest.Options{Name: "phone on gateway-2", Resume: &gwtest.Resume{SessionID: sid, Seq: seq}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c2.Close)
	if err := c2.Await("RESUMED and the missed messages", 20*time.Second, func(f []dispatch) bool {
		return c2.Ops(9) > 0 || (gwtest.HasType("RESUMED")(f) && hasMessages(missed)(f))
	}); err != nil {
		t.Fatal(err)
	}
	if c2.InvalidSession() {
		t.Fatalf("RESUME on gateway-2 answered INVALID_SESSION (d=%s)", c2.Last(9))
	}
	after := []string{post("after the resume 1"), post("after the resume 2")}
	if err := c2.Await("the messages posted after RESUMED", 20*time.Second, hasMessages(after)); err != nil {
		t.Fatal(err)
	}

	// One session across both connections: seqs 1, 2, 3, ... and every
	// message once, in the order posted.
	all := append(old, c2.Frames()...)
	if err := checkSeq(all); err != nil {
		t.Fatal(err)
	}
	want := append(append(append([]string(nil), before...), missed...), after...)
	got := messages(all)
	if len(got) != len(want) {
		t.Fatalf("%d MESSAGE_CREATEs, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i].ID != want[i] {
			t.Fatalf("MESSAGE_CREATE %d is %s (%q), want %s", i, got[i].ID, got[i].Content, want[i])
		}
	}
	if n := metricSum(t, gw2.http, `concord_gateway_session_takeovers_total{node="gateway-2",outcome="taken"}`); n != 1 {
		t.Fatalf("gateway-2 took %v sessions over, want 1", n)
	}
	if n := metricSum(t, gw1.http, "concord_gateway_sessions"); n != 0 {
		t.Fatalf("gateway-1 still holds %v sessions", n)
	}

	// Another user's token takes nothing: op 9, and the session stays
	// where it is, receiving.
	thief, err := gwtest.Dial(gwtest.URL(gw1.http), other, gwtest.Options{Name: "thief on gateway-1", Resume: &gwtest.Resume{SessionID: sid, Seq: 0}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(thief.Close)
	if err := thief.Await("INVALID_SESSION", 20*time.Second, func([]dispatch) bool { return thief.Ops(9) > 0 }); err != nil {
		t.Fatal(err)
	}
	if d := string(thief.Last(9)); d != "false" {
		t.Fatalf("wrong token: op 9 d=%s, want false", d)
	}
	// The holder refused it: the token was checked before anything moved.
	if n := metricSum(t, gw2.http, `concord_gateway_session_takeovers_total{node="gateway-2",outcome="refused"}`); n != 1 {
		t.Fatalf("gateway-2 refused %v takeovers, want 1", n)
	}
	still := []string{post("after the thief")}
	if err := c2.Await("a message after the refused takeover", 20*time.Second, hasMessages(still)); err != nil {
		t.Fatal(err)
	}

	// An unknown session: op 9 d:false.
	unknown, err := gwtest.Dial(gwtest.URL(gw1.http), owner.token, gwtest.Options{Name: "unknown session", Resume: &gwtest.Resume{SessionID: "00000000000000000000000000000000", Seq: 1}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(unknown.Close)
	if err := unknown.Await("INVALID_SESSION", 20*time.Second, func([]dispatch) bool { return unknown.Ops(9) > 0 }); err != nil {
		t.Fatal(err)
	}
	if n := metricSum(t, gw1.http, `concord_gateway_session_takeovers_total{node="gateway-1",outcome="unknown"}`); n != 1 {
		t.Fatalf("gateway-1 counted %v unknown sessions, want 1", n)
	}

	// The holder dies (kill -9) with the session: a RESUME on the other
	// node gets op 9 and the client identifies again there.
	c2.Close()
	gw2.kill()
	lost, err := gwtest.Dial(gwtest.URL(gw1.http), owner.token, gwtest.Options{Name: "after the holder died", Resume: &gwtest.Resume{SessionID: sid, Seq: c2.Seq()}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(lost.Close)
	if err := lost.Await("INVALID_SESSION", 20*time.Second, func([]dispatch) bool { return lost.Ops(9) > 0 }); err != nil {
		t.Fatal(err)
	}
	again := dial(t, "identified again", gw1.http, owner.token)
	again.await(t, "READY", 20*time.Second, gwtest.HasType("READY"))
}
