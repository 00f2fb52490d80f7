package cluster

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestServeAllRolesOneProcess runs `concord serve` with every role in one
// process on a Pebble store and an embedded registry: REST is forwarded
// by the api role to the process's own guild role, and a gateway session
// gets its GUILD_CREATE and a message over the node's own gRPC.
func TestServeAllRolesOneProcess(t *testing.T) {
	p := startNode(t, "solo", freeAddr(t), "--roles=gateway,api,guild", "--data-dir="+t.TempDir(), "--lease-ttl=2s")
	p.waitReady(t, time.Now().Add(30*time.Second))
	api := rest{addr: p.http, client: &http.Client{Timeout: 10 * time.Second}}

	token := register(t, api, "solo")
	guildID := createGuild(t, api, token, "solo guild")
	channel := firstChannel(t, api, token, guildID)

	s := dial(t, "solo-session", p.http, token)
	s.await(t, "GUILD_CREATE", 10*time.Second, func(fs []dispatch) bool { return len(guildCreates(fs, guildID)) == 1 })
	var m struct {
		ID string `json:"id"`
	}
	api.must(t, token, "POST", "/channels/"+channel+"/messages", map[string]any{"content": "hello"}, &m)
	s.await(t, "MESSAGE_CREATE "+m.ID, 10*time.Second, func(fs []dispatch) bool {
		for _, msg := range messages(fs) {
			if msg.ID == m.ID {
				return true
			}
		}
		return false
	})
	if err := checkSeq(s.snapshot()); err != nil {
		t.Fatal(err)
	}

	// /metrics serves the node's series and the transport's.
	resp, err := http.Get("http://" + p.http + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{"concord_cluster_resubscriptions_total", "concord_transport_server_handled_total", "concord_permissions_shadow_disagreements_total", "go_goroutines"} {
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), want) {
			t.Fatalf("/metrics: %d, no %s:\n%.2000s", resp.StatusCode, want, body)
		}
	}

	// Splitting the roles needs the shared store and registry.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := execConcord(ctx, t, "serve", "--roles=guild", "--server-key="+fmt.Sprintf("%064d", 0), "--data-dir="+t.TempDir(), "--registry=embedded", "--store=cassandra://127.0.0.1:1/ks")
	if err == nil || !strings.Contains(out, "--registry=embedded serves this process only") || strings.Contains(out, "panic") {
		t.Fatalf("serve --roles=guild --registry=embedded: %v\n%s", err, out)
	}
	out, err = execConcord(ctx, t, "serve", "--roles=guild", "--server-key="+fmt.Sprintf("%064d", 0), "--data-dir="+t.TempDir(), "--registry=etcd://127.0.0.1:1")
	if err == nil || !strings.Contains(out, "is not shared between processes") {
		t.Fatalf("serve --roles=guild on Pebble: %v\n%s", err, out)
	}
	out, err = execConcord(ctx, t, "serve", "--roles=guild", "--data-dir="+t.TempDir(), "--registry=etcd://127.0.0.1:1", "--store=cassandra://127.0.0.1:1/ks")
	if err == nil || !strings.Contains(out, "must share the token key") {
		t.Fatalf("serve --roles=guild without --server-key: %v\n%s", err, out)
	}
}
