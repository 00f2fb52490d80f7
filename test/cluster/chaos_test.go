//go:build integration && chaos

package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/concord-chat/concord/internal/gwtest"
	"github.com/concord-chat/concord/operator/fleet/etcdfleet"
	"github.com/concord-chat/concord/runtime/adapters/registry"
	"github.com/concord-chat/concord/runtime/adapters/store/cassandra"
	botscassandra "github.com/concord-chat/concord/runtime/domain/bots/cassandra"
)

// Replicas of the read-state and presence roles (sharded by user on
// rings: killing one moves its users to the other).
const (
	chaosReadStateReplicas = 2
	chaosPresenceReplicas  = 2
)

// chaosIntents: GUILDS, GUILD_PRESENCES, GUILD_MESSAGES, MESSAGE_CONTENT.
const chaosIntents = 1<<0 | 1<<8 | 1<<9 | 1<<15

// chaosNode is one `concord serve` process of the chaos topology, with
// the flags it restarts with.
type chaosNode struct {
	name, role, http, grpc string
	args                   []string
	p                      *proc
	past                   []*proc // every process the node ran, p last
}

func (n *chaosNode) start(t *testing.T) {
	n.p = startNode(t, n.name, n.http, n.args...)
	n.past = append(n.past, n.p)
}

// logged returns the values of key= in the log lines of every process
// of nodes that contain msg.
func logged(nodes []*chaosNode, msg, key string) map[string]string {
	out := map[string]string{} // value → node
	for _, n := range nodes {
		for _, p := range n.past {
			for _, line := range strings.Split(p.output(), "\n") {
				if !strings.Contains(line, msg) {
					continue
				}
				if _, v, ok := strings.Cut(line, " "+key+"="); ok {
					out[strings.Fields(v + " ")[0]] = n.name
				}
			}
		}
	}
	return out
}

// chaosStep is one kill of the chaos test and what it measured.
type chaosStep struct {
	victim   string
	recovery chaosRecovery // kill → writes, sessions, acks and presence back
	restart  bool          // restarted at once (one replica) rather than after recovery
	rejoin   chaosRecovery // restart → everything flowing again, when restarted after recovery
}

