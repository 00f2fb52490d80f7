//go:build integration

package cluster

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/concord-chat/concord/internal/gwtest"
	"github.com/concord-chat/concord/internal/resttest"
	"github.com/concord-chat/concord/internal/topology"
	"github.com/concord-chat/concord/runtime/domain/live/livetest"
	"github.com/concord-chat/concord/test/voice/voiceclient"
)

// TestBalancedTopology drives internal/topology's cluster — two gateway
// nodes and two api nodes behind HAProxy, two guild nodes, two data
// nodes, a voice node and the live-comment roles, the shape `make run-cluster` has — through
// its one public address, as clients of a deployment do: a RESUME after
// a cut that the balancer sends to the other gateway node, webhook
// message routes by token, a voice join, a live stream with a comment
// over server-sent events, and 2,000 gateway sessions from 200 client
// addresses.
func TestBalancedTopology(t *testing.T) {
	cass := needEnv(t, "CONCORD_CASSANDRA", "run `make test-deps` and source ~/.cache/concord/test-env.sh")
	redis := os.Getenv("CONCORD_TEST_REDIS")
	if redis == "" {
		redis = needEnv(t, "CONCORD_REDIS", "run `make test-deps` and source ~/.cache/concord/test-env.sh (CONCORD_TEST_REDIS)")
	}
	kafka := kafkaAddr(t)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	b, err := topology.StartBackends(ctx, cass, "concord_balanced")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	c, err := topology.Start(ctx, b, topology.Options{
		FrontFlags: []string{"--redis=redis://" + redis + "?prefix=concord-balanced-" + strconv.FormatUint(rand.Uint64(), 36) + ":"},
		Voice:      true,
		Live:       true,
		Kafka:      kafka,
		Redis:      redis,
		Verbose:    os.Getenv("CONCORD_TEST_VERBOSE") != "",
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(c.Logs())
		}
		c.Close()
	})
	lb := &front{addr: c.Front, admin: c.Admin, client: &http.Client{Timeout: 20 * time.Second}}

	t.Run("ResumeOnTheOtherGatewayNode", func(t *testing.T) { testResumeOtherNode(t, lb) })
	t.Run("WebhookMessagesByToken", func(t *testing.T) { testWebhooksByToken(t, lb) })
	t.Run("VoiceJoin", func(t *testing.T) { testVoiceJoin(t, lb, c.VoiceCA()) })
	t.Run("LiveStream", func(t *testing.T) { testLiveStream(t, lb) })
	t.Run("SessionsFromManyAddresses", func(t *testing.T) { testManyAddresses(t, lb, 2000, 200) })
}

// front is a client of the cluster's public address.
type front struct {
	addr   string
	admin  topology.Admin // the balancer's runtime API
	client *http.Client
}

// do sends a REST request through the balancer.
func (f *front) do(t *testing.T, token, method, path string, body, out any) (int, []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	status, raw, err := resttest.Do(ctx, f.client, method, "http://"+f.addr+"/api/v10"+path, token, body, out)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	return status, raw
}

// must is do for steps that must answer 2xx.
func (f *front) must(t *testing.T, token, method, path string, body, out any) {
	t.Helper()
	if status, raw := f.do(t, token, method, path, body, out); status/100 != 2 {
		t.Fatalf("%s %s = %d %s", method, path, status, raw)
	}
}

// account registers a user through the balancer and returns its token
// and id.
func (f *front) account(t *testing.T, prefix string) (token, id string) {
	t.Helper()
	var reg struct {
		Token  string `json:"token"`
		UserID string `json:"user_id"`
	}
	f.must(t, "", "POST", "/auth/register", map[string]any{"username": fmt.Sprintf("%s_%x", prefix, rand.Uint32()), "password": "correct-horse-1"}, &reg)
	if reg.Token == "" || reg.UserID == "" {
		t.Fatalf("register: no token or user id: %+v", reg)
	}
	return reg.Token, reg.UserID
}

