//go:build integration

package cluster

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"

	"github.com/concord-chat/concord/runtime/adapters/registry"
)

// leaseTTL is the nodes' registry lease: a killed node's guilds move
// after about this long.
const leaseTTL = 2 * time.Second

// ack is one message the API node answered 200 for.
type ack struct {
	id      string
	channel string
	nonce   string
	sentAt  time.Time // when the POST was sent
}

// TestKillGuildNode runs 2 gateway, 2 guild and 1 API `concord serve`
// processes on loopback sharing a fresh Cassandra keyspace and an
// embedded etcd, puts real WebSocket sessions on both gateways, and
// kills -9 the guild node owning the main guild while writers post
// through the API node. It checks that every acknowledged message is in
// history, that every session gets a fresh GUILD_CREATE from the new
// owner (its old owner died) and keeps receiving messages; that when the
// killed node comes back and takes the guild again every message posted
// since reaches every session, without a GUILD_CREATE (a move between
// live nodes); that sessions agree on one order per channel, and that
// sequence numbers have no gap.
func TestKillGuildNode(t *testing.T) {
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	// Registry: an embedded etcd, which the test watches like a gateway;
	// store: a fresh keyspace.
	env := setupCluster(t, ctx, "cluster")
	reg := env.registry(t)
	guildRing := watchRing(t, ctx, reg, registry.RoleGuild)
	gatewayRing := watchRing(t, ctx, reg, registry.RoleGateway)

	t.Logf("setup: keyspace and binary ready after %v (schema %v)", time.Since(start).Round(time.Millisecond), env.schemaTook.Round(time.Millisecond))

	common := env.nodeArgs("--data-dir="+t.TempDir(), "--log-level=info")
	type spec struct{ name, roles string }
	specs := []spec{{"guild-1", "guild"}, {"guild-2", "guild"}, {"gateway-1", "gateway"}, {"gateway-2", "gateway"}, {"api-1", "api"}}
	procs := map[string]*proc{}
	args := map[string][]string{}
	for i, s := range specs {
		args[s.name] = append([]string{"--roles=" + s.roles, "--grpc=" + freeAddr(t), "--worker=" + strconv.Itoa(i+1)}, common...)
		procs[s.name] = startNode(t, s.name, freeAddr(t), args[s.name]...)
	}
	deadline := time.Now().Add(45 * time.Second)
	for _, s := range specs {
		procs[s.name].waitReady(t, deadline)
	}
	waitRing(t, guildRing, 2)
	waitRing(t, gatewayRing, 2)
	t.Logf("cluster: 5 nodes ready after %v", time.Since(start).Round(time.Millisecond))

	api := rest{addr: procs["api-1"].http, client: &http.Client{Timeout: 30 * time.Second}}

	// Users, guilds on both guild nodes, a main guild with two channels
	// every user joins.
	users := make([]clusterUser, 6)
	for i := range users {
		users[i] = newUser(t, api, fmt.Sprintf("u%d", i))
	}
	owner := users[0].token
	owners := map[string][]string{} // node → guild ids
	var guilds []string
	for i := 0; i < 24 && (len(owners) < 2 || len(guilds) < 4); i++ {
		guildID := createGuild(t, api, owner, fmt.Sprintf("guild %d", i))
		n, ok := guildRing.Owner(mustID(t, guildID))
		if !ok {
			t.Fatal("no guild node owns a guild")
		}
		owners[n.Name] = append(owners[n.Name], guildID)
		guilds = append(guilds, guildID)
	}
	if len(owners) < 2 {
		t.Fatalf("every guild landed on one node: %v", owners)
	}
	mainGuild := guilds[0]
	victimNode, _ := guildRing.Owner(mustID(t, mainGuild))
	victim := procs[victimNode.Name]
	t.Logf("guilds: %d, placement %v; main guild %s on %s", len(guilds), owners, mainGuild, victimNode.Name)

	var chans []struct {
		ID   string `json:"id"`
		Name string `json:"name"`
		Type int    `json:"type"`
	}
	api.must(t, owner, "GET", "/guilds/"+mainGuild+"/channels", nil, &chans)
	var second struct {
		ID string `json:"id"`
	}
	api.must(t, owner, "POST", "/guilds/"+mainGuild+"/channels", map[string]any{"name": "second", "type": 0}, &second)
	channels := []string{second.ID}
	for _, c := range chans {
		if c.Type == 0 {
			channels = append(channels, c.ID)
		}
	}
	if len(channels) != 2 {
		t.Fatalf("main guild channels: %+v", chans)
	}
	var inv struct {
		Code string `json:"code"`
	}
	api.must(t, owner, "POST", "/channels/"+channels[1]+"/invites", map[string]any{}, &inv)
	for _, u := range users[1:] {
		api.must(t, u.token, "POST", "/invites/"+inv.Code, map[string]any{}, nil)
	}

	// Sessions: one per user plus a second for the owner, alternating
	// gateways; each gets READY and the main guild's GUILD_CREATE.
	gateways := []string{procs["gateway-1"].http, procs["gateway-2"].http}
	var sessions []*wsSession
	for i := 0; i <= len(users); i++ {
		u := users[i%len(users)]
		sessions = append(sessions, dial(t, fmt.Sprintf("session-%d(user %d, %s)", i, i%len(users), specs[2+i%2].name), gateways[i%2], u.token))
	}
	for _, s := range sessions {
		s.await(t, "READY and GUILD_CREATE", 20*time.Second, func(fs []dispatch) bool {
			return len(fs) > 0 && fs[0].Type == "READY" && len(guildCreates(fs, mainGuild)) > 0
		})
	}
	t.Logf("sessions: %d identified and subscribed after %v", len(sessions), time.Since(start).Round(time.Millisecond))

	// Writers post through the API node, in phases.
	wr := &writerPool{api: api, channels: channels, progress: make(chan struct{}, 1024)}
	for _, u := range users[:4] {
		wr.tokens = append(wr.tokens, u.token)
	}
	wr.start(ctx, "a")
	wr.await(t, 40, 20*time.Second)

	// Kill the main guild's node mid-traffic.
	changes := guildRing.Changes(ctx)
	before := wr.acked()
	killedAt := time.Now()
	victim.kill()
	t.Logf("killed %s (-9) after %d acknowledged messages", victimNode.Name, before)
	survivor := awaitOwner(t, changes, mainGuild, func(n string) bool { return n != victimNode.Name }, 4*leaseTTL)
	t.Logf("ring: main guild moved to %s %v after the kill", survivor, time.Since(killedAt).Round(time.Millisecond))
	movedAt := time.Now()

	// Every session gets a fresh GUILD_CREATE for the main guild.
	resubscribed := awaitGuildCreates(t, sessions, mainGuild, killedAt)
	t.Logf("GUILD_CREATE after the kill: every session within %v (ring move %v)",
		latest(resubscribed).Sub(killedAt).Round(time.Millisecond), movedAt.Sub(killedAt).Round(time.Millisecond))

	// Writers keep going on the new owner, then stop; every session
	// receives every message posted after its resubscription.
	wr.await(t, wr.acked()+40, 20*time.Second)
	wr.stop()
	t.Logf("writers: %d acknowledged (%d before the kill); failures %v", wr.acked(), before, wr.failures)
	awaitLive(t, sessions, wr.acks, resubscribed)

	// The killed node comes back: the ring gives it the main guild again,
	// the survivor unloads its actor and every session is resubscribed.
	rejoinAt := time.Now()
	procs[victimNode.Name] = startNode(t, victimNode.Name, victim.http, args[victimNode.Name]...)
	procs[victimNode.Name].waitReady(t, time.Now().Add(20*time.Second))
	readyAt := time.Now()
	awaitOwner(t, changes, mainGuild, func(n string) bool { return n == victimNode.Name }, 4*leaseTTL)
	awaitLog(t, procs[survivor], "guild unloaded: placed on another node", "guild_id="+mainGuild, 10*time.Second)
	t.Logf("rejoin: %s ready %v after its start; %s unloaded the guild %v after the start",
		victimNode.Name, readyAt.Sub(rejoinAt).Round(time.Millisecond), survivor, time.Since(rejoinAt).Round(time.Millisecond))
	n := wr.acked()
	wr.start(ctx, "b")
	wr.await(t, n+20, 20*time.Second)
	wr.stop()
	// The move back is between two live nodes: the new owner replays
	// what it fanned out before each session's resubscription arrived,
	// so every message posted since the rejoin arrives, and no session
	// sees the move as a second GUILD_CREATE.
	back := make([]time.Time, len(sessions))
	for i := range back {
		back[i] = rejoinAt
	}
	awaitLive(t, sessions, wr.acks, back)
	for _, s := range sessions {
		for _, at := range guildCreates(s.snapshot(), mainGuild) {
			if at.After(rejoinAt) {
				t.Errorf("%s: a GUILD_CREATE for the main guild %v after the rejoin: the move between live nodes was not invisible", s.name, at.Sub(rejoinAt).Round(time.Millisecond))
			}
		}
	}
	acks := wr.acks

	// History has every acknowledged message.
	history := map[string]map[string]int{} // channel → id → count by nonce
	nonces := map[string]int{}
	for _, ch := range channels {
		history[ch] = map[string]int{}
		for _, m := range channelHistory(t, api, owner, ch) {
			history[ch][m.ID]++
			nonces[m.Content]++
		}
	}
	missing := 0
	for _, a := range acks {
		if history[a.channel][a.id] == 0 {
			missing++
			t.Errorf("acknowledged message %s (%s) is missing from the history of channel %s", a.id, a.nonce, a.channel)
		}
	}
	dups := 0
	for _, n := range nonces {
		if n > 1 {
			dups += n - 1
		}
	}
	t.Logf("history: %d acknowledged messages checked, %d missing, %d duplicated", len(acks), missing, dups)
	t.Logf("retries: the API node resent %d requests cut by the kill; %s found %d already written",
		strings.Count(procs["api-1"].output(), "guild node lost mid-request"), survivor,
		strings.Count(procs[survivor].output(), "retried send already written"))
	if dups > 0 {
		// A send the API node retried after the kill carries its nonce
		// with enforce_nonce: the new owner must answer with the message
		// the dead node wrote instead of writing it again.
		t.Errorf("%d messages were written twice", dups)
	}

	// One order per channel across sessions, and gap-free sequences.
	order := make([]map[string]map[string]int, len(sessions)) // session → channel → id → position
	for i, s := range sessions {
		fs := s.snapshot()
		if err := checkSeq(fs); err != nil {
			t.Errorf("%s: %v", s.name, err)
		}
		order[i] = map[string]map[string]int{}
		for _, m := range messages(fs) {
			if order[i][m.ChannelID] == nil {
				order[i][m.ChannelID] = map[string]int{}
			}
			if _, dup := order[i][m.ChannelID][m.ID]; dup {
				t.Errorf("%s received message %s twice", s.name, m.ID)
				continue
			}
			order[i][m.ChannelID][m.ID] = len(order[i][m.ChannelID])
		}
	}
	compared := 0
	for i := range sessions {
		for j := i + 1; j < len(sessions); j++ {
			for _, ch := range channels {
				var common []string
				for id := range order[i][ch] {
					if _, ok := order[j][ch][id]; ok {
						common = append(common, id)
					}
				}
				slices.SortFunc(common, func(a, b string) int { return order[i][ch][a] - order[i][ch][b] })
				for k := 1; k < len(common); k++ {
					if order[j][ch][common[k-1]] > order[j][ch][common[k]] {
						t.Errorf("%s and %s disagree on the order of %s and %s in channel %s",
							sessions[i].name, sessions[j].name, common[k-1], common[k], ch)
						break
					}
				}
				compared += len(common)
			}
		}
	}
	t.Logf("order: %d message positions compared across %d session pairs; total %v",
		compared, len(sessions)*(len(sessions)-1)/2, time.Since(start).Round(time.Millisecond))
}

// dropKeyspace removes a test's keyspace at cleanup. It is housekeeping,
// not part of what the test checks: a Cassandra busy with the other test
// packages may reset the connection, so it tries three times and then
// only logs (the keyspace name is unique; a leftover costs disk, not
// correctness).
func dropKeyspace(t *testing.T, addr, ks string) {
	var err error
	for range 3 {
		if err = dropKeyspaceOnce(addr, ks); err == nil {
			return
		}
	}
	t.Logf("drop keyspace %s (left behind): %v", ks, err)
}

func dropKeyspaceOnce(addr, ks string) error {
	c := gocql.NewCluster(addr)
	c.Timeout = time.Minute
	s, err := c.CreateSession()
	if err != nil {
		return err
	}
	defer s.Close()
	return s.Query(`DROP KEYSPACE IF EXISTS ` + ks).Exec()
}
