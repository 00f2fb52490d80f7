//go:build integration && runcluster

package cluster

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/bwmarrin/discordgo"

	"github.com/concord-chat/concord/internal/logbuf"
	"github.com/concord-chat/concord/internal/topology"
)

// lbTransport sends discordgo's https://discord.com requests to the
// cluster's load balancer instead, unchanged otherwise.
type lbTransport struct{ host string }

func (rt lbTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.URL.Scheme, r.URL.Host, r.Host = "http", rt.host, rt.host
	return http.DefaultTransport.RoundTrip(r)
}

// TestRunCluster runs `make run-cluster`'s script (hack/run-cluster.sh:
// etcd x3, Cassandra, Kafka, Redis, 18 concord serve processes, HAProxy)
// on its own ports and a new state directory (so a keyspace of its own),
// points an unmodified discordgo bot at the URLs it prints, drains the
// gateway node the bot is on (HAProxy's readiness check takes it out; the
// bot resumes on the other node without losing a message), runs
// TestBalancedTopology's webhook, voice and live checks through the same
// address, then sends Ctrl-C and checks that every process is gone. It is heavy, so it has its own build tag:
//
//	go test -tags integration,runcluster -run TestRunCluster ./test/cluster/
func TestRunCluster(t *testing.T) {
	cass := needEnv(t, "CONCORD_CASSANDRA", "run `make test-deps` and source ~/.cache/concord/test-env.sh")
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	lb := freeAddr(t)
	// 63 ports from base, below Linux's ephemeral range (32768 and up),
	// where any process's outgoing connection could hold one, and below
	// the range the topology package hands its clusters' nodes (20000
	// and up; test packages run at once), above the kubelet's (10248-10259).
	base := 12000 + 100*rand.IntN(60)
	dir := t.TempDir()
	// The keyspace is the new state directory's own (cluster_<its
	// cluster-id>), dropped after the test.
	t.Cleanup(func() {
		if id, err := os.ReadFile(filepath.Join(dir, "cluster-id")); err == nil {
			dropKeyspace(t, cass, "cluster_"+strings.TrimSpace(string(id)))
		}
	})
	cmd := exec.Command("bash", filepath.Join(root, "hack/run-cluster.sh"))
	cmd.Env = append(os.Environ(), "CLUSTER_HTTP="+lb, "CLUSTER_PORTS="+strconv.Itoa(base), "CLUSTER_DIR="+dir,
		"CONCORD_BIN="+concordBinary(t))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr logbuf.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		// If the test failed before Ctrl-C: stop the script (and so the
		// cluster) the same way.
		_ = cmd.Process.Signal(syscall.SIGINT)
		select {
		case <-exited:
		case <-time.After(60 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		}
		if t.Failed() {
			t.Logf("--- run-cluster stderr ---\n%s", stderr.String())
		}
	})

	// The banner: REST API, Gateway, Dev token, then "Press Ctrl-C".
	banner := map[string]string{}
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	deadline := time.After(5 * time.Minute)
	for banner["done"] == "" {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("run-cluster ended before its banner:\n%s", stderr.String())
			}
			if k, v, ok := strings.Cut(strings.TrimSpace(l), ":"); ok {
				banner[k] = strings.Fields(v + " ")[0]
			}
			if strings.Contains(l, "Press Ctrl-C") {
				banner["done"] = "yes"
			}
		case <-deadline:
			t.Fatalf("no banner within 5 minutes:\n%s", stderr.String())
		}
	}
	go func() {
		for range lines {
		}
	}()
	if banner["REST API"] != "http://"+lb+"/api/v10" || banner["Gateway"] != "ws://"+lb+"/gateway" || banner["Dev token"] == "" {
		t.Fatalf("banner %v", banner)
	}

	// The dev user sets up a guild and a bot, through the balancer.
	api := rest{addr: lb, client: &http.Client{Timeout: 20 * time.Second}}
	dev := banner["Dev token"]
	var g, ch struct {
		ID string `json:"id"`
	}
	api.must(t, dev, "POST", "/guilds", map[string]any{"name": "run-cluster"}, &g)
	api.must(t, dev, "POST", "/guilds/"+g.ID+"/channels", map[string]any{"name": "general", "type": 0}, &ch)
	var app struct {
		ID    string `json:"id"`
		Token string `json:"token"`
	}
	api.must(t, dev, "POST", "/applications", map[string]any{"name": "rc-bot"}, &app)
	// MESSAGE_CONTENT is privileged: the owner turns it on.
	api.must(t, dev, "PATCH", "/applications/"+app.ID, map[string]any{"flags": 1 << 18}, nil)
	var inst struct {
		RoleID string `json:"role_id"`
	}
	api.must(t, dev, "POST", "/oauth2/authorize?client_id="+app.ID+"&scope=bot&permissions=3072",
		map[string]any{"guild_id": g.ID, "permissions": "3072", "authorize": true}, &inst)

	dg, err := discordgo.New("Bot " + app.Token)
	if err != nil {
		t.Fatal(err)
	}
	dg.Client = &http.Client{Transport: lbTransport{host: lb}}
	dg.ShouldRetryOnRateLimit = false
	dg.SyncEvents = true
	dg.Identify.Intents = discordgo.IntentsGuilds | discordgo.IntentsGuildMessages | discordgo.IntentMessageContent
	ready := make(chan *discordgo.Ready, 4)
	guilds := make(chan *discordgo.GuildCreate, 8)
	creates := make(chan *discordgo.MessageCreate, 64)
	resumed := make(chan *discordgo.Resumed, 4)
	dg.AddHandler(func(_ *discordgo.Session, e *discordgo.Ready) { ready <- e })
	dg.AddHandler(func(_ *discordgo.Session, e *discordgo.GuildCreate) { guilds <- e })
	dg.AddHandler(func(_ *discordgo.Session, e *discordgo.MessageCreate) { creates <- e })
	dg.AddHandler(func(_ *discordgo.Session, e *discordgo.Resumed) { resumed <- e })
	if err := dg.Open(); err != nil {
		t.Fatalf("discordgo open through %s: %v", lb, err)
	}
	t.Cleanup(func() { dg.Close() })
	wait := func(what string, f func() bool) {
		t.Helper()
		d := time.After(30 * time.Second)
		for !f() {
			select {
			case <-d:
				t.Fatalf("no %s within 30 s", what)
			case <-time.After(10 * time.Millisecond):
			}
		}
	}
	var r *discordgo.Ready
	wait("READY", func() bool {
		select {
		case r = <-ready:
			return true
		default:
			return false
		}
	})
	wait("GUILD_CREATE", func() bool {
		select {
		case e := <-guilds:
			return e.ID == g.ID
		default:
			return false
		}
	})
	// post sends as the dev user, waiting out the REST rate limit (5 per
	// 5 s per channel, shared by both api nodes through Redis) as a
	// client does: for the retry_after the 429 names.
	post := func(content string) string {
		t.Helper()
		for range 20 {
			var m struct {
				ID string `json:"id"`
			}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			status, raw, err := api.do(ctx, dev, "POST", "/channels/"+ch.ID+"/messages", map[string]any{"content": content}, &m)
			cancel()
			if err == nil && status == http.StatusOK {
				return m.ID
			}
			var rl struct {
				RetryAfter float64 `json:"retry_after"`
			}
			if err != nil || status != http.StatusTooManyRequests || json.Unmarshal(raw, &rl) != nil {
				t.Fatalf("post %q: status %d, err %v, body %s", content, status, err, raw)
			}
			time.Sleep(time.Duration(rl.RetryAfter*1000) * time.Millisecond)
		}
		t.Fatalf("post %q: still rate limited after 20 tries", content)
		return ""
	}
	next := func(what string) *discordgo.MessageCreate {
		t.Helper()
		select {
		case m := <-creates:
			return m
		case <-time.After(30 * time.Second):
			t.Fatalf("no MESSAGE_CREATE (%s) within 30 s", what)
			return nil
		}
	}
	id := post("ping")
	if m := next("ping"); m.ID != id || m.Content != "ping" {
		t.Fatalf("bot got %+v, want message %s", m.Message, id)
	}
	reply, err := dg.ChannelMessageSend(ch.ID, "pong")
	if err != nil {
		t.Fatalf("bot send through the balancer: %v", err)
	}
	if m := next("the bot's own reply"); m.ID != reply.ID {
		t.Fatalf("bot got %s, want its reply %s", m.ID, reply.ID)
	}

	// Drain the gateway node the bot is on into the other one: HAProxy
	// stops sending it new connections once its /readyz fails, the node
	// hands its sessions over and asks the bot to reconnect (op 7), and
	// the bot resumes on the other node with nothing lost.
	admin := readFile(t, filepath.Join(dir, "admin-token"))
	adminCall := func(method string, port int, body any, out any) {
		t.Helper()
		var rd io.Reader
		if body != nil {
			b, _ := json.Marshal(body)
			rd = bytes.NewReader(b)
		}
		req, _ := http.NewRequest(method, fmt.Sprintf("http://127.0.0.1:%d/admin/drain", port), rd)
		req.Header.Set("Authorization", "Bearer "+admin)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s /admin/drain on %d: %v", method, port, err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s /admin/drain on %d: status %d", method, port, resp.StatusCode)
		}
		if out != nil {
			if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
				t.Fatal(err)
			}
		}
	}
	gw := map[string]int{"gateway-1": base + 8, "gateway-2": base + 9}
	from, to := "", ""
	for name, port := range gw {
		var st struct {
			Sessions int64 `json:"sessions"`
		}
		adminCall("GET", port, nil, &st)
		if st.Sessions > 0 {
			from = name
		} else {
			to = name
		}
	}
	if from == "" || to == "" {
		t.Fatalf("the bot's session (READY %s) is not on exactly one gateway node", r.SessionID)
	}
	adminCall("POST", gw[from], map[string]any{"successor": to, "successorAddress": fmt.Sprintf("127.0.0.1:%d", gw[to])}, nil)
	var want []string
	for i := range 5 {
		want = append(want, post(fmt.Sprintf("during drain %d", i)))
	}
	wait("RESUMED after the drain", func() bool {
		select {
		case <-resumed:
			return true
		case e := <-ready:
			t.Fatalf("the bot identified again (READY %s) instead of resuming on %s", e.SessionID, to)
			return false
		default:
			return false
		}
	})
	got := map[string]bool{}
	for len(got) < len(want) {
		got[next("a message posted during the drain").ID] = true
	}
	for _, id := range want {
		if !got[id] {
			t.Fatalf("message %s posted during the drain never reached the bot (got %v)", id, got)
		}
	}

	// The rest of the product through the same address: webhook messages
	// by token, a voice join (the SFU's dev CA is in its data directory)
	// and a live stream with a comment over server-sent events. (The
	// resume that the balancer sends to the other gateway node needs both
	// gateway nodes up: TestBalancedTopology has it.)
	// A draining node answers IDENTIFY with op 9 (identify elsewhere):
	// these clients identify once, so they start when HAProxy, whose
	// runtime API is on the state directory's socket, has taken it out.
	front := &front{addr: lb, admin: topology.Admin{Socket: filepath.Join(dir, "haproxy.sock")}, client: api.client}
	wait("HAProxy taking the drained "+from+" out", func() bool {
		st, err := front.admin.ServerStates()
		if err != nil {
			t.Fatal(err)
		}
		return st["gateways/"+from] == "DOWN"
	})
	t.Run("WebhookMessagesByToken", func(t *testing.T) { testWebhooksByToken(t, front) })
	t.Run("VoiceJoin", func(t *testing.T) { testVoiceJoin(t, front, filepath.Join(dir, "nodes", "voice-1", "voice-ca.pem")) })
	t.Run("LiveStream", func(t *testing.T) { testLiveStream(t, front) })

	// Ctrl-C stops everything: the script exits and no port of the
	// cluster answers.
	dg.Close()
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case <-exited:
	case <-time.After(90 * time.Second):
		t.Fatal("run-cluster did not stop within 90 s of Ctrl-C")
	}
	for _, port := range append([]int{base + 1, base + 8, base + 10, base + 14, base + 15, base + 16, base + 21, base + 22, base + 23, base + 60}, mustPort(t, lb)) {
		if c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), time.Second); err == nil {
			c.Close()
			t.Fatalf("port %d still answers after Ctrl-C", port)
		}
	}
}

func mustPort(t *testing.T, addr string) int {
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	n, _ := strconv.Atoi(p)
	return n
}

func readFile(t *testing.T, path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}