// TestChaos runs a whole cluster as real processes — 2 api, 2 gateway, 2
// guild, 2 data, the read-state and presence nodes, 1 relay, on three
// etcd members, a private Redis for the gateways, a private Kafka (topic prefix of
// its own) and a fresh Cassandra keyspace — under steady traffic from
// real clients: writers posting with nonces through both api nodes,
// gateway sessions on both gateways that resume or identify again when
// their node dies, acks of the newest message and presence changes. It
// kills -9 and restarts one replica of each role in turn, then the Redis,
// one etcd member and the Kafka, and measures each recovery: from the kill until
// every writer's posts are acknowledged again, every session received a
// message of every channel posted after the kill, an ack succeeded and
// every member saw a presence change sent after the kill. At the end no
// acknowledged message is missing from history or written twice, no
// session received a message twice or skipped a sequence number, every
// session is back, mention counts equal what history says and every
// member sees the last presence. Heavy, so it has its own build tag:
//
//	go test -tags integration,chaos -run TestChaos -v ./test/cluster/
func TestChaos(t *testing.T) {
	start := time.Now()
	cass := needEnv(t, "CONCORD_CASSANDRA", "run `make test-deps` and source ~/.cache/concord/test-env.sh")
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()

	// Backends: the binary builds while etcd, Redis and the keyspace start.
	built := make(chan struct{})
	go func() { defer close(built); buildBinary() }()
	// Kafka is the test's own (it is killed below); it starts while etcd
	// and Redis do.
	kafkaBroker := startPrivateKafka(t)
	etcd := startEtcdCluster(t)
	redis := startPrivateRedis(t)
	kafkaBroker.awaitUp(t)
	kafka := kafkaBroker.addr
	ks := fmt.Sprintf("concord_chaos_%d_%06x", time.Now().Unix(), rand.Uint32()&0xffffff)
	t.Cleanup(func() { dropKeyspace(t, cass, ks) })
	// The keyspace and the bot tables (eleven nodes waiting on one
	// migration under load take minutes); a shared Cassandra under load
	// may time out a schema change, which is idempotent, so it is tried
	// three times.
	for attempt := 1; ; attempt++ {
		err := createChaosSchema(ctx, cass, ks)
		if err == nil {
			break
		}
		if attempt == 3 {
			t.Fatalf("create keyspace %s: %v", ks, err)
		}
		t.Logf("create keyspace %s (attempt %d): %v", ks, attempt, err)
	}
	<-built
	concordBinary(t)
	t.Logf("backends: etcd x3, redis %s, keyspace %s ready after %v", redis.addr, ks, time.Since(start).Round(time.Millisecond))

	common := []string{
		"--registry=etcd://" + etcd.endpoints(),
		"--store=cassandra://" + cass + "/" + ks + "?rf=1",
		kafkaEventlog(kafka, ks),
		"--server-key=" + fmt.Sprintf("%064x", rand.Uint64()),
		"--admin-token=" + adminTestToken,
		"--lease-ttl=" + leaseTTL.String(),
		"--retry-interval=500ms",
		"--rate-limits=false", // the writers send faster than a channel's 5 per 5 s
		"--data-nodes=ring",
		"--presence-window=200ms",
		"--presence-report-interval=500ms",
		"--readstate-flush-interval=1s",
		"--log-level=info",
	}
	var nodes []*chaosNode
	add := func(role string, n int, extra ...string) {
		for i := 1; i <= n; i++ {
			nd := &chaosNode{name: fmt.Sprintf("%s-%d", role, i), role: role, http: freeAddr(t), grpc: freeAddr(t)}
			nd.args = append(append([]string{"--roles=" + role, "--grpc=" + nd.grpc,
				fmt.Sprintf("--worker=%d", len(nodes)+1), "--data-dir=" + t.TempDir()}, common...), extra...)
			nodes = append(nodes, nd)
		}
	}
	add("guild", 2, "--presence")
	add("data", 2)
	add("readstate", chaosReadStateReplicas)
	add("presence", chaosPresenceReplicas)
	add("relay", 1)
	add("gateway", 2, "--presence", "--redis=redis://"+redis.addr)
	add("api", 2)
	byName := map[string]*chaosNode{}
	for _, n := range nodes {
		byName[n.name] = n
		n.start(t)
	}
	deadline := time.Now().Add(120 * time.Second)
	for _, n := range nodes {
		n.p.waitReady(t, deadline)
	}
	t.Logf("cluster: %d nodes ready after %v", len(nodes), time.Since(start).Round(time.Millisecond))

	var etcdURLs []string
	for _, m := range etcd.members {
		etcdURLs = append(etcdURLs, "http://"+m.client)
	}
	reg := connectRegistry(t, etcdURLs...)
	guildRing := watchRing(t, ctx, reg, registry.RoleGuild)
	dataRing := watchRing(t, ctx, reg, registry.RoleData)
	waitRing(t, guildRing, 2)
	waitRing(t, dataRing, 2)

	// Users: M is mentioned in channel 0 of guild A and never reads it;
	// R reads channel 0 of guild B, where every message mentions it; P
	// changes its presence; the others write and watch.
	api := rest{addr: byName["api-1"].http, client: &http.Client{Timeout: 30 * time.Second}}
	type user struct{ name, id, token string }
	users := map[string]user{}
	for _, name := range []string{"m", "r", "p", "o1", "o2", "w"} {
		u := newUser(t, api, "chaos_"+name)
		users[name] = user{name: name, id: u.id, token: u.token}
	}
	owner := users["o1"].token

	// Two guilds owned by different guild nodes, each with a channel on
	// each data node.
	type guildInfo struct {
		id, node string
		channels []string // [0] on one data node, [1] on the other
	}
	var guilds []guildInfo
	for i := 0; i < 16 && len(guilds) < 2; i++ {
		var g struct {
			ID string `json:"id"`
		}
		api.must(t, owner, "POST", "/guilds", map[string]any{"name": fmt.Sprintf("chaos %d", i)}, &g)
		n, ok := guildRing.Owner(mustID(t, g.ID))
		if !ok {
			t.Fatal("no guild node owns a guild")
		}
		if len(guilds) == 0 || guilds[0].node != n.Name {
			guilds = append(guilds, guildInfo{id: g.ID, node: n.Name})
		}
	}
	if len(guilds) < 2 {
		t.Fatal("16 guilds all landed on one guild node")
	}
	for gi := range guilds {
		g := &guilds[gi]
		onNode := map[string]string{}
		for i := 0; i < 16 && len(onNode) < 2; i++ {
			var c struct {
				ID string `json:"id"`
			}
			api.must(t, owner, "POST", "/guilds/"+g.id+"/channels", map[string]any{"name": fmt.Sprintf("c%d", i), "type": 0}, &c)
			n, ok := dataRing.Owner(mustID(t, c.ID))
			if !ok {
				t.Fatal("no data node owns a channel")
			}
			if onNode[n.Name] == "" {
				onNode[n.Name] = c.ID
			}
		}
		if len(onNode) < 2 {
			t.Fatalf("guild %s: 16 channels all landed on one data node", g.id)
		}
		g.channels = []string{onNode["data-1"], onNode["data-2"]}
		var inv struct {
			Code string `json:"code"`
		}
		api.must(t, owner, "POST", "/channels/"+g.channels[0]+"/invites", map[string]any{}, &inv)
		for _, name := range []string{"m", "r", "p", "o2", "w"} {
			api.must(t, users[name].token, "POST", "/invites/"+inv.Code, map[string]any{}, nil)
		}
	}
	gA, gB := guilds[0], guilds[1]
	mentionM, readR := gA.channels[0], gB.channels[0]
	t.Logf("guilds: A %s on %s, B %s on %s; channels A %v, B %v", gA.id, gA.node, gB.id, gB.node, gA.channels, gB.channels)

	// Guild B's events go through the relay, as the RelayTier controller
	// publishes it.
	relay := byName["relay-1"]
	if err := (&etcdfleet.Registry{Reg: reg}).SetRelays(ctx, gB.id, []string{relay.grpc}); err != nil {
		t.Fatal(err)
	}

	// Sessions on both gateways.
	gateways := []string{byName["gateway-1"].http, byName["gateway-2"].http}
	other := []string{gateways[1], gateways[0]}
	var clients []*chaosClient
	for i, name := range []string{"m", "r", "p", "o1", "o2", "w", "m"} {
		gws := gateways
		if i%2 == 1 {
			gws = other
		}
		clients = append(clients, startChaosClient(t, fmt.Sprintf("%s#%d", name, i), users[name].token, gws, chaosIntents))
	}
	for _, c := range clients {
		c.await(t, "READY and both guilds' GUILD_CREATE", 30*time.Second, func() bool {
			fs := c.allFrames()
			return len(guildCreates(fs, gA.id)) > 0 && len(guildCreates(fs, gB.id)) > 0
		})
	}
	pClient := clients[2]
	tickers := []chaosTicker{{client: pClient, user: users["p"].id}, {client: clients[5], user: users["w"].id},
		{client: clients[3], user: users["o1"].id}, {client: clients[4], user: users["o2"].id}}
	clientUser := map[*chaosClient]string{}
	for i, name := range []string{"m", "r", "p", "o1", "o2", "w", "m"} {
		clientUser[clients[i]] = users[name].id
	}
	t.Logf("sessions: %d identified after %v", len(clients), time.Since(start).Round(time.Millisecond))

	// Traffic: a writer per channel through both api nodes.
	tr := newChaosTraffic([]string{byName["api-1"].http, byName["api-2"].http})
	writers := []chaosWriter{
		{token: users["o1"].token, channel: mentionM, mention: users["m"].id},
		{token: users["o2"].token, channel: gA.channels[1]},
		{token: users["p"].token, channel: readR, mention: users["r"].id},
		{token: users["w"].token, channel: gB.channels[1]},
	}
	ackers := []chaosAcker{
		{user: "r", token: users["r"].token, channel: readR},
		{user: "o2", token: users["o2"].token, channel: gA.channels[1]},
	}
	h := &chaosHarness{tr: tr, clients: clients, tickers: tickers, users: clientUser,
		channels: []string{gA.channels[0], gA.channels[1], gB.channels[0], gB.channels[1]}}
	trafficAt := time.Now()
	tr.start(ctx, "a", writers, ackers, tickers)
	h.awaitBack(t, "traffic", trafficAt, 60*time.Second)
	awaitRelayed(t, relay)
	t.Logf("traffic: flowing everywhere (relay in use) %v after it started", time.Since(trafficAt).Round(time.Millisecond))

	// The kills. Roles of two replicas recover on the survivor and are
	// restarted after; roles of one are restarted at once.
	dataVictim, _ := dataRing.Owner(mustID(t, mentionM))
	victims := []string{"api-1", "gateway-1", gA.node, dataVictim.Name, "readstate-1", "presence-1", "relay-1"}
	var steps []chaosStep
	for _, name := range victims {
		n := byName[name]
		replicas := 0
		for _, o := range nodes {
			if o.role == n.role {
				replicas++
			}
		}
		step := chaosStep{victim: name, restart: replicas == 1}
		killedAt := time.Now()
		n.p.kill()
		if step.restart {
			n.start(t)
			n.p.waitReady(t, time.Now().Add(60*time.Second))
			step.recovery = h.awaitBack(t, name, killedAt, 120*time.Second)
			if n.role == "relay" {
				awaitRelayed(t, n) // the guild node uses the relay again
			}
		} else {
			step.recovery = h.awaitBack(t, name, killedAt, 90*time.Second)
			restartAt := time.Now()
			n.start(t)
			n.p.waitReady(t, time.Now().Add(60*time.Second))
			step.rejoin = h.awaitBack(t, name+" restarted", restartAt, 90*time.Second)
		}
		t.Logf("chaos: %s killed; back after %v%s", name, step.recovery,
			map[bool]string{true: " (restarted at once)", false: fmt.Sprintf("; restarted, flowing %v after its start", step.rejoin)}[step.restart])
		steps = append(steps, step)
	}
	// The private Redis of the gateways.
	killedAt := time.Now()
	redis.p.kill()
	redis.restart(t)
	steps = append(steps, chaosStep{victim: "redis", restart: true, recovery: h.awaitBack(t, "redis", killedAt, 120*time.Second)})
	t.Logf("chaos: redis killed and restarted; back after %v", steps[len(steps)-1].recovery)
	// One etcd member: the other two keep the quorum.
	m := etcd.members[0]
	killedAt = time.Now()
	m.p.kill()
	step := chaosStep{victim: "etcd member"}
	step.recovery = h.awaitBack(t, "etcd member", killedAt, 90*time.Second)
	restartAt := time.Now()
	etcd.restart(t, m)
	step.rejoin = h.awaitBack(t, "etcd member restarted", restartAt, 90*time.Second)
	steps = append(steps, step)
	t.Logf("chaos: %s killed; back after %v; restarted, flowing %v after its start", m.name, step.recovery, step.rejoin)
	// Kafka: sends keep their 200 (each event is committed with its
	// message and waits in the guild node's outbox), deliveries and acks
	// do not use it; the read-state consumers wait for it, and the final
	// counts below say they caught up once it was back.
	killedAt = time.Now()
	kafkaBroker.p.kill()
	step = chaosStep{victim: "kafka"}
	step.recovery = h.awaitBack(t, "kafka", killedAt, 90*time.Second)
	restartAt = time.Now()
	kafkaBroker.start(t)
	kafkaBroker.awaitUp(t)
	step.rejoin = h.awaitBack(t, "kafka restarted", restartAt, 120*time.Second)
	steps = append(steps, step)
	t.Logf("chaos: kafka killed; back after %v; restarted, flowing %v after its start", step.recovery, step.rejoin)

	// The end: traffic stops; R reads the newest message of its channel
	// (its count must start over from there); a last round of messages
	// from every writer, and a last presence.
	tr.stop()
	readHistory := channelHistory(t, api, owner, readR)
	lastRead := readHistory[len(readHistory)-1].ID
	if err := tr.read(ctx, 0, ackers[0], lastRead); err != nil {
		t.Fatalf("final ack: %v", err)
	}
	var final []chaosAck
	for w, wr := range writers {
		for k := range 5 {
			a, ok := tr.post(ctx, w, wr, fmt.Sprintf("z%d-%d", w, k))
			if !ok {
				t.Fatalf("final message %d of writer %d not acknowledged: %v", k, w, tr.failureSummary())
			}
			final = append(final, a)
		}
	}
	if !tr.presence(tickers[0], "final", "idle") {
		t.Fatal("p's client is not connected for the final presence")
	}
	t.Logf("final round sent %v after the start", time.Since(start).Round(time.Millisecond))

	// Every session is back: it receives the final messages.
	for _, c := range clients {
		c.await(t, "the final messages", 60*time.Second, func() bool {
			got := map[string]bool{}
			for _, m := range messages(c.currentFrames()) {
				got[m.ID] = true
			}
			for _, a := range final {
				if !got[a.id] {
					return false
				}
			}
			return c.live
		})
	}

	// History holds every acknowledged message once.
	acks, reads, ticks := tr.snapshot()
	history := map[string][]message{}
	inHistory := map[string]bool{}
	nonces := map[string]int{}
	for _, ch := range h.channels {
		history[ch] = channelHistory(t, api, owner, ch)
		for _, m := range history[ch] {
			inHistory[m.ID] = true
			nonces[m.Content]++
		}
	}
	missing, dups := 0, 0
	duplicated := map[string]bool{} // ids of messages written more than once
	for _, a := range acks {
		if !inHistory[a.id] {
			missing++
			t.Errorf("acknowledged message %s (nonce %s, sent %s) is missing from the history of channel %s",
				a.id, a.nonce, a.sentAt.Format("15:04:05.000"), a.channel)
		}
	}
	for content, n := range nonces {
		if n > 1 {
			dups += n - 1
			var ids []string
			for _, ch := range h.channels {
				for _, m := range history[ch] {
					if m.Content == content {
						ids = append(ids, m.ID)
						duplicated[m.ID] = true
					}
				}
			}
			t.Errorf("message %q was written %d times: ids %v (sends whose data-node write was cancelled, by path: %v)",
				content, n, ids, logged(nodes, "remote: context canceled", "path"))
		}
	}
	t.Logf("history: %d acknowledged messages, %d in history, %d missing, %d written twice; %d acks, %d presence changes; failed attempts %v",
		len(acks), len(inHistory), missing, dups, len(reads), len(ticks), tr.failureSummary())

	// No session received a message twice or skipped a sequence number;
	// every client says how it came back.
	for _, c := range clients {
		c.mu.Lock()
		for _, s := range c.sessions {
			if s.id == "" {
				continue
			}
			if err := checkSeq(s.frames); err != nil {
				t.Errorf("%s session %s: %v", c.name, s.id, err)
			}
			seen := map[string]int{}
			for _, m := range messages(s.frames) {
				seen[m.ID]++
			}
			for id, n := range seen {
				if n > 1 {
					t.Errorf("%s session %s received message %s %d times", c.name, s.id, id, n)
				}
			}
		}
		delivered := map[string]bool{}
		for _, m := range messages(c.allFrames()) {
			delivered[m.ID] = true
		}
		lost := 0
		for _, a := range acks {
			if !delivered[a.id] {
				lost++
			}
		}
		t.Logf("%s: %d sessions, %d identifies, %d resumes, %d INVALID_SESSION; %d of %d acknowledged messages delivered (the rest fell in reconnect gaps); drops %v",
			c.name, len(nonEmpty(c.sessions)), c.identifies, c.resumes, c.invalid, len(acks)-lost, len(acks), c.drops)
		c.mu.Unlock()
	}

	// Mention counts: M's equals the messages of its channel (every one
	// mentions M; M never reads it); R's is the messages after its last
	// read, and its marker is that message.
	wantM := len(history[mentionM])
	wantR := 0
	for _, m := range history[readR] {
		if mustID(t, m.ID) > mustID(t, lastRead) {
			wantR++
		}
	}
	// A mismatch names the messages whose event a guild node logged as
	// lost (stored, but never on the event log the counts come from), and
	// those a killed guild node wrote whose retry found them stored (the
	// event may have died with the node).
	notLogged := logged(nodes, "message event not logged", "message_id")
	orphans := logged(nodes, "retried send already written by the node that died", "message_id")
	// So do the copies of a duplicated send: the copy whose send failed
	// had no event.
	unlogged := func(ms []message) []string {
		var out []string
		for _, m := range ms {
			if n, ok := notLogged[m.ID]; ok {
				out = append(out, m.ID+" on "+n)
			}
			if duplicated[m.ID] {
				out = append(out, m.ID+" (one of a duplicated send)")
			}
			if _, ok := orphans[m.ID]; ok {
				out = append(out, m.ID+" (written by a guild node killed before its event was logged)")
			}
		}
		return out
	}
	if err := h.awaitReadState(t, gateways[1], users["m"].token, mentionM, "", wantM); err != nil {
		t.Errorf("m: %v; messages of the channel whose event may be missing: %v", err, unlogged(history[mentionM]))
	}
	if err := h.awaitReadState(t, gateways[0], users["r"].token, readR, lastRead, wantR); err != nil {
		t.Errorf("r: %v; messages of the channel whose event may be missing: %v", err, unlogged(history[readR]))
	}
	t.Logf("read states: want m with %d mentions, r with %d after its read marker %s, as history says", wantM, wantR, lastRead)

	// Presence: every member sees p's last presence.
	for _, c := range clients {
		if c == pClient {
			continue
		}
		c.await(t, "p's final presence", 60*time.Second, func() bool {
			last, ok := lastPresence(c.currentFrames(), users["p"].id)
			return ok && last.name == "final" && last.status == "idle"
		})
	}

	// The recovery table.
	var b strings.Builder
	fmt.Fprintf(&b, "| killed | restarted | back after the kill | writes | sessions | acks | presence | flowing again after the restart |\n|---|---|---|---|---|---|---|---|\n")
	ms := func(d time.Duration) string { return fmt.Sprintf("%.1f s", d.Seconds()) }
	for _, s := range steps {
		rejoin := "—"
		if !s.restart {
			rejoin = ms(s.rejoin.all)
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %s |\n", s.victim,
			map[bool]string{true: "at once", false: "after recovery"}[s.restart],
			ms(s.recovery.all), ms(s.recovery.writes), ms(s.recovery.sessions), ms(s.recovery.acks), ms(s.recovery.presence), rejoin)
	}
	t.Logf("recovery per role (total %v):\n%s", time.Since(start).Round(time.Second), b.String())
}

