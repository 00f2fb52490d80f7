//go:build integration

package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/concord-chat/concord/operator/fleet/etcdfleet"
)

// TestRelayTier runs a relay node (--roles=relay) beside a node running
// gateway, api and guild. The operator's registry writer (etcdfleet, as
// the RelayTier controller uses it) publishes the relay for one guild:
// that guild's messages then reach the session through the relay (its
// received-requests counter and the guild node's relayed counter rise),
// in order; once the list is withdrawn they go directly again, and keep
// arriving after kill -9 of the relay.
func TestRelayTier(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	env := setupCluster(t, ctx, "relay")
	common := env.nodeArgs()
	relayGRPC := freeAddr(t)
	relay := startNode(t, "relay-1", freeAddr(t),
		append([]string{"--roles=relay", "--grpc=" + relayGRPC, "--worker=1", "--data-dir=" + t.TempDir()}, common...)...)
	app := startRole(t, "app-1", "gateway,api,guild", common, workerFlag(2))
	deadline := time.Now().Add(30 * time.Second)
	relay.waitReady(t, deadline)
	app.waitReady(t, deadline)

	api := rest{addr: app.http, client: &http.Client{Timeout: 20 * time.Second}}
	token := register(t, api, "relay")
	guildID, channelID := newGuild(t, api, token, "big guild")
	s := dial(t, "relay-session", app.http, token)
	s.await(t, "GUILD_CREATE", 15*time.Second, func(fs []dispatch) bool { return countType(fs, "GUILD_CREATE") >= 1 })

	fleetReg := &etcdfleet.Registry{Reg: env.registry(t)}
	if err := fleetReg.SetRelays(ctx, guildID, []string{relayGRPC}); err != nil {
		t.Fatal(err)
	}

	sent := 0
	post := func() {
		sent++
		api.must(t, token, "POST", "/channels/"+channelID+"/messages", map[string]any{"content": fmt.Sprintf("m%d", sent)}, nil)
	}
	awaitAll := func(what string) {
		s.await(t, what, 15*time.Second, func(fs []dispatch) bool { return countType(fs, "MESSAGE_CREATE") >= sent })
	}
	// The guild node picks the list up through its watch: messages start
	// going through the relay once it has.
	relayDeadline := time.Now().Add(15 * time.Second)
	for metric(t, relay.http, "concord_transport_relay_received_requests_total") == 0 {
		if time.Now().After(relayDeadline) {
			t.Fatalf("no request reached the relay after the relay list was published\napp:\n%s\nrelay:\n%s", app.output(), relay.output())
		}
		post()
		awaitAll("message while the relay list propagates")
	}
	before := metric(t, relay.http, "concord_transport_relay_received_requests_total")
	for range 20 {
		post()
	}
	awaitAll("20 messages through the relay")
	if got := metric(t, relay.http, "concord_transport_relay_received_requests_total") - before; got < 20 {
		t.Fatalf("relay received %v requests for 20 messages", got)
	}
	if got := metric(t, app.http, "concord_cluster_relayed_dispatches_total"); got < 20 {
		t.Fatalf("guild node relayed %v dispatches", got)
	}

	// Withdrawn, as the RelayTier controller does before it removes a
	// relay: the guild goes direct again, then the relay can die.
	if err := fleetReg.SetRelays(ctx, guildID, nil); err != nil {
		t.Fatal(err)
	}
	for {
		r1 := metric(t, relay.http, "concord_transport_relay_received_requests_total")
		post()
		awaitAll("message while the withdrawal propagates")
		if metric(t, relay.http, "concord_transport_relay_received_requests_total") == r1 {
			break
		}
		if time.Now().After(relayDeadline.Add(15 * time.Second)) {
			t.Fatal("the guild node kept using a withdrawn relay")
		}
	}
	relay.kill()
	for range 5 {
		post()
	}
	awaitAll("messages after the relay is gone")

	// Every message arrived once, in order.
	var contents []string
	for _, f := range s.snapshot() {
		if f.Type != "MESSAGE_CREATE" {
			continue
		}
		var m struct {
			Content string `json:"content"`
		}
		_ = json.Unmarshal(f.D, &m)
		contents = append(contents, m.Content)
	}
	if len(contents) != sent {
		t.Fatalf("%d MESSAGE_CREATEs for %d messages: %v", len(contents), sent, contents)
	}
	for i, c := range contents {
		if c != fmt.Sprintf("m%d", i+1) {
			t.Fatalf("message %d is %q: order or duplicates broken: %v", i+1, c, contents)
		}
	}
}

func countType(fs []dispatch, typ string) int {
	n := 0
	for _, f := range fs {
		if f.Type == typ {
			n++
		}
	}
	return n
}

// metric reads one unlabelled sample from a node's /metrics.
func metric(t *testing.T, httpAddr, name string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + httpAddr + "/metrics")
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + ` (\S+)$`).FindSubmatch(b)
	if m == nil {
		return 0
	}
	v, _ := strconv.ParseFloat(string(m[1]), 64)
	return v
}
