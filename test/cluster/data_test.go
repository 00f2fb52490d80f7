//go:build integration

package cluster

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/concord-chat/concord/runtime/adapters/registry"
)

// TestKillDataNode runs 2 data nodes (--roles=data) and one node running
// gateway, api and guild with --data-nodes=ring on a fresh Cassandra
// keyspace and an embedded etcd, posts messages to channels owned by
// both data nodes, kills -9 one data node mid-traffic while readers page
// through history, and checks that every acknowledged message is in
// history and that reads keep working: requests cut by the kill, and
// those sent before the registry dropped the dead node, retry onto the
// channel's new owner.
func TestKillDataNode(t *testing.T) {
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	env := setupCluster(t, ctx, "data")
	dataRing := watchRing(t, ctx, env.registry(t), registry.RoleData)

	t.Logf("setup: keyspace and binary ready after %v", time.Since(start).Round(time.Millisecond))

	common := env.nodeArgs("--data-dir="+t.TempDir(), "--log-level=info")
	procs := map[string]*proc{}
	for i, s := range []struct{ name, roles string }{{"data-1", "data"}, {"data-2", "data"}, {"app-1", "gateway,api,guild"}} {
		args := append([]string{"--roles=" + s.roles, "--grpc=" + freeAddr(t), fmt.Sprintf("--worker=%d", i+1), "--data-nodes=ring"}, common...)
		procs[s.name] = startNode(t, s.name, freeAddr(t), args...)
	}
	deadline := time.Now().Add(30 * time.Second)
	for _, p := range procs {
		p.waitReady(t, deadline)
	}
	waitRing(t, dataRing, 2)
	t.Logf("cluster: 3 nodes ready after %v", time.Since(start).Round(time.Millisecond))

	api := rest{addr: procs["app-1"].http, client: &http.Client{Timeout: 30 * time.Second}}
	token := register(t, api, "d")
	guildID := createGuild(t, api, token, "data guild")
	// Channels until each data node owns at least two.
	owned := map[string][]string{} // data node → channel ids
	var channels []string
	for i := 0; i < 24 && (len(owned) < 2 || len(owned["data-1"]) < 2 || len(owned["data-2"]) < 2); i++ {
		var c struct {
			ID string `json:"id"`
		}
		api.must(t, token, "POST", "/guilds/"+guildID+"/channels", map[string]any{"name": fmt.Sprintf("c%d", i), "type": 0}, &c)
		n, ok := dataRing.Owner(mustID(t, c.ID))
		if !ok {
			t.Fatal("no data node owns a channel")
		}
		owned[n.Name] = append(owned[n.Name], c.ID)
		channels = append(channels, c.ID)
	}
	if len(owned["data-1"]) == 0 || len(owned["data-2"]) == 0 {
		t.Fatalf("every channel landed on one data node: %v", owned)
	}
	victimName := "data-1"
	victim := procs[victimName]
	t.Logf("channels: %d, on data-1 %d, on data-2 %d", len(channels), len(owned["data-1"]), len(owned["data-2"]))

	// Readers page through the victim's channels the whole time; two
	// readers per channel, so identical reads are in flight together.
	var reads, readFailures atomic.Int64
	var failMu sync.Mutex
	readErrs := map[string]int{}
	readQuit := make(chan struct{})
	var readWG sync.WaitGroup
	for _, ch := range owned[victimName] {
		for range 2 {
			readWG.Add(1)
			go func() {
				defer readWG.Done()
				for {
					select {
					case <-readQuit:
						return
					default:
					}
					rctx, rcancel := context.WithTimeout(ctx, 20*time.Second)
					var page []message
					status, raw, err := api.do(rctx, token, "GET", "/channels/"+ch+"/messages?limit=50", nil, &page)
					rcancel()
					reads.Add(1)
					if err != nil || status != http.StatusOK {
						readFailures.Add(1)
						failMu.Lock()
						readErrs[fmt.Sprintf("%d %v %s", status, err, raw)]++
						failMu.Unlock()
					}
				}
			}()
		}
	}

	wr := &writerPool{api: api, channels: channels, progress: make(chan struct{}, 1024), tokens: []string{token, token, token}}
	wr.start(ctx, "a")
	wr.await(t, 15, 20*time.Second)

	changes := dataRing.Changes(ctx)
	before, readsBefore := wr.acked(), reads.Load()
	killedAt := time.Now()
	victim.kill()
	t.Logf("killed %s (-9) after %d acknowledged messages and %d reads", victimName, before, readsBefore)
	for dataRing.View().Len() != 1 {
		select {
		case <-changes:
		case <-time.After(4 * leaseTTL):
			t.Fatalf("the data ring still has %d nodes %v after the kill", dataRing.View().Len(), time.Since(killedAt))
		}
	}
	t.Logf("ring: %s dropped %v after the kill", victimName, time.Since(killedAt).Round(time.Millisecond))
	wr.await(t, wr.acked()+15, 20*time.Second)
	wr.stop()
	close(readQuit)
	readWG.Wait()
	acks := wr.acks
	t.Logf("writers: %d acknowledged (%d before the kill); failures %v", len(acks), before, wr.failures)
	t.Logf("readers: %d reads (%d after the kill), %d failed %v", reads.Load(), reads.Load()-readsBefore, readFailures.Load(), readErrs)
	if readFailures.Load() > 0 {
		t.Errorf("%d history reads failed across the kill: %v", readFailures.Load(), readErrs)
	}
	// The traffic went through the data nodes, and requests cut by the
	// kill were retried by the app node's router.
	retries := metricSum(t, procs["app-1"].http, "concord_dataservice_router_retries_total")
	served := metricSum(t, procs["data-2"].http, "concord_dataservice_requests_total")
	if served == 0 {
		t.Error("data-2 served no request: messages did not go through the data nodes")
	}
	if retries == 0 {
		t.Error("the app node's router retried nothing although reads of the killed node's channels were in flight")
	}

	// History has every acknowledged message, read through the survivor.
	history := map[string]bool{}
	for _, ch := range channels {
		for _, m := range channelHistory(t, api, token, ch) {
			history[m.ID] = true
		}
	}
	missing := 0
	for _, a := range acks {
		if !history[a.id] {
			missing++
			t.Errorf("acknowledged message %s (%s) is missing from the history of channel %s", a.id, a.nonce, a.channel)
		}
	}
	t.Logf("history: %d acknowledged messages checked, %d missing; router retries %v, requests served by data-2 %v; total %v",
		len(acks), missing, retries, served, time.Since(start).Round(time.Millisecond))
}

// metricSum fetches /metrics from addr and sums the samples of name.
func metricSum(t *testing.T, addr, name string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatalf("metrics of %s: %v", addr, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("metrics of %s: %v", addr, err)
	}
	var sum float64
	for _, line := range strings.Split(string(body), "\n") {
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		var v float64
		if _, err := fmt.Sscan(line[strings.LastIndexByte(line, ' ')+1:], &v); err == nil {
			sum += v
		}
	}
	return sum
}
