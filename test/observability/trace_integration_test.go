//go:build integration

package observability

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/concord-chat/concord/internal/gwtest"
	"github.com/concord-chat/concord/internal/resttest"
	"github.com/concord-chat/concord/internal/topology"
	"github.com/concord-chat/concord/runtime/adapters/registry"
	etcdreg "github.com/concord-chat/concord/runtime/adapters/registry/etcd"
	"github.com/concord-chat/concord/runtime/domain/live/livetest"
)

// TestTraces runs the split topology with the live-comment roles and a
// relay node, every node exporting all its spans over OTLP to a real
// collector built from the collector's Go modules (hack/otelcol), and
// asserts that each of three requests is one trace holding the spans of
// every role it crossed, linked parent to child. The test sends each
// request with a traceparent of its own, as an instrumented client
// would, and finds the trace by that id.
//
//   - A message send: the api node (HTTP server, rate limit, proxy), the
//     guild node (auth, authorise, outbox, actor fan-out), the data node
//     (the store write over gRPC), the relay node (the guild is given the
//     relay, as the RelayTier controller does, under relays/<guild id>)
//     and the gateway node (the write to the session). Message events go
//     to Kafka through the outbox.
//   - An interaction round trip: the member's POST /interactions, the
//     INTERACTION_CREATE written to the bot's gateway session, the bot's
//     callback (a request of its own, which the platform joins to the
//     invocation's trace) and the response message written to the
//     member's session.
//   - A live comment: the live API's append to Kafka, the router's
//     publish to the Redis relay and the live gateway's SSE write to a
//     viewer.
func TestTraces(t *testing.T) {
	col := os.Getenv("CONCORD_OTELCOL")
	if col == "" {
		t.Fatal("CONCORD_OTELCOL is unset: run `make test` (hack/test-deps.sh builds the collector with hack/otelcol/build.sh " +
			"and exports it), or export CONCORD_OTELCOL=$(bash hack/otelcol/build.sh | tail -n 1)")
	}
	cass, kafka, redis := os.Getenv("CONCORD_CASSANDRA"), os.Getenv("CONCORD_KAFKA"), os.Getenv("CONCORD_TEST_REDIS")
	if cass == "" || kafka == "" || redis == "" {
		t.Fatalf("CONCORD_CASSANDRA=%q CONCORD_KAFKA=%q CONCORD_TEST_REDIS=%q: run `make test`, whose hack/test-deps.sh starts them", cass, kafka, redis)
	}
	// Most of it is Cassandra's schema for a fresh keyspace: minutes on a
	// loaded machine.
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	out, grpcAddr := startCollector(t, col)

	b, err := topology.StartBackends(ctx, cass, "concord_trace")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	relayAddr := freeAddr(t)
	c, err := topology.Start(ctx, b, topology.Options{
		// Message events go to Kafka through the outbox, as in production.
		Flags: []string{"--trace-endpoint=" + grpcAddr, "--trace-sample=1",
			fmt.Sprintf("--eventlog=kafka://%s?topic_prefix=trace-%d.", kafka, time.Now().UnixNano())},
		Live: true, Kafka: kafka, Redis: redis,
		// One relay node; its gRPC address is what the relay list names.
		Extra: []topology.Extra{{Name: "relay-1", Roles: "relay", Flags: []string{"--grpc=" + relayAddr}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	api := c.Front

	owner := register(t, api, "tracer")
	var guild struct {
		ID string `json:"id"`
	}
	resttest.Call(t, api, owner, "POST", "/guilds", map[string]string{"name": "traced"}, &guild)
	channel := textChannel(t, api, owner, guild.ID)
	// The guild's relay list, as the RelayTier controller writes it.
	reg, err := etcdreg.New(etcdreg.Config{Endpoints: []string{"http://" + b.Etcd}, Prefix: "/" + c.Prefix})
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	if err := reg.Put(ctx, "relays/"+guild.ID, []byte(`["`+relayAddr+`"]`), registry.Persistent); err != nil {
		t.Fatalf("relay list: %v", err)
	}
	conn := dial(t, api, owner, "owner", 0)
	// The guild nodes follow the relay list through a watch: send until
	// a guild node has relayed one of the guild's dispatches, each send
	// awaited on the session.
	for i := 0; ; i++ {
		send(t, http.DefaultClient, api, owner, channel, fmt.Sprintf("warm-up %d", i), conn)
		if relayed(t, c) > 0 {
			break
		}
		if i == 20 {
			t.Fatalf("after 20 messages no guild node has relayed through %s", relayAddr)
		}
	}

	t.Run("send", func(t *testing.T) {
		id, client := traced()
		send(t, client, api, owner, channel, "one trace", conn)
		awaitTrace(t, out, id, "POST /api/v10/channels/{id}/messages", []string{"api", "guild", "data", "relay", "gateway"},
			[]string{"ratelimit", "auth", "authorize", "store.write", "outbox.*", "guild.fanout", "relay.forward", "gateway.write"})
	})

	t.Run("interaction", func(t *testing.T) {
		var app struct {
			ID string `json:"id"`
		}
		resttest.Call(t, api, owner, "POST", "/applications", map[string]any{"name": "Tracer"}, &app)
		var reset struct {
			Token string `json:"token"`
		}
		resttest.Call(t, api, owner, "POST", "/applications/"+app.ID+"/bot/reset", nil, &reset)
		perms := "3072" // VIEW_CHANNEL | SEND_MESSAGES
		resttest.Call(t, api, owner, "POST", "/oauth2/authorize?client_id="+app.ID+"&scope=bot&permissions="+perms,
			map[string]any{"guild_id": guild.ID, "permissions": perms, "authorize": true}, nil)
		bot := "Bot " + reset.Token
		var cmd struct {
			ID string `json:"id"`
		}
		resttest.Call(t, api, bot, "POST", "/applications/"+app.ID+"/guilds/"+guild.ID+"/commands",
			map[string]any{"name": "ping", "description": "answers pong", "type": 1}, &cmd)
		// GUILDS only: the privileged intents a bot must be granted first.
		botConn := dial(t, api, reset.Token, "bot", 1)

		id, client := traced()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		status, body, err := resttest.Do(ctx, client, "POST", "http://"+api+"/api/v10/interactions", owner, map[string]any{
			"type": 2, "application_id": app.ID, "guild_id": guild.ID, "channel_id": channel,
			"data": map[string]any{"id": cmd.ID, "name": "ping", "type": 1},
		}, nil)
		if err != nil || status != http.StatusNoContent {
			t.Fatalf("invoke /ping: %d %s %v", status, body, err)
		}
		f, _, err := botConn.Next("INTERACTION_CREATE", 30*time.Second, nil)
		if err != nil {
			t.Fatalf("the bot got no INTERACTION_CREATE: %v", err)
		}
		var ix struct {
			ID    string `json:"id"`
			Token string `json:"token"`
		}
		if err := json.Unmarshal(f.D, &ix); err != nil {
			t.Fatal(err)
		}
		// The bot answers as a bot library does: a request of its own,
		// with no trace context.
		resttest.Call(t, api, "", "POST", "/interactions/"+ix.ID+"/"+ix.Token+"/callback",
			map[string]any{"type": 4, "data": map[string]any{"content": "pong"}}, nil)
		if _, _, err := conn.Next("MESSAGE_CREATE", 30*time.Second, func(d json.RawMessage) bool {
			return bytes.Contains(d, []byte(`"content":"pong"`))
		}); err != nil {
			t.Fatalf("the member never saw the response: %v", err)
		}
		tr := awaitTrace(t, out, id, "POST /api/v10/interactions", []string{"api", "guild", "gateway"},
			[]string{"interaction.invoke", "interaction.callback", "store.write", "guild.fanout"})
		// Two writes to sessions: the INTERACTION_CREATE to the bot and
		// the response to the member.
		if n := tr.count("gateway.write"); n < 2 {
			t.Errorf("trace has %d gateway.write spans, want the bot's and the member's: %s", n, tr.describe())
		}
	})

	t.Run("live comment", func(t *testing.T) {
		front := "http://" + api
		u := livetest.Register(front)(t)
		e := livetest.Remote(t, front, livetest.RemoteRoles{})
		s := e.CreateStream(u, "traced")
		v := livetest.Watch(t, front, s.ID, nil, "")
		v.Next(livetest.Wait, "state")
		id, client := traced()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		var posted livetest.Comment
		status, body, err := resttest.Do(ctx, client, "POST", front+"/v1/streams/"+s.ID+"/comments", u.Token,
			map[string]any{"text": "traced comment", "video_ts_ms": 1}, &posted)
		if err != nil || status != http.StatusCreated {
			t.Fatalf("post: %d %s %v", status, body, err)
		}
		if got := v.Comments(1, livetest.Wait); got[0].ID != posted.ID {
			t.Fatalf("the viewer got %+v, want %s", got, posted.ID)
		}
		awaitTrace(t, out, id, "POST /v1/streams/{id}/comments", []string{"live-api", "live-log", "live-gateway"},
			[]string{"live.append", "live.route", "live.sse.write"})
	})
}

// register creates an account through api and returns its token.
func register(t *testing.T, api, name string) string {
	t.Helper()
	var acct struct {
		Token string `json:"token"`
	}
	resttest.Call(t, api, "", "POST", "/auth/register", map[string]string{
		"username": fmt.Sprintf("%s%d", name, time.Now().UnixNano()%1e9), "password": "correct horse battery"}, &acct)
	return acct.Token
}

// textChannel is the guild's first text channel.
func textChannel(t *testing.T, api, token, guild string) string {
	t.Helper()
	var channels []struct {
		ID   string `json:"id"`
		Type int    `json:"type"`
	}
	resttest.Call(t, api, token, "GET", "/guilds/"+guild+"/channels", nil, &channels)
	for _, ch := range channels {
		if ch.Type == 0 {
			return ch.ID
		}
	}
	t.Fatalf("guild %s has no text channel", guild)
	return ""
}

// dial opens a gateway session with intents (0: gwtest's default) and
// awaits READY.
func dial(t *testing.T, api, token, name string, intents uint64) *gwtest.Conn {
	t.Helper()
	conn, err := gwtest.Dial(gwtest.URL(api), token, gwtest.Options{Name: name, Intents: intents})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Close)
	if err := conn.Await("READY", 30*time.Second, gwtest.HasType("READY")); err != nil {
		t.Fatal(err)
	}
	return conn
}

// send posts content through client and awaits its MESSAGE_CREATE on conn.
func send(t *testing.T, client *http.Client, api, token, channel, content string, conn *gwtest.Conn) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var msg struct {
		ID string `json:"id"`
	}
	status, body, err := resttest.Do(ctx, client, "POST", "http://"+api+"/api/v10/channels/"+channel+"/messages", token,
		map[string]string{"content": content}, &msg)
	if err != nil || status != http.StatusOK {
		t.Fatalf("send %q: %d %s %v", content, status, body, err)
	}
	if _, _, err := conn.Next("MESSAGE_CREATE", 30*time.Second, func(d json.RawMessage) bool {
		return bytes.Contains(d, []byte(`"id":"`+msg.ID+`"`))
	}); err != nil {
		t.Fatalf("message %q never reached the session: %v", content, err)
	}
}

// relayed is how many dispatches the guild nodes sent through relays.
func relayed(t *testing.T, c *topology.Cluster) float64 {
	t.Helper()
	total := 0.0
	for _, n := range c.Nodes {
		if !strings.HasPrefix(n.Name, "guild-") {
			continue
		}
		resp, err := http.Get("http://" + n.HTTP + "/metrics")
		if err != nil {
			t.Fatalf("%s metrics: %v", n.Name, err)
		}
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), "concord_cluster_relayed_dispatches_total "); ok {
				f, _ := strconv.ParseFloat(v, 64)
				total += f
			}
		}
		resp.Body.Close()
	}
	return total
}

