//go:build integration

package cluster

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestRateLimitsSharedAcrossAPINodes runs two api nodes on one Redis
// (--redis): a channel's message bucket (5 per 5 s) is one bucket whichever
// api node a request reaches, so the sixth send, split over both nodes,
// gets 429 with Retry-After, Via and the X-RateLimit headers.
func TestRateLimitsSharedAcrossAPINodes(t *testing.T) {
	redis := needEnv(t, "CONCORD_TEST_REDIS", "run `make test`, or start one with `hack/redis/start.sh` and export what it prints")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	env := setupCluster(t, ctx, "rl")
	common := env.nodeArgs("--rate-limits=true")
	counters := fmt.Sprintf("--redis=redis://%s?prefix=rl%x:", redis, rand.Uint32())
	guildNode := startRole(t, "guild-1", "guild,gateway", common)
	api1 := startNode(t, "api-1", freeAddr(t), append([]string{"--roles=api", counters, "--data-dir=" + t.TempDir()}, common...)...)
	api2 := startNode(t, "api-2", freeAddr(t), append([]string{"--roles=api", counters, "--data-dir=" + t.TempDir()}, common...)...)
	deadline := time.Now().Add(30 * time.Second)
	for _, p := range []*proc{guildNode, api1, api2} {
		p.waitReady(t, deadline)
	}
	client := &http.Client{Timeout: 20 * time.Second}
	a1, a2 := rest{addr: api1.http, client: client}, rest{addr: api2.http, client: client}
	token := register(t, a1, "rl")
	_, channelID := newGuild(t, a1, token, "limits")

	send := func(r rest, i int) *http.Response {
		req, _ := http.NewRequestWithContext(ctx, "POST", "http://"+r.addr+"/api/v10/channels/"+channelID+"/messages",
			strings.NewReader(fmt.Sprintf(`{"content":"m%d"}`, i)))
		req.Header.Set("Authorization", token)
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	for i := range 5 {
		r := a1
		if i%2 == 1 {
			r = a2
		}
		resp := send(r, i)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("send %d through %s: %s", i, r.addr, resp.Status)
		}
		if resp.Header.Get("X-RateLimit-Limit") != "5" || resp.Header.Get("X-RateLimit-Bucket") == "" {
			t.Fatalf("send %d: X-RateLimit-Limit %q bucket %q", i, resp.Header.Get("X-RateLimit-Limit"), resp.Header.Get("X-RateLimit-Bucket"))
		}
		if want := fmt.Sprint(4 - i); resp.Header.Get("X-RateLimit-Remaining") != want {
			t.Fatalf("send %d through %s: X-RateLimit-Remaining %q, want %s (one bucket across api nodes)", i, r.addr, resp.Header.Get("X-RateLimit-Remaining"), want)
		}
	}
	resp := send(a2, 5)
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" || resp.Header.Get("Via") == "" {
		t.Fatalf("sixth send on the other api node: %s, Retry-After %q, Via %q; want 429 from the shared bucket",
			resp.Status, resp.Header.Get("Retry-After"), resp.Header.Get("Via"))
	}
}
