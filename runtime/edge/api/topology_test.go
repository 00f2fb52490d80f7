package api

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/concord-chat/concord/internal/gwtest"
	"github.com/concord-chat/concord/internal/topology"
	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/event"
	"github.com/concord-chat/concord/runtime/edge/gateway"
)

// With CONCORD_API_TEST_TOPOLOGY=cluster the REST tests run against
// `concord serve` split over processes (internal/topology: two api and two
// gateway nodes behind HAProxy, two guild nodes and two data nodes the
// others send their message traffic to, --data-nodes=ring, and a voice
// node, on a shared Cassandra keyspace and etcd; beside them, started
// here, a read-state node on a Kafka event log, as `make run-cluster`
// runs them) instead of the handler in the test process: requests go to
// the balancer (the route walk, routewalk_test.go, sends each to every api
// node directly), accounts are made with POST /auth/register, and the
// gateway sessions the tests watch are real WebSocket sessions through the
// balancer. A test that reaches into the process (the store, the
// token issuer, a handler Config of its own) skips there, saying so; it
// runs in the in-process pass of the same `make test`.
const topologyEnv = "CONCORD_API_TEST_TOPOLOGY"

// topo is the running topology of this test process, when there is one.
var topo struct {
	url string
	// apis are the base URLs of every api node.
	apis []string
	// gateway is the host:port the gateway sessions dial: the balancer.
	gateway string
}