func nonEmpty(ss []*chaosSession) []*chaosSession {
	var out []*chaosSession
	for _, s := range ss {
		if s.id != "" {
			out = append(out, s)
		}
	}
	return out
}

// presenceSeen is the part of a PRESENCE_UPDATE the test checks.
type presenceSeen struct {
	name, status string
	at           time.Time
}

// lastPresence is the last PRESENCE_UPDATE for user in frames.
func lastPresence(frames []dispatch, user string) (presenceSeen, bool) {
	for i := len(frames) - 1; i >= 0; i-- {
		if p, ok := presenceOf(frames[i], user); ok {
			return p, true
		}
	}
	return presenceSeen{}, false
}

func presenceOf(f dispatch, user string) (presenceSeen, bool) {
	if f.Type != "PRESENCE_UPDATE" {
		return presenceSeen{}, false
	}
	var p struct {
		User struct {
			ID string `json:"id"`
		} `json:"user"`
		Status     string `json:"status"`
		Activities []struct {
			Name string `json:"name"`
		} `json:"activities"`
	}
	if json.Unmarshal(f.D, &p) != nil || p.User.ID != user {
		return presenceSeen{}, false
	}
	s := presenceSeen{status: p.Status, at: f.At}
	if len(p.Activities) > 0 {
		s.name = p.Activities[0].Name
	}
	return s, true
}

