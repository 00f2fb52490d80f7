//go:build integration

package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"
)

// readState is one entry of READY's read_state.
type readState struct {
	ID           string `json:"id"`
	LastReadID   string `json:"last_message_id"`
	MentionCount int    `json:"mention_count"`
}

// TestReadStateNode runs a read-state node (--roles=readstate) and one
// node running gateway, api and guild, both on Kafka (--eventlog) and a
// fresh Cassandra keyspace: a mention counts, an ack via REST clears it
// (MESSAGE_ACK reaches the user's session, a new session's READY shows
// the marker), and after kill -9 and a restart of the read-state node the
// counts are rebuilt from the table and the log's committed offsets
// without counting any mention twice.
func TestReadStateNode(t *testing.T) {
	cass, kafka := os.Getenv("CONCORD_CASSANDRA"), os.Getenv("CONCORD_KAFKA")
	if cass == "" || kafka == "" {
		t.Fatalf("CONCORD_CASSANDRA=%q and CONCORD_KAFKA=%q must both be set (host:port): start them with "+
			"`hack/cassandra/start.sh` and `bash hack/kafka/kafka.sh start`, then e.g. "+
			"CONCORD_CASSANDRA=127.0.0.1:9042 CONCORD_KAFKA=127.0.0.1:9092 go test -tags integration ./test/cluster/", cass, kafka)
	}
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	env := setupCluster(t, ctx, "rs")
	endpoint, ks := env.endpoint, env.ks

	common := []string{
		"--rate-limits=false", // the test sends faster than REST allows
		"--registry=etcd://" + strings.TrimPrefix(endpoint, "http://"),
		"--store=cassandra://" + cass + "/" + ks + "?rf=1",
		"--eventlog=kafka://" + kafka + "?topic_prefix=" + ks + ".", // this cluster's own topics and groups
		"--server-key=" + fmt.Sprintf("%064x", rand.Uint64()),
		"--lease-ttl=" + leaseTTL.String(),
		"--retry-interval=500ms",
		"--readstate-flush-interval=1s",
		"--log-level=info",
	}
	rsArgs := append([]string{"--roles=readstate", "--grpc=" + freeAddr(t), "--worker=1", "--data-dir=" + t.TempDir()}, common...)
	rsHTTP := freeAddr(t)
	rs := startNode(t, "readstate-1", rsHTTP, rsArgs...)
	app := startNode(t, "app-1", freeAddr(t),
		append([]string{"--roles=gateway,api,guild", "--grpc=" + freeAddr(t), "--worker=2", "--data-dir=" + t.TempDir()}, common...)...)
	deadline := time.Now().Add(30 * time.Second)
	rs.waitReady(t, deadline)
	app.waitReady(t, deadline)
	t.Logf("cluster: 2 nodes ready after %v", time.Since(start).Round(time.Millisecond))

	api := rest{addr: app.http, client: &http.Client{Timeout: 20 * time.Second}}
	type user struct{ token, id string }
	newUser := func(prefix string) user {
		var u struct {
			Token string `json:"token"`
		}
		api.must(t, "", "POST", "/auth/register", map[string]any{"username": fmt.Sprintf("%s_%x", prefix, rand.Uint32()), "password": "correct-horse-1"}, &u)
		var me struct {
			ID string `json:"id"`
		}
		api.must(t, u.Token, "GET", "/users/@me", nil, &me)
		return user{u.Token, me.ID}
	}
	alice, bob, carol := newUser("alice"), newUser("bob"), newUser("carol")
	var g, ch struct {
		ID string `json:"id"`
	}
	api.must(t, alice.token, "POST", "/guilds", map[string]any{"name": "read states"}, &g)
	api.must(t, alice.token, "POST", "/guilds/"+g.ID+"/channels", map[string]any{"name": "general", "type": 0}, &ch)
	var inv struct {
		Code string `json:"code"`
	}
	api.must(t, alice.token, "POST", "/channels/"+ch.ID+"/invites", map[string]any{}, &inv)
	api.must(t, bob.token, "POST", "/invites/"+inv.Code, map[string]any{}, nil)
	api.must(t, carol.token, "POST", "/invites/"+inv.Code, map[string]any{}, nil)
	post := func(content string) string {
		var m struct {
			ID string `json:"id"`
		}
		api.must(t, alice.token, "POST", "/channels/"+ch.ID+"/messages", map[string]any{"content": content}, &m)
		return m.ID
	}

	// ready identifies a new session of u and returns its read state in
	// the channel (zero when READY has none).
	n := 0
	ready := func(u user) readState {
		t.Helper()
		n++
		s := dial(t, fmt.Sprintf("session-%d", n), app.http, u.token)
		defer s.Close()
		var d struct {
			ReadState struct {
				Entries []readState `json:"entries"`
			} `json:"read_state"`
		}
		s.await(t, "READY", 10*time.Second, func(frames []dispatch) bool {
			for _, f := range frames {
				if f.Type == "READY" {
					if err := json.Unmarshal(f.D, &d); err != nil {
						t.Fatalf("READY: %v", err)
					}
					return true
				}
			}
			return false
		})
		for _, e := range d.ReadState.Entries {
			if e.ID == ch.ID {
				return e
			}
		}
		return readState{}
	}
	// awaitState polls new sessions' READY until cond holds.
	awaitState := func(what string, u user, timeout time.Duration, cond func(readState) bool) readState {
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
	// awaitFlush waits until the read-state node wrote more records than
	// it had when called (its write-behind flush ran after the change).
	written := func() float64 { return metricSum(t, rsHTTP, "concord_readstate_records_written_total") }
	awaitFlush := func(what string, before float64) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for written() <= before {
			if time.Now().After(deadline) {
				t.Fatalf("%s: no flush within 10s", what)
			}
			time.Sleep(50 * time.Millisecond) // polling a counter: no event to await
		}
	}

	// A mention counts.
	bobSession := dial(t, "bob-live", app.http, bob.token)
	m1 := post("hi <@" + bob.id + ">")
	awaitState("first mention", bob, 15*time.Second, func(s readState) bool { return s.MentionCount >= 1 })
	if st := ready(bob); st.MentionCount != 1 {
		t.Fatalf("after one mention: %+v, want mention_count 1", st)
	}
	t.Logf("mention counted after %v", time.Since(start).Round(time.Millisecond))

	// The ack clears it, on the live session (MESSAGE_ACK) and in READY.
	w0 := written()
	status, raw, err := api.do(ctx, bob.token, "POST", "/channels/"+ch.ID+"/messages/"+m1+"/ack", map[string]any{}, nil)
	if err != nil || status != http.StatusOK {
		t.Fatalf("ack: status %d, err %v, body %s", status, err, raw)
	}
	bobSession.await(t, "MESSAGE_ACK", 10*time.Second, func(frames []dispatch) bool {
		for _, f := range frames {
			if f.Type == "MESSAGE_ACK" && strings.Contains(string(f.D), `"message_id":"`+m1+`"`) {
				return true
			}
		}
		return false
	})
	if st := ready(bob); st.LastReadID != m1 || st.MentionCount != 0 {
		t.Fatalf("after the ack: %+v, want last_message_id %s and mention_count 0", st, m1)
	}
	awaitFlush("ack", w0)

	// m2 is counted and written behind; m3 is counted, and the node is
	// killed at once, most likely before m3's flush.
	post("again <@" + bob.id + ">")
	awaitState("second mention", bob, 15*time.Second, func(s readState) bool { return s.MentionCount >= 1 })
	w1 := written()
	awaitFlush("second mention", w1)
	post("and again <@" + bob.id + ">")
	awaitState("third mention", bob, 15*time.Second, func(s readState) bool { return s.MentionCount >= 2 })
	rs.kill()
	killed := time.Now()
	t.Logf("read-state node killed after %v", time.Since(start).Round(time.Millisecond))

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
	if st := ready(bob); st.LastReadID != m1 || st.MentionCount != 3 {
		t.Fatalf("after kill -9 and restart: %+v, want last_message_id %s and mention_count 3 (m2, m3, m4 once each)", st, m1)
	}
	if st := ready(carol); st.MentionCount != 1 {
		t.Fatalf("carol after the restart: %+v, want mention_count 1", st)
	}
	t.Logf("total %v", time.Since(start).Round(time.Millisecond))
}