// traced returns a fresh trace id and a client whose requests carry a
// sampled traceparent in it: the caller's own span, the parent of the
// server's.
func traced() (traceID string, client *http.Client) {
	var tid [16]byte
	var sid [8]byte
	_, _ = rand.Read(tid[:])
	_, _ = rand.Read(sid[:])
	traceID = hex.EncodeToString(tid[:])
	tp := "00-" + traceID + "-" + hex.EncodeToString(sid[:]) + "-01"
	return traceID, &http.Client{Transport: headerTransport{"traceparent", tp}}
}

// headerTransport sets one header on every request.
type headerTransport struct{ key, value string }

func (h headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set(h.key, h.value)
	return http.DefaultTransport.RoundTrip(r)
}

// awaitTrace reads the collector's file until trace id holds the server
// span root (whose parent is the client's span), a span of every role
// (node name prefix) and every span name (a trailing * matches a
// prefix), with every other span's parent in the trace; it returns the
// trace. The nodes export in batches (every 5 s by default).
func awaitTrace(t *testing.T, out, id, root string, roles, names []string) trace {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		tr := traceByID(readSpans(t, out), id)
		missing := tr.missing(root, roles, names)
		if len(missing) == 0 {
			if orphans := tr.orphans(); len(orphans) > 0 {
				t.Errorf("spans whose parent is not in the trace: %v", orphans)
			}
			t.Logf("trace %s: %s", tr.id, tr.describe())
			return tr
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 60 s trace %s misses %v; it has %s", id, missing, tr.describe())
		}
		time.Sleep(time.Second) // the next export batch
	}
}

