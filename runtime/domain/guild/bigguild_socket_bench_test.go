package guild

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/concord-chat/concord/runtime/adapters/store"
	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/event"
	"github.com/concord-chat/concord/runtime/domain/fanout"
	"github.com/concord-chat/concord/runtime/edge/gateway"
	"github.com/concord-chat/concord/test/load"
)

// TestMain lets the benchmark's client processes (this binary,
// re-executed by test/load) run as clients.
func TestMain(m *testing.M) {
	load.MaybeRunClient()
	os.Exit(m.Run())
}

// The real-socket run of the 100,000-online guild (issue 26): as many
// real WebSocket sessions as one gateway process holds under this
// machine's 20,000 descriptors per process, on a real gateway node
// (runtime/edge/gateway) in this process, their clients in two child
// processes on their own 127.x source addresses; the rest of the online
// sessions simulated (counted at the sink) behind the same 7 in-process
// relays. Viewers (op 14 on channel 0) are real; so are part of the
// passive sessions. A message's send time is stamped in its payload just
// before the owner actor takes it; each client reads it on arrival.
//
//	flock /tmp/concord-loadtest.lock go test ./runtime/domain/guild -run XXX -bench BenchmarkBigGuildSockets -benchtime=1x -timeout 15m \
//	  [-bigguild.sockets=18000 -bigguild.socket-viewers=10000 -bigguild.rounds=20 -bigguild.mention-rounds=5]
var (
	bigSockets       = flag.Int("bigguild.sockets", 18000, "real WebSocket sessions (at most ~19,500 under a 20,000-descriptor limit)")
	bigSocketViewers = flag.Int("bigguild.socket-viewers", 10000, "of the real sessions, those viewing channel 0 (op 14); the rest are passive")
	bigRounds        = flag.Int("bigguild.rounds", 20, "plain messages to channel 0, one after the viewers got the previous")
	bigMentionRounds = flag.Int("bigguild.mention-rounds", 5, "@everyone messages to channel 0, one after the passive real sessions got the previous")
)

const socketNode = "gw-real"

// socketBackend admits every IDENTIFY as a new user and hands the
// subscribed sessions to the benchmark.
type socketBackend struct {
	next atomic.Uint64
	subs chan event.Session
}

func (sb *socketBackend) Identify(ctx context.Context, token string, s event.Session) (event.Ready, error) {
	return event.Ready{UserID: snowflake.ID(1<<50 + sb.next.Add(1) - 1)}, nil
}

func (sb *socketBackend) Subscribe(ctx context.Context, s event.Session) error {
	sb.subs <- s
	return nil
}

func (sb *socketBackend) Disconnect(ctx context.Context, s event.Session) {}

// socketSink delivers the real gateway node's batches to its sockets and
// counts the simulated nodes' deliveries.
type socketSink struct {
	gw        *gateway.Node
	simulated atomic.Int64
}

func (s *socketSink) Deliver(ctx context.Context, node string, b event.Batch) {
	if node == socketNode {
		s.gw.Deliver(ctx, node, b)
		return
	}
	s.simulated.Add(int64(len(b.Targets)))
}

