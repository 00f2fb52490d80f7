//go:build integration

package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/concord-chat/concord/operator/fleet/etcdfleet"
)

// TestSlicedRelayKill runs two relay nodes beside a node running gateway,
// api and guild with --relay-threshold=4: a guild with 8 sessions hands
// them to its two relays (4 each), which filter them themselves
// (concord_transport_slice_received_entries_total rises on both). Under a
// steady stream of messages from four posters one relay is killed with
// SIGKILL: the guild node re-homes its sessions on the other
// (concord_guild_slice_rehomed_sessions_total), and every message posted
// after that reaches all 8 sessions. What was in flight to the dead relay
// may be lost (history is the truth); the test reports how much.
func TestSlicedRelayKill(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	env := setupCluster(t, ctx, "slices")
	common := env.nodeArgs()
	relayGRPC := []string{freeAddr(t), freeAddr(t)}
	var relays []*proc
	for i, g := range relayGRPC {
		relays = append(relays, startNode(t, fmt.Sprintf("relay-%d", i+1), freeAddr(t),
			append([]string{"--roles=relay", "--grpc=" + g, fmt.Sprintf("--worker=%d", i+1), "--data-dir=" + t.TempDir()}, common...)...))
	}
	app := startRole(t, "app-1", "gateway,api,guild", common, workerFlag(3), "--relay-threshold=4")
	deadline := time.Now().Add(30 * time.Second)
	for _, r := range relays {
		r.waitReady(t, deadline)
	}
	app.waitReady(t, deadline)

	api := rest{addr: app.http, client: &http.Client{Timeout: 20 * time.Second}}
	owner := newUser(t, api, "sliced")
	var posters []clusterUser
	for range 3 {
		posters = append(posters, newUser(t, api, "poster"))
	}
	guildID, channelID := guildWithMembers(t, api, owner, "sliced guild", posters...)
	posters = append(posters, owner)
	fleetReg := &etcdfleet.Registry{Reg: env.registry(t)}
	if err := fleetReg.SetRelays(ctx, guildID, relayGRPC); err != nil {
		t.Fatal(err)
	}
	// The guild node follows the relay list through a watch; with one
	// session the guild is below the threshold and relays its batches the
	// old way, which shows the list arrived.
	first := dial(t, "s0", app.http, owner.token)
	first.await(t, "GUILD_CREATE", 15*time.Second, func(fs []dispatch) bool { return countType(fs, "GUILD_CREATE") >= 1 })
	for n := 0; relayCounter(t, relays, "concord_transport_relay_received_requests_total") == 0; n++ {
		if time.Now().After(deadline.Add(15 * time.Second)) {
			t.Fatalf("the relay list never reached the guild node\n%s", app.output())
		}
		api.must(t, owner.token, "POST", "/channels/"+channelID+"/messages", map[string]any{"content": fmt.Sprintf("warm-%d", n)}, nil)
		first.await(t, "a warm-up message", 15*time.Second, func(fs []dispatch) bool { return countType(fs, "MESSAGE_CREATE") > n })
	}
	sessions := []*wsSession{first}
	for i := 1; i < 8; i++ {
		s := dial(t, fmt.Sprintf("s%d", i), app.http, owner.token)
		s.await(t, "GUILD_CREATE", 15*time.Second, func(fs []dispatch) bool { return countType(fs, "GUILD_CREATE") >= 1 })
		sessions = append(sessions, s)
	}
	for i, r := range relays {
		if metric(t, r.http, "concord_transport_slice_received_entries_total") == 0 {
			t.Fatalf("relay %d received no slice entries: the 8 sessions were not handed to both relays\n%s", i+1, app.output())
		}
	}

	// Steady load: four posters, each inside its 5-per-5-s channel limit.
	var mu sync.Mutex
	var posted []string
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for p, u := range posters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tick := time.NewTicker(time.Second + time.Duration(p)*10*time.Millisecond)
			defer tick.Stop()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				case <-tick.C:
				}
				content := fmt.Sprintf("p%d-%d", p, i)
				status, raw, err := api.do(ctx, u.token, "POST", "/channels/"+channelID+"/messages", map[string]any{"content": content}, nil)
				if err == nil && status == 200 {
					mu.Lock()
					posted = append(posted, content)
					mu.Unlock()
				} else {
					t.Logf("poster %d: %d %s %v", p, status, raw, err)
				}
			}
		}()
	}
	received := func(fs []dispatch) map[string]bool {
		out := make(map[string]bool)
		for _, f := range fs {
			if f.Type == "MESSAGE_CREATE" {
				var m struct {
					Content string `json:"content"`
				}
				_ = json.Unmarshal(f.D, &m)
				out[m.Content] = true
			}
		}
		return out
	}
	awaitPosted := func(what string, from int) {
		mu.Lock()
		want := append([]string(nil), posted[from:]...)
		mu.Unlock()
		for _, s := range sessions {
			s.await(t, what, 20*time.Second, func(fs []dispatch) bool {
				got := received(fs)
				for _, c := range want {
					if !got[c] {
						return false
					}
				}
				return true
			})
		}
	}
	// Messages flow to all 8 through both relays before the kill.
	waitPosted := func(n int) {
		t.Helper()
		limit := time.Now().Add(30 * time.Second)
		for len(snapshotLen(&mu, &posted)) < n {
			if time.Now().After(limit) {
				t.Fatalf("only %d messages posted in 30 s, want %d\n%s", len(snapshotLen(&mu, &posted)), n, app.output())
			}
			<-time.After(200 * time.Millisecond) // the posters' pace; nothing to await
		}
	}
	waitPosted(8)
	t.Logf("load running: %d messages posted", len(snapshotLen(&mu, &posted)))
	awaitPosted("every message before the kill", 0)
	killedAt := len(snapshotLen(&mu, &posted))
	relays[1].kill()
	killed := time.Now()
	for metric(t, app.http, "concord_guild_slice_rehomed_sessions_total") == 0 {
		if time.Since(killed) > 30*time.Second {
			t.Fatalf("no session re-homed 30 s after a relay died\n%s", app.output())
		}
		<-time.After(100 * time.Millisecond) // polling a metric: nothing to await
	}
	t.Logf("sessions re-homed %v after the kill", time.Since(killed))
	rehomedAt := len(snapshotLen(&mu, &posted))
	// Three more seconds of load on the surviving relay.
	waitPosted(rehomedAt + 12)
	close(stop)
	wg.Wait()
	awaitPosted("every message posted after re-homing", rehomedAt)
	lost := 0
	all := snapshotLen(&mu, &posted)
	for _, s := range sessions {
		got := received(s.snapshot())
		for _, c := range all[killedAt:rehomedAt] {
			if !got[c] {
				lost++
			}
		}
	}
	t.Logf("%d messages posted in total, %d between the kill and re-homing; deliveries lost in that window: %d of %d",
		len(all), rehomedAt-killedAt, lost, (rehomedAt-killedAt)*len(sessions))
}

// snapshotLen copies the posted list under its lock.
func snapshotLen(mu *sync.Mutex, posted *[]string) []string {
	mu.Lock()
	defer mu.Unlock()
	return append([]string(nil), (*posted)...)
}

// relayCounter sums a counter over relay nodes.
func relayCounter(t *testing.T, relays []*proc, name string) float64 {
	sum := 0.0
	for _, r := range relays {
		sum += metric(t, r.http, name)
	}
	return sum
}