// startCollector runs the collector with its OTLP receiver on loopback
// and returns the file it writes spans to and its OTLP/gRPC address.
func startCollector(t *testing.T, bin string) (out, grpcAddr string) {
	t.Helper()
	out = t.TempDir() + "/traces.jsonl"
	grpcAddr, httpAddr := freeAddr(t), freeAddr(t)
	cmd := exec.Command(bin, "-grpc="+grpcAddr, "-http="+httpAddr, "-out="+out)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &lockedWriter{b: &stderr}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start the collector: %v", err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	ready := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if sc.Text() == "ready" {
				ready <- true
			}
		}
		ready <- false
	}()
	select {
	case ok := <-ready:
		if !ok {
			t.Fatalf("the collector exited before it was ready:\n%s", stderr.String())
		}
	case <-time.After(time.Minute):
		t.Fatalf("the collector was not ready in a minute:\n%s", stderr.String())
	}
	return out, grpcAddr
}

// span is one exported span with its process's node name.
type span struct {
	node, trace, id, parent, name string
}

// readSpans parses every OTLP JSON batch the collector has written.
func readSpans(t *testing.T, file string) []span {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var spans []span
	for _, line := range bytes.Split(b, []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		var batch struct {
			ResourceSpans []struct {
				Resource struct {
					Attributes []struct {
						Key   string `json:"key"`
						Value struct {
							StringValue string `json:"stringValue"`
						} `json:"value"`
					} `json:"attributes"`
				} `json:"resource"`
				ScopeSpans []struct {
					Spans []struct {
						TraceID      string `json:"traceId"`
						SpanID       string `json:"spanId"`
						ParentSpanID string `json:"parentSpanId"`
						Name         string `json:"name"`
					} `json:"spans"`
				} `json:"scopeSpans"`
			} `json:"resourceSpans"`
		}
		if err := json.Unmarshal(line, &batch); err != nil {
			// The collector may be writing the last line.
			continue
		}
		for _, rs := range batch.ResourceSpans {
			node := ""
			for _, a := range rs.Resource.Attributes {
				if a.Key == "service.instance.id" {
					node = a.Value.StringValue
				}
			}
			for _, ss := range rs.ScopeSpans {
				for _, s := range ss.Spans {
					spans = append(spans, span{node: node, trace: s.TraceID, id: s.SpanID, parent: s.ParentSpanID, name: s.Name})
				}
			}
		}
	}
	return spans
}