func BenchmarkBigGuildSockets(b *testing.B) {
	ctx := context.Background()
	limit, err := load.RaiseFileLimit()
	if err != nil {
		b.Fatal(err)
	}
	real, viewers := *bigSockets, *bigSocketViewers
	if uint64(real)+500 > limit {
		b.Fatalf("%d sockets need %d descriptors in this process; RLIMIT_NOFILE is %d", real, real+500, limit)
	}
	if viewers > real || *bigSessions < real {
		b.Fatalf("socket-viewers %d, sockets %d, sessions %d: want viewers ≤ sockets ≤ sessions", viewers, real, *bigSessions)
	}
	backend := &socketBackend{subs: make(chan event.Session, real)}
	gw, err := gateway.NewNode(gateway.Config{Node: socketNode, ZombieTimeout: time.Hour, Logger: slog.New(slog.DiscardHandler)}, backend)
	if err != nil {
		b.Fatal(err)
	}
	defer gw.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/gateway", gw)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: time.Minute}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()
	url := "ws://" + ln.Addr().String() + "/gateway?v=10&encoding=json"
	heap0, stack0 := heapMB(), stackMB()

	// Viewers first, then the passive real sessions: the order of their
	// IDENTIFYs tells them apart.
	rounds, mentions := *bigRounds, *bigMentionRounds
	connect := func(group, n, rounds int) (*load.Clients, []event.Session) {
		t0 := time.Now()
		c, err := load.StartClients(ctx, url, n, rounds, load.Sources(200+group, n, 5000))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(c.Close)
		if _, err := c.Expect("ready", 10*time.Minute); err != nil {
			b.Fatal(err)
		}
		out := make([]event.Session, 0, n)
		for len(out) < n {
			out = append(out, <-backend.subs)
		}
		b.Logf("client process %d: %d sessions connected and identified in %v", group, n, time.Since(t0).Round(time.Millisecond))
		return c, out
	}
	vc, vs := connect(0, viewers, rounds)
	pc, ps := connect(1, real-viewers, rounds+mentions)
	gwHeap, gwStack := heapMB()-heap0, stackMB()-stack0

	sink := &socketSink{gw: gw}
	f := newFixtureWithSink(b, sink)
	local := fanout.NewLocal(sink, 7, 1<<16)
	defer local.Close()
	svc, err := NewService(Config{ShadowEvery: -1}, Deps{Store: f.store, Sink: sink, IDs: f.ids, Auth: f.auth, Slices: local})
	if err != nil {
		b.Fatal(err)
	}
	defer svc.Close()
	f.svc = svc
	owner := f.user("owner", false)
	guild := must[GuildInfo](b)(svc.CreateGuild(bg, owner.ID, "big")).Guild.ID
	var chans []snowflake.ID
	for i := range bigChannels {
		chans = append(chans, must[store.Channel](b)(svc.Channels.Create(bg, owner.ID, guild, ChannelSpec{Name: fmt.Sprintf("c%d", i), Type: store.ChannelText})).ID)
	}
	t0 := time.Now()
	err = svc.do(bg, guild, func(a *Actor) error {
		for i := range *bigMembers {
			uid := snowflake.ID(1<<50 + i)
			m := &store.Member{GuildID: guild, UserID: uid, JoinedAt: t0}
			a.members[uid] = m
			a.engine.SetMember(engineMember(*m))
		}
		add := func(s event.Session, active []snowflake.ID) {
			a.setActive(s, active)
			a.addSub(&subscriber{s: s, visible: a.visibleChannels(s.UserID)})
		}
		for _, s := range vs {
			add(s, chans[:1])
		}
		for _, s := range ps {
			add(s, nil)
		}
		for i := real; i < *bigSessions; i++ {
			s := event.Session{ID: event.SessionID(fmt.Sprintf("sim%06d", i)), UserID: snowflake.ID(1<<50 + i),
				Bot: i%100 == 0, Intents: IntentGuilds | IntentGuildMessages, Node: fmt.Sprintf("sim-%d", i%8)}
			add(s, nil)
		}
		if a.sliced == nil {
			return fmt.Errorf("%d sessions did not go to relays", len(a.subs))
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := svc.Channels.List(bg, owner.ID, guild); err != nil {
		b.Fatal(err)
	}
	if err := local.Sync(ctx); err != nil {
		b.Fatal(err)
	}
	b.Logf("guild of %d members, %d online (%d real: %d viewing channel 0, %d passive; %d simulated) handed to 7 relays in %v",
		*bigMembers, *bigSessions, real, viewers, real-viewers, *bigSessions-real, time.Since(t0).Round(time.Millisecond))

	var ownerTimes []time.Duration
	var ownerMu sync.Mutex
	send := func(round int, everyone bool) {
		err := svc.do(bg, guild, func(a *Actor) error {
			ts := time.Now()
			payload := json.RawMessage(fmt.Sprintf(`{"round":%d,"ts":%d,"channel_id":"%d","content":"a message of a typical length, some eighty characters, in the biggest guild"}`, round, ts.UnixNano(), chans[0]))
			a.sliceEvent(bg, &fanout.Event{Type: "MESSAGE_CREATE", Payloads: []json.RawMessage{payload, payload}, Kind: fanout.KindMessage,
				Intent: IntentGuildMessages, Channel: chans[0], Create: true, MessageID: snowflake.FromTime(ts), Author: owner.ID, MentionEveryone: everyone})
			ownerMu.Lock()
			ownerTimes = append(ownerTimes, time.Since(ts))
			ownerMu.Unlock()
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	sim0 := sink.simulated.Load()
	cpu0 := cpuTime()
	for r := 1; r <= rounds; r++ {
		send(r, false)
		if _, err := vc.Expect(fmt.Sprintf("round %d", r), time.Minute); err != nil {
			b.Fatalf("plain message %d: %v", r, err)
		}
	}
	plainCPU := cpuTime() - cpu0
	simPlain := sink.simulated.Load() - sim0
	for r := rounds + 1; r <= rounds+mentions; r++ {
		send(r, true)
		if _, err := pc.Expect(fmt.Sprintf("round %d", r), 2*time.Minute); err != nil {
			b.Fatalf("@everyone %d: %v", r-rounds, err)
		}
	}
	if err := local.Sync(ctx); err != nil {
		b.Fatal(err)
	}
	simAll := sink.simulated.Load() - sim0
	vst, err := vc.Finish()
	if err != nil {
		b.Fatal(err)
	}
	pst, err := pc.Finish()
	if err != nil {
		b.Fatal(err)
	}
	b.Logf("gateway heap for %d sockets: %.1f MB (%.2f KB per session); goroutine stacks %.1f MB (%.2f KB per session)",
		real, gwHeap, gwHeap*1024/float64(real), gwStack, gwStack*1024/float64(real))
	b.Logf("plain message to channel 0, %d rounds: send→socket to the %d real viewers p50 %v p99 %v max %v (%d deliveries); owner actor %v median; process CPU %v per message; %d deliveries per message to simulated sessions (bots in full, PASSIVE_UPDATE_V1 to the passive ones as flushed)",
		rounds, viewers, vst.P50, vst.P99, vst.Max, vst.Received, median(ownerTimes[:rounds]), plainCPU/time.Duration(rounds), simPlain/int64(rounds))
	b.Logf("@everyone to channel 0, %d rounds: send→socket to the %d real passive sessions (the mention exception) p50 %v p99 %v max %v (%d deliveries); %d simulated deliveries per message",
		mentions, real-viewers, pst.P50, pst.P99, pst.Max, pst.Received, (simAll-simPlain)/int64(max(mentions, 1)))
	b.ReportMetric(float64(vst.P99.Microseconds())/1000, "viewer-p99-ms")
	b.ReportMetric(float64(pst.P99.Microseconds())/1000, "mention-p99-ms")
}

// stackMB is the memory of goroutine stacks in use (runtime.MemStats
// StackInuse), which HeapAlloc leaves out: a gateway session's reader
// and writer goroutines hold theirs there.
func stackMB() float64 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return float64(ms.StackInuse) / (1 << 20)
}
