//go:build integration

package cluster

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/concord-chat/concord/runtime/adapters/registry"
)

// ringOwner is the node a user hashes to on a ring over names, computed
// as every node of the cluster computes it (registry.Ring).
func ringOwner(t *testing.T, names []string, id string) string {
	t.Helper()
	n, ok := registry.NewRing(names, nil, 0).Owner(uint64(mustID(t, id)))
	if !ok {
		t.Fatal("empty ring")
	}
	return n
}

// usersOn registers users until it has one per name of want, each
// hashing to that node on a ring over ring; it returns them in the order
// of want.
func usersOn(t *testing.T, api rest, prefix string, ring, want []string) []clusterUser {
	t.Helper()
	out := make([]clusterUser, len(want))
	found := 0
	for i := 0; found < len(want); i++ {
		if i == 64 {
			t.Fatalf("64 users and not one per node of %v on a ring over %v", want, ring)
		}
		u := newUser(t, api, prefix)
		owner := ringOwner(t, ring, u.id)
		for k, n := range want {
			if n == owner && out[k].id == "" {
				out[k] = u
				found++
				break
			}
		}
	}
	return out
}

// TestReadStateShards runs two read-state replicas (readstate-1 and
// readstate-2) behind one gateway, api and guild node, on Kafka and a
// fresh keyspace. Bob's user hashes to readstate-1, Carol's to
// readstate-2: each replica counts exactly its own user's mentions
// whichever replica consumes the channel's partition, and takes exactly
// its user's acks. After kill -9 of Bob's owner, Bob's records move to the
// survivor: the ack survives, mentions posted while the owner was dead
// or being replaced count once, and events the group redelivers count
// nothing. Restarting the replica moves Bob back with the same counts.
func TestReadStateShards(t *testing.T) {
	kafka := kafkaAddr(t)
	start := time.Now()
	// Generous: on a loaded machine the keyspace alone can take minutes.
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	env := setupCluster(t, ctx, "rsh")
	common := env.nodeArgs(kafkaEventlog(kafka, env.ks), "--readstate-flush-interval=1s", "--log-level=info")
	names := []string{"readstate-1", "readstate-2"}
	startRS := restartableRole(t, "readstate", common)
	// The first replica creates the read-state tables, then the second
	// starts (two replicas creating one Cassandra table at once can race).
	rs := map[string]*proc{"readstate-1": startRS("readstate-1", 1)}
	app := startRole(t, "app-1", "gateway,api,guild", common, workerFlag(3))
	rs["readstate-1"].waitReady(t, time.Now().Add(3*time.Minute))
	rs["readstate-2"] = startRS("readstate-2", 2)
	deadline := time.Now().Add(3 * time.Minute)
	rs["readstate-2"].waitReady(t, deadline)
	app.waitReady(t, deadline)
	t.Logf("cluster: 3 nodes ready after %v", time.Since(start).Round(time.Millisecond))

	api := rest{addr: app.http, client: &http.Client{Timeout: 20 * time.Second}}
	alice := usersOn(t, api, "alice", names, names[:1])[0]
	owned := usersOn(t, api, "member", names, names)
	bob, carol := owned[0], owned[1] // bob on readstate-1, carol on readstate-2
	gID, chID := guildWithMembers(t, api, alice, "read-state shards", owned...)
	post := func(content string) string {
		var m struct {
			ID string `json:"id"`
		}
		api.must(t, alice.token, "POST", "/channels/"+chID+"/messages", map[string]any{"content": content}, &m)
		return m.ID
	}
	both := func(what string) string { return post(what + " <@" + bob.id + "> <@" + carol.id + ">") }

	n := 0
	ready := func(u clusterUser) readState {
		t.Helper()
		n++
		return readyState(t, fmt.Sprintf("session-%d", n), app.http, u, chID, 15*time.Second)
	}
	// awaitCount polls new sessions' READY until u's mention count
	// reaches want (READY is the state to await; there is no event), then
	// requires exactly want.
	awaitCount := func(what string, u clusterUser, want int, timeout time.Duration) readState {
		t.Helper()
		end := time.Now().Add(timeout)
		for {
			st := ready(u)
			if st.MentionCount >= want {
				if st.MentionCount != want {
					t.Fatalf("%s: mention_count %d, want exactly %d (%+v)", what, st.MentionCount, want, st)
				}
				return st
			}
			if time.Now().After(end) {
				t.Fatalf("%s: READY read state %+v after %v, want mention_count %d", what, st, timeout, want)
			}
			select {
			case <-app.done:
				t.Fatalf("app node exited:\n%s", app.output())
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
	metricOn := func(name, metric string) float64 { return metricSum(t, rs[name].http, metric) }

	// Three messages mention both: each owner counts its own user.
	for i := range 3 {
		both(fmt.Sprintf("m%d", i))
	}
	awaitCount("bob, 3 mentions", bob, 3, 30*time.Second)
	awaitCount("carol, 3 mentions", carol, 3, 30*time.Second)
	for _, name := range names {
		if got := metricOn(name, "concord_readstate_mentions_total"); got != 3 {
			t.Fatalf("%s counted %v mentions, want 3 (only its own user's)", name, got)
		}
	}
	t.Logf("mentions counted on both owners after %v", time.Since(start).Round(time.Millisecond))

	// Bob's ack goes to his owner only; MESSAGE_ACK reaches his session.
	bobLive := dial(t, "bob-live", app.http, bob.token)
	// Dial returns before IDENTIFY is answered; the session is routable
	// for user events once it is subscribed, which its GUILD_CREATE shows.
	bobLive.await(t, "GUILD_CREATE", 30*time.Second, func(frames []dispatch) bool {
		return len(guildCreates(frames, gID)) > 0
	})
	last := both("m3")
	awaitCount("bob, 4 mentions", bob, 4, 30*time.Second)
	w0 := metricOn("readstate-1", "concord_readstate_records_written_total")
	status, raw, err := api.do(ctx, bob.token, "POST", "/channels/"+chID+"/messages/"+last+"/ack", map[string]any{}, nil)
	if err != nil || status != http.StatusOK {
		t.Fatalf("ack: status %d, err %v, body %s", status, err, raw)
	}
	bobLive.await(t, "MESSAGE_ACK", 15*time.Second, func(frames []dispatch) bool {
		for _, f := range frames {
			if f.Type == "MESSAGE_ACK" && strings.Contains(string(f.D), `"message_id":"`+last+`"`) {
				return true
			}
		}
		return false
	})
	if a1, a2 := metricOn("readstate-1", "concord_readstate_acks_total"), metricOn("readstate-2", "concord_readstate_acks_total"); a1 != 1 || a2 != 0 {
		t.Fatalf("acks applied: readstate-1 %v, readstate-2 %v; want 1 and 0 (bob is readstate-1's)", a1, a2)
	}
	if w := metricOn("readstate-1", "concord_readstate_records_written_total"); w <= w0 {
		t.Fatalf("readstate-1 answered the ack with %v records written, as many as before it: not written through", w)
	}

	// kill -9 Bob's owner right after that (no flush awaited: an answered
	// ack is in the table); two messages mention both while the ring
	// still names it or has just dropped it.
	rs["readstate-1"].kill()
	killed := time.Now()
	both("m4")
	both("m5")
	// Once the sentinel counts, everything before it in the channel's
	// partition was applied (replays included): the counts are final.
	both("sentinel")
	st := awaitCount("bob after kill -9 of his owner", bob, 3, 120*time.Second)
	if st.LastReadID != last {
		t.Fatalf("bob's ack lost with his owner: %+v, want last_message_id %s", st, last)
	}
	recovery := time.Since(killed)
	awaitCount("carol after the kill", carol, 7, 30*time.Second)
	t.Logf("read-state owner killed: bob's counts correct on the survivor %v later; survivor consumed %v events, dropped %v as already counted",
		recovery.Round(time.Millisecond), metricOn("readstate-2", "concord_readstate_events_total"),
		metricOn("readstate-2", "concord_readstate_duplicate_events_total"))

	// The replica comes back: Bob moves back to it, counts unchanged, and
	// a new mention and an ack work there.
	rs["readstate-1"] = startRS("readstate-1", 1)
	rs["readstate-1"].waitReady(t, time.Now().Add(45*time.Second))
	both("after restart")
	awaitCount("bob after the restart", bob, 4, 120*time.Second)
	awaitCount("carol after the restart", carol, 8, 30*time.Second)
	last = both("final")
	awaitCount("bob, final", bob, 5, 60*time.Second)
	status, raw, err = api.do(ctx, bob.token, "POST", "/channels/"+chID+"/messages/"+last+"/ack", map[string]any{}, nil)
	if err != nil || status != http.StatusOK {
		t.Fatalf("ack after the restart: status %d, err %v, body %s", status, err, raw)
	}
	if st := ready(bob); st.LastReadID != last || st.MentionCount != 0 {
		t.Fatalf("after the second ack: %+v, want last_message_id %s and mention_count 0", st, last)
	}
	if a := metricOn("readstate-1", "concord_readstate_acks_total"); a != 1 {
		t.Fatalf("restarted readstate-1 applied %v acks, want bob's 1 (he is back on it)", a)
	}
	awaitCount("carol, final", carol, 9, 30*time.Second)
	t.Logf("restarted replica serving again; total %v", time.Since(start).Round(time.Millisecond))
}