// trace is the spans of one trace.
type trace struct {
	id    string
	spans []span
}

// traceByID is the spans of trace id.
func traceByID(spans []span, id string) trace {
	tr := trace{id: id}
	for _, s := range spans {
		if s.trace == id {
			tr.spans = append(tr.spans, s)
		}
	}
	return tr
}

// missing lists what tr lacks of awaitTrace's root, roles and names.
func (tr trace) missing(root string, roles, names []string) []string {
	var miss []string
	if !slices.ContainsFunc(tr.spans, func(s span) bool { return s.name == root && !tr.has(s.parent) }) {
		miss = append(miss, "root "+root)
	}
	for _, r := range roles {
		if !slices.ContainsFunc(tr.spans, func(s span) bool { return strings.HasPrefix(s.node, r+"-") }) {
			miss = append(miss, "role "+r)
		}
	}
	for _, n := range names {
		if tr.count(n) == 0 {
			miss = append(miss, "span "+n)
		}
	}
	return miss
}

// count is how many spans of tr are named name (a trailing * matches a
// prefix).
func (tr trace) count(name string) int {
	n := 0
	for _, s := range tr.spans {
		if p, ok := strings.CutSuffix(name, "*"); ok && strings.HasPrefix(s.name, p) || s.name == name {
			n++
		}
	}
	return n
}

// has reports whether span id is in tr.
func (tr trace) has(id string) bool {
	return slices.ContainsFunc(tr.spans, func(s span) bool { return s.id == id })
}

// orphans are the spans whose parent is not in the trace, but for the
// one root (whose parent is the test client's span).
func (tr trace) orphans() []string {
	var out []string
	roots := 0
	for _, s := range tr.spans {
		if s.parent != "" && !tr.has(s.parent) {
			if roots++; roots > 1 {
				out = append(out, s.node+" "+s.name)
			}
		}
	}
	return out
}

func (tr trace) describe() string {
	var parts []string
	for _, s := range tr.spans {
		parts = append(parts, s.node+":"+s.name)
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}
