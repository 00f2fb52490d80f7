package readstate_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/concord-chat/concord/runtime/adapters/eventlog"
	"github.com/concord-chat/concord/runtime/adapters/eventlog/memlog"
	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/readstate"
)

// freezeLog is a log whose consumers' marks and commits stop reaching it
// once frozen: a node that flushed its table but died before committing
// offsets.
type freezeLog struct {
	eventlog.Log
	frozen atomic.Bool
}

func (f *freezeLog) Consume(ctx context.Context, group string, topics []string, h eventlog.Handler) error {
	return f.Log.Consume(ctx, group, topics, freezeHandler{h, f})
}

type freezeHandler struct {
	h eventlog.Handler
	f *freezeLog
}

func (h freezeHandler) Setup(ctx context.Context, s eventlog.Session) error {
	return h.h.Setup(ctx, freezeSession{s, h.f})
}

func (h freezeHandler) Cleanup(ctx context.Context, s eventlog.Session) error {
	return h.h.Cleanup(ctx, freezeSession{s, h.f})
}

func (h freezeHandler) ConsumeClaim(ctx context.Context, s eventlog.Session, c eventlog.Claim) error {
	return h.h.ConsumeClaim(ctx, freezeSession{s, h.f}, c)
}

type freezeSession struct {
	eventlog.Session
	f *freezeLog
}

func (s freezeSession) Mark(topic string, p int32, next int64) {
	if !s.f.frozen.Load() {
		s.Session.Mark(topic, p, next)
	}
}

func (s freezeSession) Commit(ctx context.Context) error {
	if s.f.frozen.Load() {
		return nil
	}
	return s.Session.Commit(ctx)
}

func publish(t testing.TB, l eventlog.Log, evs ...eventlog.MessageEvent) {
	t.Helper()
	publishTo(t, l, eventlog.MessagesTopic, evs...)
}

func publishTo(t testing.TB, l eventlog.Log, topic string, evs ...eventlog.MessageEvent) {
	t.Helper()
	for _, ev := range evs {
		r, err := ev.Record()
		if err != nil {
			t.Fatal(err)
		}
		r.Topic = topic
		if err := l.Append(context.Background(), r); err != nil {
			t.Fatal(err)
		}
	}
}

func create(id, ch snowflake.ID, everyone bool, mentions ...snowflake.ID) eventlog.MessageEvent {
	return eventlog.MessageEvent{Type: eventlog.MessageCreate, GuildID: guild, ChannelID: ch, MessageID: id, AuthorID: author,
		Mentions: mentions, MentionEveryone: everyone}
}

// running is a Service consuming a log in the background.
type running struct {
	s      *readstate.Service
	cancel context.CancelFunc
	done   chan error
}

func run(s *readstate.Service, l eventlog.Log) *running {
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{s: s, cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- s.Run(ctx, l) }()
	return r
}

func (r *running) stop() error {
	r.cancel()
	return <-r.done
}

// flushUntilCommitted flushes s until group has committed the whole topic.
func flushUntilCommitted(t testing.TB, s *readstate.Service, l eventlog.Log, group, topic string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		if err := s.Flush(context.Background()); err != nil {
			t.Fatal(err)
		}
		end, off, done := positions(t, l, group, topic)
		if done {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("group %s committed %v of %v", group, off, end)
		}
		time.Sleep(5 * time.Millisecond) // polling a condition, bounded by the deadline
	}
}

// waitCount waits until user's in-memory count in ch reaches want.
func waitCount(t testing.TB, s *readstate.Service, user, ch snowflake.ID, want int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for mentionCount(t, s, user, ch) != want {
		if time.Now().After(deadline) {
			t.Fatalf("user %d: %d mentions in memory, want %d", user, mentionCount(t, s, user, ch), want)
		}
		time.Sleep(2 * time.Millisecond) // polling a condition, bounded by the deadline
	}
}

