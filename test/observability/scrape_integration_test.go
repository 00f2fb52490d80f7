//go:build integration

package observability

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	promclient "github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/concord-chat/concord/internal/concordbin"
	"github.com/concord-chat/concord/internal/gwtest"
	"github.com/concord-chat/concord/internal/resttest"
	"github.com/concord-chat/concord/internal/topology"
	eventlogbackend "github.com/concord-chat/concord/runtime/adapters/eventlog/backend"
	"github.com/concord-chat/concord/runtime/domain/live"
	"github.com/concord-chat/concord/runtime/domain/live/classifier/linear"
	"github.com/concord-chat/concord/runtime/domain/live/livetest"
	"github.com/concord-chat/concord/runtime/domain/live/moderation"
)

// TestQueriesAgainstPrometheus scrapes a `concord dev`, a split topology
// (two api, two gateway, two guild and two data nodes behind HAProxy, a
// voice node, the live-comment roles and a read-state node, on
// Cassandra, etcd, Kafka and Redis) and the operator on an envtest API
// server with a real Prometheus, sends a little traffic through the dev
// and the balancer (messages seen on gateway sessions, live comments),
// and evaluates every alert expression and dashboard query through the
// HTTP API: each must parse, and every alert signal and panel query must
// return series.
func TestQueriesAgainstPrometheus(t *testing.T) {
	dir := promDir(t)
	cass := os.Getenv("CONCORD_CASSANDRA")
	kafka, redis := os.Getenv("CONCORD_KAFKA"), os.Getenv("CONCORD_TEST_REDIS")
	if cass == "" || kafka == "" || redis == "" {
		t.Fatalf("CONCORD_CASSANDRA=%q CONCORD_KAFKA=%q CONCORD_TEST_REDIS=%q: run `make test`, whose hack/test-deps.sh starts them", cass, kafka, redis)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()

	bin, err := concordbin.Build()
	if err != nil {
		t.Fatal(err)
	}
	dev := startDev(t, bin)
	cluster, readstate := startSplit(t, ctx, bin, cass, kafka, redis)
	operator := startOperator(t, ctx)
	moderator := startModeration(t, ctx, kafka, cluster.Prefix)

	targets := []string{}
	for _, n := range cluster.Nodes {
		targets = append(targets, n.HTTP)
	}
	targets = append(targets, readstate, moderator)
	// Two Prometheus servers, so each shape must export the series on
	// its own: one scraping the split topology and the operator (every
	// query must return series), one scraping `concord dev` alone.
	p := startPrometheus(t, dir, []job{{"split", targets}, {"operator", []string{operator}}})
	pdev := startPrometheus(t, dir, []job{{"dev", []string{dev}}})

	chatTraffic(t, dev, dev, true)
	chatTraffic(t, cluster.Front, cluster.Front, false)
	liveTraffic(t, "http://"+dev)
	liveTraffic(t, "http://"+cluster.Front)

	deadline := time.Now().Add(90 * time.Second)
	for _, p := range []*prometheus{p, pdev} {
		for {
			down, err := p.targetsDown(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if len(down) == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("scrape targets not up: %s\n%s", down, p.logs.String())
			}
			time.Sleep(time.Second)
		}
	}
	checkQueries(t, ctx, p, "split topology and operator", deadline, nil)
	// The consumer the test runs beside the topology read the comments
	// the live API accepted: its series are of real scores, not of an
	// idle consumer on the wrong topic.
	awaitQuery(t, ctx, p, `sum(concord_live_moderation_comments_scored_total) > 0`, deadline)
	checkQueries(t, ctx, pdev, "concord dev", deadline, devAbsent)
	if t.Failed() {
		t.Logf("topology logs:\n%s", cluster.Logs())
	}
}

// startDev runs `concord dev` and returns its host:port once ready.
func startDev(t *testing.T, bin string) string {
	t.Helper()
	addr := freeAddr(t)
	cmd := exec.Command(bin, "dev", "--http="+addr, "--data-dir="+t.TempDir(), "--log-level=warn")
	var logs bytes.Buffer
	out := &lockedWriter{b: &logs}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatalf("start concord dev: %v", err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	awaitOK(t, "http://"+addr+"/readyz", "concord dev", func() string { return logs.String() })
	return addr
}

// startSplit starts the split topology with voice and live comments, its
// message events on Kafka, and a read-state node beside it; it returns
// the cluster and the read-state node's host:port.
func startSplit(t *testing.T, ctx context.Context, bin, cass, kafka, redis string) (*topology.Cluster, string) {
	t.Helper()
	b, err := topology.StartBackends(ctx, cass, "concord_obs")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	run := fmt.Sprintf("obs-%d", time.Now().UnixNano())
	common := []string{
		"--registry=etcd://" + b.Etcd + "/" + run,
		"--eventlog=kafka://" + kafka + "?topic_prefix=" + run + ".",
	}
	c, err := topology.Start(ctx, b, topology.Options{
		Flags: common, FrontFlags: []string{"--redis=redis://" + redis},
		Voice: true, Live: true, Kafka: kafka, Redis: redis,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	// The read-state role counts mentions from the event log, as in
	// `make run-cluster`.
	addr := freeAddr(t)
	cmd := exec.Command(bin, "serve", "--node=readstate-1", "--roles=readstate", "--http="+addr,
		"--grpc=127.0.0.1:0", "--data-dir="+t.TempDir(), "--store="+b.Store, "--server-key="+b.Key,
		"--lease-ttl=2s", "--retry-interval=500ms", "--log-level=warn", common[0], common[1])
	var logs bytes.Buffer
	out := &lockedWriter{b: &logs}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatalf("start the read-state node: %v", err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	awaitOK(t, "http://"+addr+"/readyz", "the read-state node", func() string { return logs.String() })
	return c, addr
}

// startModeration runs the ML moderation consumer (the Go model) on the
// comments topic of the cluster whose prefix is prefix (its live roles'
// topics and live prefix, topology.Cluster.Prefix) and serves its
// metrics, returning their host:port. No role of `concord serve` runs
// the consumer yet (docs/live-comments.md), so the test runs the package
// itself, on the same Kafka topics, the way a live-moderation role would.
func startModeration(t *testing.T, ctx context.Context, kafka, prefix string) string {
	t.Helper()
	logger := slog.New(slog.DiscardHandler)
	l, err := eventlogbackend.Open(ctx, "kafka://"+kafka+"?topic_prefix="+prefix+".", "", logger)
	if err != nil {
		t.Fatalf("moderation: open the event log: %v", err)
	}
	t.Cleanup(func() { _ = l.Close() })
	app, ok := l.(live.Appender)
	if !ok {
		t.Fatalf("moderation: the Kafka log %T cannot append to a stream's partition", l)
	}
	model, err := linear.Default()
	if err != nil {
		t.Fatal(err)
	}
	reg := promclient.NewRegistry()
	mod, err := moderation.New(moderation.Config{Topics: live.TopicsFor(prefix + ".live."), Group: prefix + ".live.moderation",
		Logger: logger, Registerer: reg}, moderation.Deps{Log: l, Append: app, Classifier: model})
	if err != nil {
		t.Fatal(err)
	}
	mctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := mod.Run(mctx); err != nil {
			t.Errorf("moderation consumer: %v", err)
		}
	}()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: promhttp.HandlerFor(reg, promhttp.HandlerOpts{})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close(); cancel(); <-done })
	return ln.Addr().String()
}

// startOperator starts an envtest API server with the chart's CRDs and
// the operator binary against it (fleet in memory: it reconciles nothing
// here), and returns its metrics host:port once the metrics answer.
func startOperator(t *testing.T, ctx context.Context) string {
	t.Helper()
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		t.Fatal("KUBEBUILDER_ASSETS is unset: run `make test`, whose hack/test-deps.sh builds the envtest control plane (hack/envtest/build.sh)")
	}
	env := &envtest.Environment{CRDDirectoryPaths: []string{"../../charts/concord/crds"}, ErrorIfCRDPathMissing: true}
	if _, err := env.Start(); err != nil {
		t.Fatalf("envtest: %v", err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	user, err := env.ControlPlane.AddUser(envtest.User{Name: "operator", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	kc, err := user.KubeConfig()
	if err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	kubeconfig := filepath.Join(work, "kubeconfig")
	if err := os.WriteFile(kubeconfig, kc, 0o600); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(work, "concord-operator")
	if out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, "../../operator/cmd/concord-operator").CombinedOutput(); err != nil {
		t.Fatalf("build the operator: %v\n%s", err, out)
	}
	metrics, probe := freeAddr(t), freeAddr(t)
	cmd := exec.Command(bin, "--metrics-bind-address="+metrics, "--health-probe-bind-address="+probe, "--fleet=memory",
		// One replica outside a cluster: no Lease to elect on.
		"--leader-elect=false")
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
	var logs bytes.Buffer
	out := &lockedWriter{b: &logs}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatalf("start the operator: %v", err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	awaitOK(t, "http://"+metrics+"/metrics", "the operator", func() string { return logs.String() })
	return metrics
}

// chatTraffic registers a user, creates a guild, opens a gateway session
// through gw and posts messages through api until each reached the
// session: the send-to-socket, fan-out, store and rate-limit series all
// move.
func chatTraffic(t *testing.T, api, gw string, memberList bool) {
	t.Helper()
	var acct struct {
		Token string `json:"token"`
	}
	resttest.Call(t, api, "", "POST", "/auth/register", map[string]string{
		"username": fmt.Sprintf("obs%d", time.Now().UnixNano()%1e9), "password": "correct horse battery"}, &acct)
	var guild struct {
		ID string `json:"id"`
	}
	resttest.Call(t, api, acct.Token, "POST", "/guilds", map[string]string{"name": "observed"}, &guild)
	var channels []struct {
		ID   string `json:"id"`
		Type int    `json:"type"`
	}
	resttest.Call(t, api, acct.Token, "GET", "/guilds/"+guild.ID+"/channels", nil, &channels)
	text := ""
	for _, c := range channels {
		if c.Type == 0 {
			text = c.ID
			break
		}
	}
	if text == "" {
		t.Fatalf("guild %s has no text channel: %+v", guild.ID, channels)
	}
	conn, err := gwtest.Dial(gwtest.URL(gw), acct.Token, gwtest.Options{Name: "observer"})
	if err != nil {
		t.Fatalf("gateway session: %v", err)
	}
	t.Cleanup(conn.Close)
	if err := conn.Await("READY", 30*time.Second, gwtest.HasType("READY")); err != nil {
		t.Fatal(err)
	}
	// The member list (op 14): a SYNC of the first rows, the one-guild
	// dashboard's member-list operations. Member lists need the presence
	// tier, which `concord dev` runs and the split topology here does not
	// (its member-list counters are there, at zero). The session asks once
	// its guild is available.
	if memberList {
		if _, _, err := conn.Next("GUILD_CREATE", 30*time.Second, func(d json.RawMessage) bool {
			return bytes.Contains(d, []byte(`"id":"`+guild.ID+`"`))
		}); err != nil {
			t.Fatalf("no GUILD_CREATE for %s: %v", guild.ID, err)
		}
		memberListSync(t, conn, guild.ID, text)
	}
	for i := range 3 {
		content := fmt.Sprintf("observed %d", i)
		var msg struct {
			ID string `json:"id"`
		}
		resttest.Call(t, api, acct.Token, "POST", "/channels/"+text+"/messages", map[string]string{"content": content}, &msg)
		if _, _, err := conn.Next("MESSAGE_CREATE", 30*time.Second, func(d json.RawMessage) bool {
			return bytes.Contains(d, []byte(`"id":"`+msg.ID+`"`))
		}); err != nil {
			t.Fatalf("message %d never reached the session: %v", i, err)
		}
		resttest.Call(t, api, acct.Token, "GET", "/channels/"+text+"/messages?limit=5", nil, nil)
	}
}

// memberListSync subscribes conn to the first rows of channel's member
// list and awaits the SYNC.
func memberListSync(t *testing.T, conn *gwtest.Conn, guild, channel string) {
	t.Helper()
	if err := conn.Send(map[string]any{"op": 14, "d": map[string]any{"guild_id": guild,
		"channels": map[string]any{channel: [][]int{{0, 99}}}}}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := conn.Next("GUILD_MEMBER_LIST_UPDATE", 30*time.Second, func(d json.RawMessage) bool {
		return bytes.Contains(d, []byte(`"SYNC"`))
	}); err != nil {
		t.Fatalf("no member-list SYNC: %v", err)
	}
}

// liveTraffic creates a stream, opens a viewer on it, posts a comment
// through base and takes it down once the viewer has it: post-to-screen,
// impressions, takedown latency and the exposure of removed comments
// all move.
func liveTraffic(t *testing.T, base string) {
	t.Helper()
	u := livetest.Register(base)(t)
	e := livetest.Remote(t, base, livetest.RemoteRoles{})
	s := e.CreateStream(u, "observed")
	v := livetest.Watch(t, base, s.ID, nil, "")
	v.Next(livetest.Wait, "state")
	c := e.Post(u, s.ID, "hello", 1)
	if got := v.Comments(1, livetest.Wait); got[0].ID != c.ID {
		t.Fatalf("the viewer got %+v, want comment %s", got, c.ID)
	}
	if r := e.Do("DELETE", "/v1/streams/"+s.ID+"/comments/"+c.ID, u.Token, nil); r.Status/100 != 2 {
		t.Fatalf("take comment %s down: %d %s", c.ID, r.Status, r.Body)
	}
	v.Next(livetest.Wait, "retract")
}

// awaitQuery waits until expr returns series in p.
func awaitQuery(t *testing.T, ctx context.Context, p *prometheus, expr string, deadline time.Time) {
	t.Helper()
	for {
		r, err := p.query(ctx, expr)
		if err != nil {
			t.Fatal(err)
		}
		if r.Status == "success" && len(r.Data.Result) > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("%s returns nothing (%s %s)", expr, r.Status, r.Error)
			return
		}
		time.Sleep(time.Second) // the next scrape
	}
}

// awaitOK polls u until it answers 200: a process starting up has no
// event to await but its listener.
func awaitOK(t *testing.T, u, what string, logs func() string) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		resp, err := http.Get(u)
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %s did not answer 200 in 2 minutes (%v)\n%s", what, u, err, logs())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// lockedWriter serialises a process's stdout and stderr into one buffer.
type lockedWriter struct {
	mu sync.Mutex
	b  interface{ Write([]byte) (int, error) }
}

func (w *lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

// devAbsent says why `concord dev` (one process on Pebble, the in-memory
// event log and counters, no registry, no operator) cannot have the
// series a query reads, "" when it must.
func devAbsent(expr string) string {
	for _, c := range []struct{ metric, why string }{
		{"concord_store_cassandra_", "dev stores in Pebble"},
		{"concord_dataservice_", "the coalescing data service fronts Cassandra only"},
		{"concord_registry_etcd_", "dev has no registry"},
		{"concord_cluster_relay", "relay tiers relay between processes; dev has none"},
		{"concord_store_bucket_", "bucket narrowing is the Cassandra store's"},
		{"concord_live_moderation_", "no role runs the moderation consumer yet; the split test runs it beside the topology"},
		{"controller_runtime_", "the operator is not part of concord dev"},
	} {
		if strings.Contains(expr, c.metric) {
			return c.why
		}
	}
	return ""
}
