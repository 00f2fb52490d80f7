//go:build integration

package observability

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/concord-chat/concord/internal/gwtest"
	"github.com/concord-chat/concord/internal/resttest"
	"github.com/concord-chat/concord/internal/topology"
)

// TestOneTracePerSend sends one message through the split topology (every
// node exporting all its spans over OTLP to a real collector built from
// the collector's Go modules, hack/otelcol) and asserts the send is one
// trace holding the spans of every role it crossed — the api node (HTTP
// server, rate limit, proxy), the guild node (auth, authorise, outbox,
// actor fan-out), the data node (the store write over gRPC) and the
// gateway node (the write to the session) — linked parent to child. The
// nodes append message events to Kafka through the outbox.
func TestOneTracePerSend(t *testing.T) {
	col := os.Getenv("CONCORD_OTELCOL")
	if col == "" {
		t.Fatal("CONCORD_OTELCOL is unset: run `make test` (hack/test-deps.sh builds the collector with hack/otelcol/build.sh " +
			"and exports it), or export CONCORD_OTELCOL=$(bash hack/otelcol/build.sh | tail -n 1)")
	}
	cass, kafka := os.Getenv("CONCORD_CASSANDRA"), os.Getenv("CONCORD_KAFKA")
	if cass == "" || kafka == "" {
		t.Fatalf("CONCORD_CASSANDRA=%q CONCORD_KAFKA=%q: run `make test`, whose hack/test-deps.sh starts them", cass, kafka)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	out, grpcAddr := startCollector(t, col)

	b, err := topology.StartBackends(ctx, cass, "concord_trace")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	c, err := topology.Start(ctx, b, topology.Options{
		// Message events go to Kafka through the outbox, as in production.
		Flags: []string{"--trace-endpoint=" + grpcAddr, "--trace-sample=1",
			fmt.Sprintf("--eventlog=kafka://%s?topic_prefix=trace-%d.", kafka, time.Now().UnixNano())},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)

	api := c.Front
	var acct struct {
		Token string `json:"token"`
	}
	resttest.Call(t, api, "", "POST", "/auth/register", map[string]string{
		"username": fmt.Sprintf("tracer%d", time.Now().UnixNano()%1e9), "password": "correct horse battery"}, &acct)
	var guild struct {
		ID string `json:"id"`
	}
	resttest.Call(t, api, acct.Token, "POST", "/guilds", map[string]string{"name": "traced"}, &guild)
	var channels []struct {
		ID   string `json:"id"`
		Type int    `json:"type"`
	}
	resttest.Call(t, api, acct.Token, "GET", "/guilds/"+guild.ID+"/channels", nil, &channels)
	i := slices.IndexFunc(channels, func(ch struct {
		ID   string `json:"id"`
		Type int    `json:"type"`
	}) bool {
		return ch.Type == 0
	})
	if i < 0 {
		t.Fatalf("guild %s has no text channel", guild.ID)
	}
	channel := channels[i].ID
	conn, err := gwtest.Dial(gwtest.URL(api), acct.Token, gwtest.Options{Name: "traced"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Close)
	if err := conn.Await("READY", 30*time.Second, gwtest.HasType("READY")); err != nil {
		t.Fatal(err)
	}
	var msg struct {
		ID string `json:"id"`
	}
	resttest.Call(t, api, acct.Token, "POST", "/channels/"+channel+"/messages", map[string]string{"content": "one trace"}, &msg)
	if _, _, err := conn.Next("MESSAGE_CREATE", 30*time.Second, func(d json.RawMessage) bool {
		return bytes.Contains(d, []byte(`"id":"`+msg.ID+`"`))
	}); err != nil {
		t.Fatalf("the message never reached the session: %v", err)
	}

	// The nodes export in batches (every 5 s by default): read the
	// collector's file until the send's trace holds every role's spans.
	wantRoles := []string{"api", "guild", "data", "gateway"}
	wantSpans := []string{"ratelimit", "auth", "authorize", "store.write", "guild.fanout", "gateway.write"}
	sendSpan := "POST /api/v10/channels/{id}/messages"
	var last string
	deadline := time.Now().Add(60 * time.Second)
	for {
		spans := readSpans(t, out)
		tr := traceOf(spans, sendSpan)
		missing := tr.missing(wantRoles, wantSpans)
		if len(missing) == 0 {
			if orphans := tr.orphans(); len(orphans) > 0 {
				t.Errorf("spans whose parent is not in the trace: %v", orphans)
			}
			t.Logf("trace %s: %s", tr.id, tr.describe())
			return
		}
		last = fmt.Sprintf("trace %q misses %v; it has %s", tr.id, missing, tr.describe())
		if time.Now().After(deadline) {
			t.Fatalf("after 60 s: %s", last)
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

// traceOf is the trace of the first root span named root.
func traceOf(spans []span, root string) trace {
	for _, s := range spans {
		if s.name == root && s.parent == "" {
			tr := trace{id: s.trace}
			for _, x := range spans {
				if x.trace == s.trace {
					tr.spans = append(tr.spans, x)
				}
			}
			return tr
		}
	}
	return trace{}
}

// missing lists the roles (node name prefixes) and span names tr lacks.
func (tr trace) missing(roles, names []string) []string {
	var miss []string
	for _, r := range roles {
		if !slices.ContainsFunc(tr.spans, func(s span) bool { return strings.HasPrefix(s.node, r+"-") }) {
			miss = append(miss, "role "+r)
		}
	}
	for _, n := range names {
		if !slices.ContainsFunc(tr.spans, func(s span) bool { return s.name == n }) {
			miss = append(miss, "span "+n)
		}
	}
	if !slices.ContainsFunc(tr.spans, func(s span) bool { return strings.HasPrefix(s.name, "outbox.") }) {
		miss = append(miss, "span outbox.*")
	}
	return miss
}

// orphans are the spans whose parent is not in the trace.
func (tr trace) orphans() []string {
	ids := map[string]bool{}
	for _, s := range tr.spans {
		ids[s.id] = true
	}
	var out []string
	for _, s := range tr.spans {
		if s.parent != "" && !ids[s.parent] {
			out = append(out, s.node+" "+s.name)
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