// TestKillBeforeFlush kills a read-state node (its store stops accepting
// writes, as a dead process's would, and its marks stop reaching the log)
// after it wrote records whose offsets it never committed, and applied
// events and an ack it never flushed. A new node on the same log and table
// rebuilds mention counts from the committed offsets: nothing lost, and the
// records already ahead of those offsets are not counted twice. The ack
// made after the last flush is kept: an answered ack is in the table.
func TestKillBeforeFlush(t *testing.T) {
	for _, evict := range []bool{false, true} {
		t.Run(fmt.Sprintf("evictions=%v", evict), func(t *testing.T) {
			l, err := memlog.New(memlog.Config{Dir: t.TempDir(), CommitInterval: 5 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			killBeforeFlush(t, l, eventlog.MessagesTopic, "rs", evict)
		})
	}
}

func killBeforeFlush(t *testing.T, l eventlog.Log, topic, group string, evict bool) {
	ctx := context.Background()
	st := newStore(t, t.TempDir())
	cfg := readstate.Config{FlushInterval: time.Hour, Group: group, Topic: topic}
	if evict {
		cfg.Users, cfg.Shards = 1, 1 // every other user evicts (and writes) the last
	}
	a := newService(t, cfg, st, &visibility{}, nil)
	fl := &freezeLog{Log: l}
	ra := run(a, fl)

	// Phase 1, flushed: alice 5 mentions, bob 3, two @everyone.
	id := snowflake.ID(1000)
	next := func() snowflake.ID { id++; return id }
	for i := 0; i < 5; i++ {
		publishTo(t, l, topic, create(next(), channel, false, alice))
	}
	for i := 0; i < 3; i++ {
		publishTo(t, l, topic, create(next(), channel, false, bob))
	}
	publishTo(t, l, topic, create(next(), channel, true), create(next(), channel, true))
	waitCount(t, a, bob, channel, 5)
	ack1 := id
	if _, err := a.Ack(ctx, alice, channel, ack1); err != nil {
		t.Fatal(err)
	}
	flushUntilCommitted(t, a, l, group, topic)

	// Phase 2: alice 4 more and bob 4 more, written to the table
	// but their offsets never committed; then bob 1 more, carol 1
	// and an ack, with no flush after them.
	for i := 0; i < 4; i++ {
		publishTo(t, l, topic, create(next(), channel, false, alice, bob))
	}
	waitCount(t, a, bob, channel, 5+4)
	fl.frozen.Store(true)
	if err := a.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	publishTo(t, l, topic, create(next(), channel, false, bob))
	publishTo(t, l, topic, create(next(), channel, false, carol))
	waitCount(t, a, carol, channel, 3) // 2 @everyone + 1
	waitCount(t, a, bob, channel, 5+5)
	if _, err := a.Ack(ctx, alice, channel, id); err != nil {
		t.Fatal(err)
	}

	st.dead.Store(true) // kill -9: nothing more reaches the table
	ra.stop()

	st.dead.Store(false) // the table itself survives
	b := newService(t, readstate.Config{FlushInterval: 10 * time.Millisecond, Group: group, Topic: topic}, st, &visibility{}, nil)
	rb := run(b, l)
	flushUntilCommitted(t, b, l, group, topic)
	if err := rb.stop(); err != nil {
		t.Fatal(err)
	}
	c := newService(t, readstate.Config{}, st, &visibility{}, nil) // cold: reads only the table
	states, err := c.States(ctx, alice, []snowflake.ID{channel})
	if err != nil {
		t.Fatal(err)
	}
	// The second ack was answered, so it was written through: the kill
	// before any flush does not lose it, and it cleared alice's count.
	if got := states[0].LastReadID; got != id {
		t.Fatalf("alice's marker is %d; want %d (the acknowledged ack, written before it was answered)", got, id)
	}
	aliceWant := 0
	for _, want := range []struct {
		user snowflake.ID
		n    int
	}{{alice, aliceWant}, {bob, 2 + 3 + 5}, {carol, 2 + 1}} {
		if n := mentionCount(t, c, want.user, channel); n != want.n {
			t.Errorf("after the kill user %d has %d mentions, want %d", want.user, n, want.n)
		}
	}
}

// TestRebalanceNoDoubleCount runs two read-state members of one group on
// one table while a member joins and leaves, and checks the table's counts
// against the exact number of mentions.
func TestRebalanceNoDoubleCount(t *testing.T) {
	l, err := memlog.New(memlog.Config{Partitions: 8, CommitInterval: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	st := newStore(t, "")
	cfg := readstate.Config{FlushInterval: 10 * time.Millisecond, Group: "rs", Users: 4, Shards: 2}
	users := []snowflake.ID{alice, bob, carol, 14, 15}
	want := map[[2]snowflake.ID]int{}
	id := snowflake.ID(5000)
	batch := func(n int) {
		for i := 0; i < n; i++ {
			id++
			u, ch := users[int(id)%len(users)], snowflake.ID(100+int(id)%8)
			want[[2]snowflake.ID{u, ch}]++
			publish(t, l, create(id, ch, false, u))
		}
	}
	a := run(newService(t, cfg, st, &visibility{}, nil), l)
	batch(200)
	b := run(newService(t, cfg, st, &visibility{}, nil), l)
	batch(200)
	if err := b.stop(); err != nil {
		t.Fatal(err)
	}
	batch(200)
	waitCommitted(t, l, "rs", eventlog.MessagesTopic)
	if err := a.stop(); err != nil {
		t.Fatal(err)
	}
	c := newService(t, readstate.Config{}, st, &visibility{}, nil)
	for k, n := range want {
		if got := mentionCount(t, c, k[0], k[1]); got != n {
			t.Errorf("user %d channel %d: %d mentions in the table, want %d", k[0], k[1], got, n)
		}
	}
}

// stallingVisibility answers its first check only when the check's context
// is done, and then "cannot see", as a check of a guild owner over the
// network gives up (readstaterole's guildPerms); later checks answer yes.
type stallingVisibility struct {
	entered chan struct{}
	first   atomic.Bool
}

func (v *stallingVisibility) CanView(ctx context.Context, _, _ snowflake.ID) bool {
	if v.first.CompareAndSwap(false, true) {
		close(v.entered)
		<-ctx.Done()
		return false
	}
	return true
}

// TestGenerationEndsDuringVisibilityCheck ends a member's generation (a
// second member joins) while the member checks whether a mentioned user
// sees the channel. The check's "no" under a cancelled context decides
// nothing: the record stays unapplied, the partition's next owner applies
// it, and the mention counts once. Neither member fails.
func TestGenerationEndsDuringVisibilityCheck(t *testing.T) {
	l, err := memlog.New(memlog.Config{Partitions: 1, CommitInterval: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	st := newStore(t, "")
	cfg := readstate.Config{FlushInterval: 10 * time.Millisecond, Group: "rs"}
	vis := &stallingVisibility{entered: make(chan struct{})}
	a := run(newService(t, cfg, st, vis, nil), l)
	publish(t, l, create(7001, channel, false, bob))
	<-vis.entered
	b := run(newService(t, cfg, st, vis, nil), l)
	waitCommitted(t, l, "rs", eventlog.MessagesTopic)
	for name, r := range map[string]*running{"a": a, "b": b} {
		if err := r.stop(); err != nil {
			t.Errorf("member %s: %v", name, err)
		}
	}
	c := newService(t, readstate.Config{}, st, &visibility{}, nil)
	if n := mentionCount(t, c, bob, channel); n != 1 {
		t.Fatalf("bob has %d mentions in the table, want 1 (the check cut short by the rebalance is not a \"no\")", n)
	}
}

// ctxStore fails a write whose context is done, as a real store does.
type ctxStore struct{ readstate.Store }

func (c ctxStore) Write(ctx context.Context, u []readstate.Record, ch []readstate.ChannelRecord) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return c.Store.Write(ctx, u, ch)
}

// claimsSession is a generation's session that owns the given partitions.
type claimsSession struct{ claims map[string][]int32 }

func (claimsSession) MemberID() string                 { return "m" }
func (claimsSession) Generation() int64                { return 2 }
func (s claimsSession) Claims() map[string][]int32     { return s.claims }
func (claimsSession) Mark(string, int32, int64)        {}
func (claimsSession) Commit(ctx context.Context) error { return nil }

// TestSetupAfterGenerationEnded runs a generation's Setup whose context a
// further rebalance has already cancelled, with claims that changed and a
// channel record to write: the write is made anyway (as Cleanup's is),
// and the member does not fail.
func TestSetupAfterGenerationEnded(t *testing.T) {
	st := ctxStore{newStore(t, "")}
	s := newService(t, readstate.Config{FlushInterval: time.Hour}, st, &visibility{}, nil)
	if err := s.Apply(context.Background(), msg(t, 7100, 0, channel, nil, nil, true)); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	sess := claimsSession{map[string][]int32{eventlog.MessagesTopic: {0}}}
	if err := s.Handler().Setup(ctx, sess); err != nil {
		t.Fatalf("Setup under an ended generation: %v", err)
	}
	rec, ok, err := st.LoadChannel(context.Background(), channel)
	if err != nil || !ok || len(rec.Everyone) != 1 {
		t.Fatalf("channel record after Setup: %+v, ok %v, err %v; want the @everyone written", rec, ok, err)
	}
}