// guild creates a guild of token's user and returns its id and its
// first text channel.
func (f *front) guild(t *testing.T, token, name string) (guildID, channelID string) {
	t.Helper()
	var g struct {
		ID string `json:"id"`
	}
	f.must(t, token, "POST", "/guilds", map[string]any{"name": name}, &g)
	var chans []struct {
		ID   string `json:"id"`
		Type int    `json:"type"`
	}
	f.must(t, token, "GET", "/guilds/"+g.ID+"/channels", nil, &chans)
	for _, ch := range chans {
		if ch.Type == 0 {
			return g.ID, ch.ID
		}
	}
	t.Fatalf("guild %s has no text channel: %+v", g.ID, chans)
	return "", ""
}

// gatewayConns is HAProxy's count of open connections per gateway node.
func gatewayConns(t *testing.T, lb *front) map[string]int {
	t.Helper()
	n, err := lb.admin.Conns("gateways")
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// awaitGatewayConns waits until HAProxy counts base plus more open
// connections on each gateway node: a connection closed on one side
// leaves its count a moment later.
func awaitGatewayConns(t *testing.T, lb *front, base, more map[string]int) {
	t.Helper()
	want := map[string]int{}
	for k, v := range more {
		want[k] = base[k] + v
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := gatewayConns(t, lb)
		ok := true
		for k, v := range want {
			if got[k] != v {
				ok = false
			}
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("HAProxy's open connections per gateway node: %v, want %v", got, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// testResumeOtherNode: a session identified on gateway-1 loses its
// socket without a close frame (a phone changing networks); the client
// resumes through the balancer, which — gateway-1 draining — sends it to
// gateway-2. The session resumes there: RESUMED, the message posted
// while it was away replayed in order, no op 9.
func testResumeOtherNode(t *testing.T, lb *front) {
	token, _ := lb.account(t, "resumer")
	_, channel := lb.guild(t, token, "resume")
	setState := func(server, state string) {
		t.Helper()
		if err := lb.admin.SetServerState("gateways/"+server, state); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		_ = lb.admin.SetServerState("gateways/gateway-1", "ready")
		_ = lb.admin.SetServerState("gateways/gateway-2", "ready")
	})
	// Connections of other clients (a bot of TestRunCluster's, say) stay.
	base := gatewayConns(t, lb)
	setState("gateway-2", "drain")
	conn, err := gwtest.Dial(gwtest.URL(lb.addr), token, gwtest.Options{Name: "resumer"})
	if err != nil {
		t.Fatal(err)
	}
	if err := conn.Await("READY", 15*time.Second, gwtest.HasType("READY")); err != nil {
		t.Fatal(err)
	}
	awaitGatewayConns(t, lb, base, map[string]int{"gateway-1": 1, "gateway-2": 0})
	var before struct {
		ID string `json:"id"`
	}
	lb.must(t, token, "POST", "/channels/"+channel+"/messages", map[string]any{"content": "before the cut"}, &before)
	if _, _, err := conn.Next("MESSAGE_CREATE", 10*time.Second, func(d json.RawMessage) bool { return strings.Contains(string(d), before.ID) }); err != nil {
		t.Fatal(err)
	}
	session, seq := conn.SessionID(), conn.Seq()

	// The balancer's next gateway connection goes to gateway-2.
	setState("gateway-2", "ready")
	setState("gateway-1", "drain")
	conn.Close()
	var missed struct {
		ID string `json:"id"`
	}
	lb.must(t, token, "POST", "/channels/"+channel+"/messages", map[string]any{"content": "while away"}, &missed)

	resumed, err := gwtest.Dial(gwtest.URL(lb.addr), token, gwtest.Options{Name: "resumed", Resume: &gwtest.Resume{SessionID: session, Seq: seq}})
	if err != nil {
		t.Fatal(err)
	}
	defer resumed.Close()
	awaitGatewayConns(t, lb, base, map[string]int{"gateway-1": 0, "gateway-2": 1})
	err = resumed.Await("RESUMED with the missed message", 15*time.Second, func(fs []gwtest.Frame) bool {
		if resumed.Ops(9) > 0 {
			return true // failed: the check below says so
		}
		got := false
		for _, f := range fs {
			if f.Type == "MESSAGE_CREATE" && strings.Contains(string(f.D), missed.ID) {
				got = true
			}
			if f.Type == "RESUMED" {
				return got
			}
		}
		return false
	})
	if err != nil || resumed.InvalidSession() {
		var types []string
		for _, f := range resumed.Frames() {
			types = append(types, f.Type)
		}
		t.Fatalf("resume on gateway-2 of a session of gateway-1: %v; op 9: %v, close code %d, dispatches %v",
			err, resumed.InvalidSession(), resumed.CloseCode(), types)
	}
	// Replayed in order: the missed message has the sequence after the
	// last one the client saw.
	for _, f := range resumed.Frames() {
		if f.Type == "MESSAGE_CREATE" && strings.Contains(string(f.D), missed.ID) && f.Seq != seq+1 {
			t.Errorf("missed MESSAGE_CREATE replayed with seq %d, want %d", f.Seq, seq+1)
		}
	}
}

// testWebhooksByToken: a webhook's message routes, which carry no
// channel id and no Authorization, work through either api node:
// execute with ?wait=true, then GET, PATCH and DELETE the message by the
// webhook's token, each more than once so round robin reaches both api
// nodes.
func testWebhooksByToken(t *testing.T, lb *front) {
	token, _ := lb.account(t, "hooker")
	_, channel := lb.guild(t, token, "hooks")
	var hook struct {
		ID    string `json:"id"`
		Token string `json:"token"`
	}
	lb.must(t, token, "POST", "/channels/"+channel+"/webhooks", map[string]any{"name": "cluster hook"}, &hook)
	if hook.Token == "" {
		t.Fatalf("webhook without token: %+v", hook)
	}
	byToken := "/webhooks/" + hook.ID + "/" + hook.Token
	for i := range 2 {
		var msg struct {
			ID      string `json:"id"`
			Content string `json:"content"`
		}
		content := fmt.Sprintf("hook message %d", i)
		lb.must(t, "", "POST", byToken+"?wait=true", map[string]any{"content": content}, &msg)
		if msg.ID == "" || msg.Content != content {
			t.Fatalf("execute ?wait=true answered %+v", msg)
		}
		var history []struct {
			ID string `json:"id"`
		}
		lb.must(t, token, "GET", "/channels/"+channel+"/messages?limit=10", nil, &history)
		if len(history) == 0 || history[0].ID != msg.ID {
			t.Errorf("channel history's newest message %v, want the webhook's %s", history, msg.ID)
		}
		for range 2 {
			var got struct {
				ID string `json:"id"`
			}
			if status, raw := lb.do(t, "", "GET", byToken+"/messages/"+msg.ID, nil, &got); status != 200 || got.ID != msg.ID {
				t.Errorf("GET webhook message %s = %d %s", msg.ID, status, raw)
			}
		}
		edited := content + " (edited)"
		var patched struct {
			Content string `json:"content"`
		}
		if status, raw := lb.do(t, "", "PATCH", byToken+"/messages/"+msg.ID, map[string]any{"content": edited}, &patched); status != 200 || patched.Content != edited {
			t.Errorf("PATCH webhook message %s = %d %s", msg.ID, status, raw)
		}
		if status, raw := lb.do(t, "", "DELETE", byToken+"/messages/"+msg.ID, nil, nil); status != 204 {
			t.Errorf("DELETE webhook message %s = %d %s", msg.ID, status, raw)
		}
		if status, _ := lb.do(t, token, "GET", "/channels/"+channel+"/messages/"+msg.ID, nil, nil); status != 404 {
			t.Errorf("deleted webhook message %s still readable: %d", msg.ID, status)
		}
	}
}

// testVoiceJoin: op 4 through the balancer to a gateway node is answered
// with VOICE_STATE_UPDATE and VOICE_SERVER_UPDATE naming the voice node,
// whose voice gateway then takes the client: Identify, Ready, IP
// discovery over UDP and the session description. ca is the PEM file of
// the CA the voice gateway's certificate comes from.
func testVoiceJoin(t *testing.T, lb *front, ca string) {
	token, userID := lb.account(t, "talker")
	guildID, _ := lb.guild(t, token, "voice")
	var vc struct {
		ID string `json:"id"`
	}
	lb.must(t, token, "POST", "/guilds/"+guildID+"/channels", map[string]any{"name": "Lounge", "type": 2}, &vc)
	conn, err := gwtest.Dial(gwtest.URL(lb.addr), token, gwtest.Options{Name: "talker"})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := conn.Await("READY", 15*time.Second, gwtest.HasType("READY")); err != nil {
		t.Fatal(err)
	}
	if err := conn.Send(map[string]any{"op": 4, "d": map[string]any{"guild_id": guildID, "channel_id": vc.ID, "self_mute": false, "self_deaf": false}}); err != nil {
		t.Fatal(err)
	}
	f, _, err := conn.Next("VOICE_STATE_UPDATE", 15*time.Second, func(d json.RawMessage) bool {
		var s struct {
			UserID    string `json:"user_id"`
			ChannelID string `json:"channel_id"`
		}
		return json.Unmarshal(d, &s) == nil && s.UserID == userID && s.ChannelID == vc.ID
	})
	if err != nil {
		t.Fatal(err)
	}
	var state struct {
		SessionID string `json:"session_id"`
	}
	_ = json.Unmarshal(f.D, &state)
	f, _, err = conn.Next("VOICE_SERVER_UPDATE", 15*time.Second, nil)
	if err != nil {
		t.Fatal(err)
	}
	var server struct {
		Token    string  `json:"token"`
		GuildID  string  `json:"guild_id"`
		Endpoint *string `json:"endpoint"`
	}
	if err := json.Unmarshal(f.D, &server); err != nil || server.Endpoint == nil || *server.Endpoint == "" || server.Token == "" || server.GuildID != guildID {
		t.Fatalf("VOICE_SERVER_UPDATE %s: %v", f.D, err)
	}
	pem, err := os.ReadFile(ca)
	if err != nil {
		t.Fatalf("the voice node's dev CA: %v", err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(pem) {
		t.Fatalf("no certificate in %s", ca)
	}
	gid, _ := strconv.ParseUint(guildID, 10, 64)
	uid, _ := strconv.ParseUint(userID, 10, 64)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	vcl, err := voiceclient.Connect(ctx, voiceclient.Options{Endpoint: strings.TrimPrefix(*server.Endpoint, "wss://"), GuildID: gid, UserID: uid,
		SessionID: state.SessionID, Token: server.Token, TLS: &tls.Config{RootCAs: roots}})
	if err != nil {
		t.Fatalf("voice gateway %s: %v", *server.Endpoint, err)
	}
	defer vcl.Close()
	if vcl.Ready.SSRC == 0 || len(vcl.Key) == 0 {
		t.Fatalf("voice session without SSRC or key: ready %+v, key %d bytes", vcl.Ready, len(vcl.Key))
	}
}

// testLiveStream: a stream created through the balancer's /v1/streams
// (the live api), watched over server-sent events through it (the live
// gateway), gets a comment posted through it.
func testLiveStream(t *testing.T, lb *front) {
	base := "http://" + lb.addr
	e := livetest.Remote(t, base, livetest.RemoteRoles{NewUser: livetest.Register(base)})
	creator, viewer := e.NewUser(), e.NewUser()
	s := e.CreateStream(creator, "through the balancer")
	// As the web client watches: an EventSource, the token in the query.
	v := livetest.Watch(t, base, s.ID, nil, "token="+viewer.Token)
	// The stream is open once its state arrives; a comment posted after
	// it reaches the viewer live.
	v.Next(15*time.Second, "state")
	posted := e.Post(viewer, s.ID, "hello from behind HAProxy", 1200)
	got := v.Comments(1, 30*time.Second)
	if got[0].ID != posted.ID || got[0].Text != posted.Text {
		t.Fatalf("SSE comment %+v, want %+v", got[0], posted)
	}
	var page []livetest.Comment
	e.Eventually(30*time.Second, func() string {
		r := e.Do("GET", "/v1/streams/"+s.ID+"/comments?limit=10", "", nil)
		if r.Status != 200 {
			return fmt.Sprintf("scroll-back = %d %s", r.Status, r.Body)
		}
		r.JSON(t, &page)
		if len(page) != 1 || page[0].ID != posted.ID {
			return fmt.Sprintf("scroll-back %+v, want the one comment %s", page, posted.ID)
		}
		return ""
	})
}

// testManyAddresses opens sessions gateway sessions through the balancer
// from addrs client addresses (127.0.2.2 and up, as many clients behind
// their NATs), each of a user of its own address, and requires every one
// READY while all are open: the per-address connection cap is per
// client, not per balancer.
func testManyAddresses(t *testing.T, lb *front, sessions, addrs int) {
	type user struct {
		ip    net.IP
		token string
	}
	users := make([]user, addrs)
	var wg sync.WaitGroup
	errs := make(chan error, addrs)
	sem := make(chan struct{}, 20)
	for i := range users {
		ip := net.IPv4(127, 0, byte(2+i/250), byte(2+i%250))
		users[i].ip = ip
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{DialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: ip}}).DialContext}}
			defer client.CloseIdleConnections()
			var reg struct {
				Token string `json:"token"`
			}
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			status, raw, err := resttest.Do(ctx, client, "POST", "http://"+lb.addr+"/api/v10/auth/register", "",
				map[string]any{"username": fmt.Sprintf("crowd_%d_%x", i, rand.Uint32()), "password": "correct-horse-1"}, &reg)
			if err != nil || status != 200 || reg.Token == "" {
				errs <- fmt.Errorf("register from %s: %d %v %s", ip, status, err, raw)
				return
			}
			users[i].token = reg.Token
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var ready atomic.Int64
	failures := make(chan error, sessions)
	conns := make(chan *websocket.Conn, sessions)
	defer func() {
		close(conns)
		for c := range conns {
			c.Close()
		}
	}()
	deadline := time.Now().Add(3 * time.Minute)
	sem = make(chan struct{}, 100)
	var all sync.WaitGroup
	for i := range sessions {
		u := users[i%addrs]
		all.Add(1)
		go func() {
			defer all.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			c, err := readySession(ctx, lb.addr, u.ip, u.token, deadline)
			if err != nil {
				failures <- fmt.Errorf("session %d from %s: %w", i, u.ip, err)
				return
			}
			conns <- c
			ready.Add(1)
		}()
	}
	all.Wait()
	close(failures)
	var first []error
	n := 0
	for err := range failures {
		if len(first) < 5 {
			first = append(first, err)
		}
		n++
	}
	if n > 0 {
		t.Fatalf("%d of %d sessions from %d addresses READY; %d failed, the first: %v", ready.Load(), sessions, addrs, n, first)
	}
}

// readySession opens one gateway session from ip through the balancer
// and returns it once READY arrived; a goroutine then keeps it alive
// with heartbeats until ctx ends.
func readySession(ctx context.Context, addr string, ip net.IP, token string, deadline time.Time) (*websocket.Conn, error) {
	c, interval, err := gwtest.IdentifyFrom(ctx, gwtest.URL(addr), ip, token, gwtest.DefaultIntents, time.Until(deadline))
	if err != nil {
		return nil, err
	}
	go gwtest.KeepAlive(ctx, c, interval/2)
	return c, nil
}
