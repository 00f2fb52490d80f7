//go:build integration

package cluster

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestReadStateNode runs a read-state node (--roles=readstate) and one
// node running gateway, api and guild, both on Kafka (--eventlog) and a
// fresh Cassandra keyspace: mentions count, and an ack via REST is in the
// table when it is answered — the read-state node is killed with -9 the
// moment the ack returns, and after its restart READY shows the marker —
// while MESSAGE_ACK reaches the user's session; the counts are rebuilt
// from the table and the log's committed offsets without counting any
// mention twice.
func TestReadStateNode(t *testing.T) {
	kafka := kafkaAddr(t)
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	env := setupCluster(t, ctx, "rs")
	common := env.nodeArgs(kafkaEventlog(kafka, env.ks), "--readstate-flush-interval=1s", "--log-level=info")
	rsArgs := append([]string{"--roles=readstate", "--grpc=" + freeAddr(t), "--worker=1", "--data-dir=" + t.TempDir()}, common...)
	rsHTTP := freeAddr(t)
	rs := startNode(t, "readstate-1", rsHTTP, rsArgs...)
	app := startRole(t, "app-1", "gateway,api,guild", common, workerFlag(2))
	deadline := time.Now().Add(30 * time.Second)
	rs.waitReady(t, deadline)
	app.waitReady(t, deadline)
	t.Logf("cluster: 2 nodes ready after %v", time.Since(start).Round(time.Millisecond))

	api := rest{addr: app.http, client: &http.Client{Timeout: 20 * time.Second}}
	alice, bob, carol := newUser(t, api, "alice"), newUser(t, api, "bob"), newUser(t, api, "carol")
	_, chID := guildWithMembers(t, api, alice, "read states", bob, carol)
	post := func(content string) string {
		var m struct {
			ID string `json:"id"`
		}
		api.must(t, alice.token, "POST", "/channels/"+chID+"/messages", map[string]any{"content": content}, &m)
		return m.ID
	}
	n := 0
	ready := func(u clusterUser) readState {
		t.Helper()
		n++
		return readyState(t, fmt.Sprintf("session-%d", n), app.http, u, chID, 10*time.Second)
	}
	// awaitState polls new sessions' READY until cond holds.
	awaitState := func(what string, u clusterUser, timeout time.Duration, cond func(readState) bool) readState {
		t.Helper()
		deadline := time.Now().Add(timeout)
		for {
			st := ready(u)
			if cond(st) {
				return st
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: READY read state %+v after %v", what, st, timeout)
			}
			select {
			case <-rs.done:
				t.Fatalf("read-state node exited:\n%s", rs.output())
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
	// A mention counts.
	bobSession := dial(t, "bob-live", app.http, bob.token)
	post("hi <@" + bob.id + ">")
	awaitState("first mention", bob, 15*time.Second, func(s readState) bool { return s.MentionCount >= 1 })
	if st := ready(bob); st.MentionCount != 1 {
		t.Fatalf("after one mention: %+v, want mention_count 1", st)
	}
	t.Logf("mention counted after %v", time.Since(start).Round(time.Millisecond))

	// m2 and m3 are counted; then bob acks m3 and the read-state node is
	// killed the moment the ack is answered, before any flush interval
	// has passed: the answered ack must be in the table.
	post("again <@" + bob.id + ">")
	m3 := post("and again <@" + bob.id + ">")
	awaitState("three mentions", bob, 15*time.Second, func(s readState) bool { return s.MentionCount >= 3 })
	status, raw, err := api.do(ctx, bob.token, "POST", "/channels/"+chID+"/messages/"+m3+"/ack", map[string]any{}, nil)
	if err != nil || status != http.StatusOK {
		t.Fatalf("ack: status %d, err %v, body %s", status, err, raw)
	}
	rs.kill()
	killed := time.Now()
	t.Logf("read-state node killed right after the ack, %v in", time.Since(start).Round(time.Millisecond))
	// MESSAGE_ACK reaches bob's live session (sent by the node that took
	// the ack, not the read-state node).
	bobSession.await(t, "MESSAGE_ACK", 10*time.Second, func(frames []dispatch) bool {
		for _, f := range frames {
			if f.Type == "MESSAGE_ACK" && strings.Contains(string(f.D), `"message_id":"`+m3+`"`) {
				return true
			}
		}
		return false
	})

	rs = startNode(t, "readstate-1", rsHTTP, rsArgs...)
	rs.waitReady(t, time.Now().Add(30*time.Second))
	// m4 mentions bob, then m5 carol: once carol's mention shows, the
	// consumer has applied everything before it in the channel's
	// partition, replays included, so bob's count is final.
	post("back <@" + bob.id + ">")
	post("hello <@" + carol.id + ">")
	// The group gives the killed member's partitions to the new one only
	// after the old session times out, then rebalances: slow on a loaded
	// machine.
	awaitState("mention after the restart", carol, 90*time.Second, func(s readState) bool { return s.MentionCount >= 1 })
	t.Logf("read-state node consuming again %v after the kill; since the restart it consumed %v events, dropped %v as already counted",
		time.Since(killed).Round(time.Millisecond), metricSum(t, rsHTTP, "concord_readstate_events_total"),
		metricSum(t, rsHTTP, "concord_readstate_duplicate_events_total"))
	if st := ready(bob); st.LastReadID != m3 || st.MentionCount != 1 {
		t.Fatalf("after kill -9 and restart: %+v, want the answered ack's last_message_id %s and mention_count 1 (m4 once; m1-m3 read)", st, m3)
	}
	if st := ready(carol); st.MentionCount != 1 {
		t.Fatalf("carol after the restart: %+v, want mention_count 1", st)
	}
	t.Logf("total %v", time.Since(start).Round(time.Millisecond))
}
