//go:build faults

package faults

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/concord-chat/concord/internal/topology"
	etcdreg "github.com/concord-chat/concord/runtime/adapters/registry/etcd"
	"github.com/concord-chat/concord/runtime/adapters/store/cassandra"
	"github.com/concord-chat/concord/runtime/base/snowflake"
	botscassandra "github.com/concord-chat/concord/runtime/domain/bots/cassandra"
	"github.com/concord-chat/concord/test/faults/history"
)

// TestFaults runs clients against Concord split over processes on the
// replicated stores while a nemesis acts out a schedule drawn from a
// printed seed, then checks the history the clients recorded.
//
//	CONCORD_FAULTS_SEED=N        replay a schedule (the test prints its seed)
//	CONCORD_FAULTS_SCHEDULE=short|clients|clock|full|none   short (default): one minority split and
//	                             one Cassandra node killed; clients: Redis cut off from Concord,
//	                             the sessions' gateway node killed, Redis killed; clock: the guild
//	                             owner's clock 45 s ahead, then 45 s behind; full: CONCORD_FAULTS_COUNT faults
//	                             of every kind; none: the workload and the checker alone
//	CONCORD_FAULTS_COUNT=N       faults in the full schedule [6]
//	CONCORD_FAULTS_REPORT=FILE   append the per-fault figures (markdown) to FILE
func TestFaults(t *testing.T) {
	r := needReplicated(t)
	seed := rand.Uint64() >> 12
	if s := os.Getenv("CONCORD_FAULTS_SEED"); s != "" {
		var err error
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatalf("CONCORD_FAULTS_SEED=%q: %v", s, err)
		}
	}
	schedule := os.Getenv("CONCORD_FAULTS_SCHEDULE")
	if schedule == "" {
		schedule = "short"
	}
	count := 6
	if s := os.Getenv("CONCORD_FAULTS_COUNT"); s != "" {
		count, _ = strconv.Atoi(s)
	}
	fmt.Printf("faults: seed %d, schedule %s (replay: CONCORD_FAULTS_SEED=%d CONCORD_FAULTS_SCHEDULE=%s)\n", seed, schedule, seed, schedule)
	t.Logf("seed %d, schedule %s", seed, schedule)

	ctx, cancel := context.WithTimeout(t.Context(), 40*time.Minute)
	defer cancel()
	run := strconv.FormatUint(seed%0xfffff, 16)
	netw := newNet(t, run)
	awaitRulesWork(t, netw)
	etcd := startEtcd(t, ctx)
	// The live roles' Redis is the run's own, so the nemesis may kill it.
	rs := startRedis(t, ctx)
	redis := rs.hostport()

	// The keyspace (rf=3 on the ring) and the bot tables, made before the
	// nodes start, as topology.StartBackends does on one node.
	ks := freshKeyspace("concord_faults")
	hosts := strings.Join(r.cassandra, ",")
	st, err := cassandra.New(ctx, cassandra.Config{Hosts: r.cassandra, Keyspace: ks, Timeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if bt, err := botscassandra.New(ctx, botscassandra.Config{}, st); err != nil {
		t.Fatal(err)
	} else {
		bt.Close()
	}
	st.Close()
	var eps []string
	for _, m := range etcd {
		eps = append(eps, m.addr+":2379")
	}
	b := &topology.Backends{Etcd: strings.Join(eps, ","), Store: "cassandra://" + hosts + "/" + ks, Key: fmt.Sprintf("%064x", rand.Uint64())}
	kafka := strings.Join(r.kafka, ",")
	c, err := topology.Start(ctx, b, topology.Options{
		// Chat events (message creates for read states and mentions) on
		// the replicated brokers; the live roles get their own prefix.
		Flags:      []string{"--eventlog=kafka://" + kafka + "?topic_prefix=" + ks + "."},
		FrontFlags: []string{"--rate-limits=false"},
		Live:       true, Kafka: kafka, Redis: redis,
		Extra:        []topology.Extra{{Name: "readstate-1", Roles: "readstate"}, {Name: "readstate-2", Roles: "readstate"}},
		Verbose:      os.Getenv("CONCORD_TEST_VERBOSE") != "",
		ReadyTimeout: 4 * time.Minute,
		// The clock fault moves a node's wall clock through the seam.
		FaultClock: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if t.Failed() {
			t.Logf("node logs (tails):\n%s", tails(c))
		}
		c.Close()
	}()

	targets := map[string]*target{}
	for i, h := range r.cassandra {
		name := fmt.Sprintf("cassandra-%d", i+1)
		targets[name] = replTarget(r, name, "cassandra", strings.Split(h, ":")[0])
	}
	for i, h := range r.kafka {
		name := fmt.Sprintf("kafka-%d", i+1)
		targets[name] = replTarget(r, name, "kafka", strings.Split(h, ":")[0])
	}
	for _, m := range etcd {
		targets[m.name] = m.target()
	}
	for _, n := range c.Nodes {
		targets[n.Name] = nodeTarget(n)
	}
	targets["redis"] = rs.target()
	for name, tg := range targets {
		if tg.pid() == 0 {
			t.Fatalf("%s is not running before the faults (hack/replicated.sh status)", name)
		}
	}
	faults := plan(seed, schedule, count, groupNames(targets))
	for i, f := range faults {
		t.Logf("fault %d: %s", i+1, f)
	}
	nem := &nemesis{t: t, net: netw, targets: targets, replDir: r.dir, redis: endpoint{rs.addr, rs.port}, logf: t.Logf,
		gateways: func() (map[string]int, error) { return c.Admin.Conns("gateways") }}

	// The workload: three writers on two public channels and a private
	// one, a reader, gateway sessions of a writer, of the user mentioned
	// and of a member who cannot view the private channel, and a live
	// commenter.
	a := newAPI(c.Front)
	owner, outsider, mentioned := a.newUser(t, "owner"), a.newUser(t, "outsider"), a.newUser(t, "mentioned")
	writers := []user{a.newUser(t, "w1"), a.newUser(t, "w2"), a.newUser(t, "w3")}
	var g struct {
		ID string `json:"id"`
	}
	a.must(t, owner.token, "POST", "/guilds", map[string]any{"name": "faults"}, &g)
	var inv struct {
		Code string `json:"code"`
	}
	var pub1, pub2, priv struct {
		ID string `json:"id"`
	}
	a.must(t, owner.token, "POST", "/guilds/"+g.ID+"/channels", map[string]any{"name": "pub1", "type": 0}, &pub1)
	a.must(t, owner.token, "POST", "/guilds/"+g.ID+"/channels", map[string]any{"name": "pub2", "type": 0}, &pub2)
	a.must(t, owner.token, "POST", "/channels/"+pub1.ID+"/invites", map[string]any{}, &inv)
	for _, u := range append([]user{outsider, mentioned}, writers...) {
		a.must(t, u.token, "POST", "/invites/"+inv.Code, map[string]any{}, nil)
	}
	const view = "1024"
	overwrites := []map[string]any{{"id": g.ID, "type": 0, "deny": view, "allow": "0"}}
	for _, u := range append([]user{owner, mentioned}, writers...) {
		overwrites = append(overwrites, map[string]any{"id": u.id, "type": 1, "allow": view, "deny": "0"})
	}
	a.must(t, owner.token, "POST", "/guilds/"+g.ID+"/channels", map[string]any{"name": "private", "type": 0, "permission_overwrites": overwrites}, &priv)
	var stream struct {
		ID string `json:"id"`
	}
	a.must(t, owner.token, "POST", "/v1/streams", map[string]any{"title": "faults"}, &stream)

	// Before any fault: six clients sending to one channel as fast as
	// they are answered, a reader reading it; the history must still
	// agree with one order (a message never appears behind newer ones
	// that were already visible).
	t.Run("ConcurrentSendsOneOrder", func(t *testing.T) {
		var burst struct {
			ID string `json:"id"`
		}
		a.must(t, owner.token, "POST", "/guilds/"+g.ID+"/channels", map[string]any{"name": "burst", "type": 0}, &burst)
		brec := &history.Recorder{}
		var bstop atomic.Bool
		var bwg sync.WaitGroup
		for i := range 6 {
			bwg.Add(1)
			go a.writer(ctx, brec, 100+i, writers[i%len(writers)], []string{burst.ID}, "", "", 0, &bstop, &bwg)
		}
		bwg.Add(1)
		go a.reader(ctx, brec, 110, writers[0], []string{burst.ID}, &bstop, &bwg)
		select {
		case <-ctx.Done():
		case <-time.After(20 * time.Second): // the burst's length
		}
		bstop.Store(true)
		bwg.Wait()
		final, err := a.fullHistory(ctx, writers[0].token, burst.ID)
		if err != nil {
			t.Fatal(err)
		}
		res := history.Check(history.Input{Ops: brec.Ops(), Final: map[string][]history.Msg{burst.ID: final}})
		t.Logf("burst on one channel:\n%s", res)
		if !res.OK() {
			t.Errorf("concurrent sends to one channel: the history does not agree with one order (seed %d):\n%s", seed, res)
		}
	})

	rec := &history.Recorder{}
	reg, err := etcdreg.New(etcdreg.Config{Endpoints: etcdURLs(etcd), Prefix: "/" + c.Prefix})
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	nem.owner = func() (string, error) { return ownerNode(ctx, reg, rec.Ops()) }
	sessions := []*session{
		startSession(rec, "outsider", c.Front, outsider),
		startSession(rec, "mentioned", c.Front, mentioned),
		startSession(rec, "w1", c.Front, writers[0]),
	}
	defer func() {
		for _, s := range sessions {
			s.stop()
		}
	}()
	var stop atomic.Bool
	var wg sync.WaitGroup
	chans := []string{pub1.ID, pub2.ID, priv.ID}
	for i, w := range writers {
		wg.Add(1)
		go a.writer(ctx, rec, i, w, chans, mentioned.id, pub1.ID, 200*time.Millisecond, &stop, &wg)
	}
	wg.Add(5)
	go a.reader(ctx, rec, 10, writers[0], chans, &stop, &wg)
	go a.acker(ctx, rec, 30, writers[0], pub2.ID, &stop, &wg)
	go a.commenter(ctx, rec, 20, writers[1], stream.ID, &stop, &wg)
	// Two viewers of the stream over SSE; their connections end with the
	// run.
	watch, endRun := context.WithCancel(ctx)
	defer endRun()
	go a.viewer(watch, rec, "viewer-1", writers[2].token, stream.ID, &wg)
	go a.viewer(watch, rec, "viewer-2", outsider.token, stream.ID, &wg)

	bw := watchBalancer(watch, c.Admin)
	begin := time.Now()
	settle := func() {
		select {
		case <-ctx.Done():
		case <-time.After(15 * time.Second): // quiet time between faults, part of the schedule
		}
	}
	settle()
	var windows []window
	for _, f := range faults {
		windows = append(windows, nem.act(ctx, f))
		settle()
	}
	stop.Store(true)
	endRun()
	wg.Wait()
	end := time.Now()

	// Read back: every channel's whole history, the mention count, the
	// live archive, retried while the cluster finishes recovering.
	in := history.Input{Ops: rec.Ops(), Deliveries: rec.Deliveries(), Final: map[string][]history.Msg{},
		Hidden: map[string][]string{outsider.id: {priv.ID}}, Mentions: map[string]int{}, Archive: map[string][]string{},
		Receipts: rec.Receipts()}
	retry := func(what string, f func() error) {
		deadline := time.Now().Add(2 * time.Minute)
		for {
			err := f()
			if err == nil {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s after the faults: %v", what, err)
			}
			time.Sleep(time.Second) // the cluster is recovering; nothing to await but its answer
		}
	}
	for _, ch := range chans {
		retry("history of "+ch, func() error {
			h, err := a.fullHistory(ctx, writers[0].token, ch)
			in.Final[ch] = h
			return err
		})
	}
	want := 0
	for _, m := range in.Final[pub1.ID] {
		if slices.Contains(m.Mentions, mentioned.id) {
			want++
		}
	}
	var got int
	func() {
		deadline := time.Now().Add(90 * time.Second)
		for {
			got, err = readState(c.Front, mentioned, pub1.ID)
			if err == nil && got == want || time.Now().After(deadline) {
				return
			}
			time.Sleep(500 * time.Millisecond) // read states are counted from the event log: polled, no event says done
		}
	}()
	in.Mentions[history.MentionKey(mentioned.id, pub1.ID)] = got
	// The read marker the acks left, once the read states caught up
	// with the last acknowledged ack (or the wait ends: the checker
	// judges what is there).
	var lastAck string
	for _, op := range rec.Ops() {
		if op.Kind == history.Ack && op.OK {
			lastAck = op.ID
		}
	}
	in.Markers = map[string]string{}
	func() {
		deadline := time.Now().Add(90 * time.Second)
		for {
			marker, err := readMarker(c.Front, writers[0], pub2.ID)
			if err == nil {
				in.Markers[history.MentionKey(writers[0].id, pub2.ID)] = marker
			}
			if err == nil && marker == lastAck || time.Now().After(deadline) {
				return
			}
			time.Sleep(500 * time.Millisecond) // read states are read back by polling READY; nothing says done
		}
	}()
	acked := 0
	for _, op := range in.Ops {
		if op.Kind == history.Comment && op.OK {
			acked++
		}
	}
	retry("live archive", func() error {
		ids, err := a.archive(ctx, stream.ID)
		in.Archive[stream.ID] = ids
		if err == nil && len(ids) < acked {
			return fmt.Errorf("%d comments archived, %d acknowledged (the archiver may still be catching up)", len(ids), acked)
		}
		return err
	})

	// The history is kept, as Jepsen keeps its histories, so the checker
	// can be run on it again.
	hist := fmt.Sprintf("%s/concord-faults-%d.json", os.TempDir(), seed)
	if b, err := json.Marshal(in); err == nil {
		if err := os.WriteFile(hist, b, 0o644); err == nil {
			t.Logf("history written to %s", hist)
		}
	}
	res := history.Check(in)
	t.Logf("history checked (%v of traffic):\n%s", end.Sub(begin).Round(time.Second), res)
	t.Logf("balancer (HAProxy servers' state changes during the faults):\n%s", bw)
	report := figures(windows, in.Ops, sessions, begin, end)
	t.Logf("figures:\n%s", report)
	if f := os.Getenv("CONCORD_FAULTS_REPORT"); f != "" {
		hdr := fmt.Sprintf("\nseed %d, schedule %s, %s\n\n", seed, schedule, time.Now().UTC().Format(time.RFC3339))
		_ = appendFile(f, hdr+report)
	}
	for _, w := range windows {
		if w.err != nil {
			t.Errorf("fault %s did not act or heal: %v", w.f, w.err)
		}
	}
	if !res.OK() {
		t.Errorf("the history violates a property (seed %d):\n%s", seed, res)
	}
	if res.Acked == 0 || res.Reads == 0 {
		t.Errorf("no acknowledged send or no read: the workload did not run (%s)", res)
	}
}

// ownerNode is the guild node that minted the last acknowledged message
// (the highest id among the acknowledged sends): the guild's owner, as
// the guild actor mints its messages' ids. The node holding the id's
// snowflake pair is read from the pair's claim in the registry
// (snowflake/W-P holds the claimer's name).
func ownerNode(ctx context.Context, reg *etcdreg.Registry, ops []history.Op) (string, error) {
	var last snowflake.ID
	for _, op := range ops {
		if op.Kind != history.Send || !op.OK {
			continue
		}
		if id, err := snowflake.Parse(op.ID); err == nil && id > last {
			last = id
		}
	}
	if last == 0 {
		return "", fmt.Errorf("no acknowledged send yet: no id names the guild's owner")
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	name, err := reg.Get(ctx, fmt.Sprintf("snowflake/%d-%d", last.Worker(), last.Process()))
	if err != nil {
		return "", fmt.Errorf("who holds the pair %d/%d of message %d: %w", last.Worker(), last.Process(), last, err)
	}
	if !strings.HasPrefix(string(name), "guild-") {
		return "", fmt.Errorf("message %d was minted by %s, not a guild node", last, name)
	}
	return string(name), nil
}

// etcdURLs are the members' client URLs.
func etcdURLs(ms []*etcdMember) []string {
	var out []string
	for _, m := range ms {
		out = append(out, "http://"+m.addr+":2379")
	}
	return out
}

func appendFile(name, s string) error {
	f, err := os.OpenFile(name, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = f.WriteString(s)
	return err
}

func tails(c *topology.Cluster) string {
	var sb strings.Builder
	for _, n := range c.Nodes {
		out := n.Output()
		if len(out) > 3000 {
			out = "..." + out[len(out)-3000:]
		}
		fmt.Fprintf(&sb, "--- %s:\n%s\n", n.Name, out)
	}
	return sb.String()
}

// figures are what users saw during and after each fault: send
// availability (acknowledged / attempted), p99 send latency during the
// fault and in the 15 s after, time from the heal until sends succeed
// again, and gateway sessions resumed vs identified anew.
func figures(windows []window, ops []history.Op, sessions []*session, begin, end time.Time) string {
	var sends []history.Op
	for _, op := range ops {
		if op.Kind == history.Send && !op.Return.IsZero() {
			sends = append(sends, op)
		}
	}
	sort.Slice(sends, func(i, j int) bool { return sends[i].Call.Before(sends[j].Call) })
	stats := func(from, to time.Time) (attempted, acked int, p99 time.Duration) {
		var lat []time.Duration
		for _, op := range sends {
			if op.Call.Before(from) || !op.Call.Before(to) {
				continue
			}
			attempted++
			if op.OK {
				acked++
				lat = append(lat, op.Return.Sub(op.Call))
			}
		}
		if len(lat) > 0 {
			slices.Sort(lat)
			p99 = lat[(len(lat)*99+99)/100-1]
		}
		return
	}
	pct := func(a, n int) string {
		if n == 0 {
			return "–"
		}
		return fmt.Sprintf("%.1f %% (%d/%d)", 100*float64(a)/float64(n), a, n)
	}
	var sb strings.Builder
	sb.WriteString("| fault | held | send availability during | p99 send during | p99 send 15 s after | time to recover | sessions resumed / re-identified |\n|---|---|---|---|---|---|---|\n")
	// The quiet time before the first fault is the peer every row is
	// compared with.
	calmEnd := end
	if len(windows) > 0 {
		calmEnd = windows[0].start
	}
	n0, a0, p0 := stats(begin, calmEnd)
	fmt.Fprintf(&sb, "| none (before the first fault) | %v | %s | %v | | | |\n", calmEnd.Sub(begin).Round(time.Second), pct(a0, n0), p0.Round(time.Millisecond))
	for k, w := range windows {
		n, a, p := stats(w.start, w.healed)
		_, _, pa := stats(w.healed, w.healed.Add(15*time.Second))
		// Time to recover: from the heal until the first acknowledged
		// send invoked after the last send that failed (invoked during
		// the fault or in the 15 s after); 0 when none failed or sends
		// were back before the heal.
		back := time.Duration(0)
		var lastFail time.Time
		for _, op := range sends {
			if !op.OK && !op.Call.Before(w.start) && op.Call.Before(w.healed.Add(15*time.Second)) && op.Return.After(lastFail) {
				lastFail = op.Return
			}
		}
		if !lastFail.IsZero() {
			for _, op := range sends {
				if op.OK && op.Call.After(lastFail) {
					back = max(0, op.Call.Sub(w.healed))
					break
				}
			}
		}
		// Sessions are counted until the next fault starts: nothing
		// else acted meanwhile, and a session that lost its gateway
		// may take longer than the 15 s after the heal to be back.
		until := end
		if k+1 < len(windows) {
			until = windows[k+1].start
		}
		res, ids, lost := 0, 0, 0
		var longest time.Duration
		for _, s := range sessions {
			r, i := s.counts(w.start, until)
			res, ids = res+r, ids+i
			l, o := s.outage(w.start, until, end)
			lost, longest = lost+l, max(longest, o)
		}
		sess := fmt.Sprintf("%d / %d", res, ids)
		if lost > 0 {
			sess += fmt.Sprintf(" (%d lost, all back within %v)", lost, longest.Round(100*time.Millisecond))
		}
		errNote := ""
		if w.note != "" {
			errNote = " (" + w.note + ")"
		}
		if w.err != nil {
			errNote = " (error: " + truncate(w.err.Error(), 60) + ")"
		}
		fmt.Fprintf(&sb, "| %s %s%s | %v | %s | %v | %v | %v | %s |\n", w.f.kind, strings.Join(w.f.targets, ","), errNote,
			w.healed.Sub(w.start).Round(time.Second), pct(a, n), p.Round(time.Millisecond), pa.Round(time.Millisecond),
			back.Round(100*time.Millisecond), sess)
	}
	n, a, p := stats(begin, end)
	fmt.Fprintf(&sb, "| whole run | %v | %s | %v | | | |\n", end.Sub(begin).Round(time.Second), pct(a, n), p.Round(time.Millisecond))
	return sb.String()
}