// awaitReadState identifies fresh sessions (gwtest) on gateway until
// READY's read state of channel shows mentions (and, when set, the
// marker lastRead).
func (h *chaosHarness) awaitReadState(t *testing.T, gateway, token, channel, lastRead string, mentions int) error {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	var got readState
	for {
		c, err := gwtest.Dial(gwtest.URL(gateway), token, gwtest.Options{Name: "read-state probe"})
		if err != nil {
			t.Fatal(err)
		}
		var d struct {
			ReadState struct {
				Entries []readState `json:"entries"`
			} `json:"read_state"`
		}
		err = c.Await("READY", 20*time.Second, func(fs []gwtest.Frame) bool {
			for _, f := range fs {
				if f.Type == "READY" {
					return json.Unmarshal(f.D, &d) == nil
				}
			}
			return false
		})
		c.Close()
		if err != nil {
			t.Fatal(err)
		}
		got = readState{}
		for _, e := range d.ReadState.Entries {
			if e.ID == channel {
				got = e
			}
		}
		if got.MentionCount == mentions && (lastRead == "" || got.LastReadID == lastRead) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("read state of channel %s: %+v after 90s, want mention_count %d and last_message_id %q", channel, got, mentions, lastRead)
		}
		time.Sleep(250 * time.Millisecond) // polling READY: no event announces the count
	}
}

// createChaosSchema creates keyspace ks with the store's and the bot
// platform's tables.
func createChaosSchema(ctx context.Context, cass, ks string) error {
	st, err := cassandra.New(ctx, cassandra.Config{Hosts: []string{cass}, Keyspace: ks, ReplicationFactor: 1})
	if err != nil {
		return err
	}
	defer st.Close()
	bst, err := botscassandra.New(ctx, botscassandra.Config{}, st)
	if err != nil {
		return fmt.Errorf("bot tables: %w", err)
	}
	return bst.Close()
}

// awaitRelayed waits until the relay node received a request from a
// guild node.
func awaitRelayed(t *testing.T, relay *chaosNode) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for metricSum(t, relay.http, "concord_transport_relay_received_requests_total") == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%s: no guild node relayed through it within 30s", relay.name)
		}
		time.Sleep(100 * time.Millisecond) // polling a counter: no event to await
	}
}