func TestMain(m *testing.M) {
	switch v := os.Getenv(topologyEnv); v {
	case "", "dev":
		os.Exit(m.Run())
	case "cluster":
	default:
		fmt.Fprintf(os.Stderr, "%s=%q: want dev or cluster\n", topologyEnv, v)
		os.Exit(2)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	b, err := topology.StartBackends(ctx, os.Getenv("CONCORD_CASSANDRA"), "concord_api_cluster")
	if err != nil {
		cancel()
		fmt.Fprintf(os.Stderr, "%s=cluster: backends: %v\n", topologyEnv, err)
		os.Exit(1)
	}
	// The nodes this file adds join the topology's registry prefix, which
	// it chooses here (the topology's own flag is overridden: a later flag
	// of the same name wins).
	kafka := os.Getenv("CONCORD_KAFKA")
	if kafka == "" {
		cancel()
		b.Close()
		fmt.Fprintf(os.Stderr, "%s=cluster: no Kafka address: run `make test`, whose hack/test-deps.sh starts Kafka and sets CONCORD_KAFKA (the read states of the split topology consume its event log)\n", topologyEnv)
		os.Exit(1)
	}
	run := fmt.Sprintf("api-topo-%d", time.Now().UnixNano())
	common := []string{
		"--registry=etcd://" + b.Etcd + "/" + run,
		"--store=" + b.Store, "--server-key=" + b.Key, "--lease-ttl=2s", "--retry-interval=500ms",
		"--grpc=127.0.0.1:0", "--log-level=warn", "--data-nodes=ring",
		"--eventlog=kafka://" + kafka + "?topic_prefix=" + run + ".",
	}
	var extra []*concordProc
	stop := func() {
		for _, p := range extra {
			p.stop()
		}
		b.Close()
	}
	// Acks go to a read-state node, which counts mentions from the event
	// log, as in `make run-cluster`.
	for _, n := range []struct{ name, roles string }{{"readstate-1", "readstate"}} {
		p, err := startProc(ctx, n.name, time.Minute, append([]string{"serve", "--node=" + n.name, "--roles=" + n.roles}, common...)...)
		if err != nil {
			cancel()
			stop()
			fmt.Fprintf(os.Stderr, "%s=cluster: %v\n", topologyEnv, err)
			os.Exit(1)
		}
		extra = append(extra, p)
	}
	// The handler in the test process has no rate limiter (the api role
	// adds it): the topology's api nodes run without one too, or the
	// suite's bursts of requests would be answered 429.
	// A voice node answers the voice regions.
	c, err := topology.Start(ctx, b, topology.Options{
		Flags:      common,
		FrontFlags: []string{"--rate-limits=false"},
		Voice:      true,
		Verbose:    os.Getenv("CONCORD_TEST_VERBOSE") != "",
	})
	cancel()
	if err != nil {
		stop()
		fmt.Fprintf(os.Stderr, "%s=cluster: start: %v\n", topologyEnv, err)
		os.Exit(1)
	}
	topo.url = "http://" + c.Front
	for _, name := range []string{"api-1", "api-2"} {
		n := c.Node(name)
		if n == nil {
			c.Close()
			stop()
			fmt.Fprintf(os.Stderr, "%s=cluster: the topology has no node %s\n", topologyEnv, name)
			os.Exit(1)
		}
		topo.apis = append(topo.apis, "http://"+n.HTTP)
	}
	topo.gateway = c.Front
	code := m.Run()
	if code != 0 {
		fmt.Fprintf(os.Stderr, "topology logs:\n%s", c.Logs())
		for _, p := range extra {
			fmt.Fprintf(os.Stderr, "--- %s logs:\n%s\n", p.name, p.logs.String())
		}
	}
	c.Close()
	stop()
	os.Exit(code)
}

// topologyURL is the front node's base URL, or "" in process.
func topologyURL() string { return topo.url }

// newTopologyEnv is an env whose requests go to the topology at url.
func newTopologyEnv(t testing.TB, url string) *env {
	var b [3]byte
	_, _ = rand.Read(b[:])
	e := &env{t: t, url: url, tag: "-" + hex.EncodeToString(b[:]), tokens: map[snowflake.ID]string{}}
	e.conns = &gatewaySessions{m: map[event.SessionID]*gwtest.Conn{}}
	t.Cleanup(e.conns.close)
	return e
}

// inProcess skips the test against a topology: what it checks reaches
// into the process (why says how).
func (e *env) inProcess(why string) {
	e.t.Helper()
	if e.srv == nil {
		e.t.Skip("in-process only: " + why)
	}
}

// gatewaySessions are the real gateway sessions of a topology env, by the
// id the test gave them.
type gatewaySessions struct {
	mu sync.Mutex
	m  map[event.SessionID]*gwtest.Conn
}

func (g *gatewaySessions) get(id event.SessionID) *gwtest.Conn {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.m[id]
}

func (g *gatewaySessions) close() {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, c := range g.m {
		c.Close()
	}
}

// sessionOnly are the dispatches a gateway session gets that the guild
// service's sink never sees (the session's own handshake, and presence,
// which no REST test changes): deliveries leave them out, so a test reads
// the same list in both modes.
var sessionOnly = map[string]bool{"READY": true, "READY_SUPPLEMENTAL": true, "RESUMED": true, "PRESENCE_UPDATE": true, "SESSIONS_REPLACE": true}

func deliveries(frames []gwtest.Frame) []delivery {
	var ds []delivery
	for _, f := range frames {
		if !sessionOnly[f.Type] {
			ds = append(ds, delivery{Type: f.Type, Payload: f.D})
		}
	}
	return ds
}

// attach identifies a gateway session for user at the front node and
// waits for READY and the GUILD_CREATE of every guild READY lists, as the
// in-process Subscribe delivers them.
func (e *env) attach(id event.SessionID, user snowflake.ID, intents uint64) {
	e.t.Helper()
	tok, ok := e.tokens[user]
	if !ok {
		e.t.Fatalf("session %s: user %d has no token (accounts come from e.register)", id, user)
	}
	if intents == 0 {
		// A user session: Discord applies no intents to users.
		intents = gateway.KnownIntents
	}
	c, err := gwtest.Dial(gwtest.URL(strings.TrimPrefix(e.url, "http://")), tok, gwtest.Options{Name: string(id), Intents: intents})
	if err != nil {
		e.t.Fatal(err)
	}
	e.conns.mu.Lock()
	e.conns.m[id] = c
	e.conns.mu.Unlock()
	var guilds int
	err = c.Await("READY and its guilds", 15*time.Second, func(fs []gwtest.Frame) bool {
		creates, ready := 0, false
		for _, f := range fs {
			switch f.Type {
			case "READY":
				var r struct {
					Guilds []json.RawMessage `json:"guilds"`
				}
				_ = json.Unmarshal(f.D, &r)
				guilds, ready = len(r.Guilds), true
			case "GUILD_CREATE":
				creates++
			}
		}
		return ready && creates >= guilds
	})
	if err != nil {
		e.t.Fatal(err)
	}
}

// events are the deliveries session id got so far, in either mode.
func (e *env) events(id event.SessionID) []delivery {
	if e.conns != nil {
		c := e.conns.get(id)
		if c == nil {
			e.t.Fatalf("no gateway session %s", id)
		}
		return deliveries(c.Frames())
	}
	return e.sink.of(id)
}

// waitFor waits until cond holds over session id's deliveries and
// returns them, in either mode.
func (e *env) waitFor(id event.SessionID, what string, cond func([]delivery) bool) []delivery {
	e.t.Helper()
	if e.conns == nil {
		return e.sink.waitFor(e.t, id, what, cond)
	}
	c := e.conns.get(id)
	if c == nil {
		e.t.Fatalf("no gateway session %s", id)
	}
	var ds []delivery
	if err := c.Await(what, 10*time.Second, func(fs []gwtest.Frame) bool {
		ds = deliveries(fs)
		return cond(ds)
	}); err != nil {
		e.t.Fatalf("%v; deliveries so far: %v", err, kinds(deliveries(c.Frames())))
	}
	return ds
}

// kinds are the deliveries' types, for failure messages.
func kinds(ds []delivery) []string {
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = d.Type
	}
	return out
}
