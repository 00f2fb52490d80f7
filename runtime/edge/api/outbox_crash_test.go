package api

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/concord-chat/concord/runtime/adapters/eventlog"
	"github.com/concord-chat/concord/runtime/adapters/eventlog/memlog"
	"github.com/concord-chat/concord/runtime/adapters/eventlog/outbox"
	"github.com/concord-chat/concord/runtime/adapters/store"
	"github.com/concord-chat/concord/runtime/adapters/store/objects"
	"github.com/concord-chat/concord/runtime/adapters/store/pebble"
	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/auth"
	"github.com/concord-chat/concord/runtime/domain/event"
	"github.com/concord-chat/concord/runtime/domain/guild"
	"github.com/concord-chat/concord/runtime/domain/readstate"
	readstatepebble "github.com/concord-chat/concord/runtime/domain/readstate/pebble"
)

// stalledLog is an event log whose appends never succeed (a broker that
// does not answer): the outbox relay runs and can publish nothing.
type stalledLog struct {
	eventlog.Log
	attempts chan struct{}
}

func (l *stalledLog) Append(ctx context.Context, _ ...eventlog.Record) error {
	select {
	case l.attempts <- struct{}{}:
	default:
	}
	<-ctx.Done()
	return eventlog.ErrUnavailable
}

// diesAtPublish is an outbox whose Publish never queues anything: the
// process dying between the store write and the separate enqueue, the
// gap of a publisher that is not part of the store's write. Its store
// relay works.
type diesAtPublish struct {
	*outbox.Outbox
	published chan eventlog.MessageEvent
}

func (d *diesAtPublish) Publish(_ context.Context, ev eventlog.MessageEvent) error {
	select {
	case d.published <- ev:
	default:
	}
	return errors.New("the process died before the enqueue")
}

// node is the part of a process the crash test restarts: the store, the
// event log, the outbox and the API over them.
type node struct {
	st     *pebble.Store
	log    *memlog.Log
	ob     *outbox.Outbox
	pub    *diesAtPublish
	guilds *guild.Service
	env    *env
}

func startNode(t *testing.T, dir string, stall bool) (*node, *stalledLog) {
	t.Helper()
	if topologyURL() != "" {
		t.Skip("in-process only: it restarts the store, outbox and handler of one process")
	}
	st, err := pebble.New(pebble.Config{Dir: filepath.Join(dir, "store")})
	if err != nil {
		t.Fatal(err)
	}
	lg, err := memlog.New(memlog.Config{Dir: filepath.Join(dir, "log")})
	if err != nil {
		t.Fatal(err)
	}
	var (
		relayTo eventlog.Log = lg
		stalled *stalledLog
	)
	if stall {
		stalled = &stalledLog{Log: lg, attempts: make(chan struct{}, 16)}
		relayTo = stalled
	}
	ob, err := outbox.New(outbox.Config{Dir: filepath.Join(dir, "outbox"), PublishTimeout: 50 * time.Millisecond, MaxBackoff: 100 * time.Millisecond}, relayTo)
	if err != nil {
		t.Fatal(err)
	}
	ids, err := snowflake.New(snowflake.Config{})
	if err != nil {
		t.Fatal(err)
	}
	iss, err := auth.New(auth.Config{Key: []byte(strings.Repeat("s", 32)), Password: auth.Params{Time: 1, MemoryKiB: 64, Threads: 1}}, st)
	if err != nil {
		t.Fatal(err)
	}
	sk := &sink{got: map[event.SessionID][]delivery{}, changed: make(chan struct{}, 1)}
	pub := &diesAtPublish{Outbox: ob, published: make(chan eventlog.MessageEvent, 16)}
	// The guild service writes messages through the outbox's Writer, as
	// the guild role wires it; pub is its log side, so an event that went
	// through the separate enqueue would be seen (and lost) there.
	svc, err := guild.NewService(guild.Config{}, guild.Deps{Store: st, Sink: sk, IDs: ids, Auth: iss,
		Messages: outbox.NewWriter(st, pub, nil)})
	if err != nil {
		t.Fatal(err)
	}
	objs, err := objects.NewDir(filepath.Join(dir, "objects"))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(New(Config{}, Deps{Store: st, Guilds: svc, Auth: iss, IDs: ids, Objects: objs, Events: pub}))
	n := &node{st: st, log: lg, ob: ob, pub: pub, guilds: svc,
		env: &env{t: t, url: srv.URL, srv: srv, tokens: map[snowflake.ID]string{}, guilds: svc, store: st, sink: sk, ids: ids, auth: iss, objs: objs}}
	t.Cleanup(n.stop)
	return n, stalled
}

// stop ends the node without draining anything: the outbox relay stops
// where it is, as a crash would stop it.
func (n *node) stop() {
	if n.st == nil {
		return
	}
	n.env.srv.Close()
	n.ob.Close()
	n.guilds.Close()
	n.st.Close()
	n.log.Close()
	n.st = nil
}

// TestSendEventSurvivesCrashBeforeRelay is the gap the transactional
// outbox closes: a send is acknowledged, the process dies before any
// separate enqueue (Publish queues nothing) and before any relay reached
// the event log, and after the restart the event still reaches the log —
// once — and the mention is counted. With the event published after the
// store write instead of inside it, the event is lost and the count
// stays 0.
func TestSendEventSurvivesCrashBeforeRelay(t *testing.T) {
	dir := t.TempDir()
	n1, stalled := startNode(t, dir, true)
	w := n1.env.world()
	m := n1.env.post(w.alice.Token, w.general, map[string]any{"content": fmt.Sprintf("ping <@%d>", w.bob.ID)})

	select {
	case ev := <-n1.pub.published:
		t.Fatalf("the send published %s of %d separately: it was not committed with the message", ev.Type, ev.MessageID)
	default:
	}
	// The event was committed with the message, in the store.
	entries, err := n1.st.ListOutbox(context.Background(), store.OutboxShard(w.general), 100, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !hasCreate(t, entries, m.ID, w.bob.ID) {
		t.Fatalf("the store's outbox holds no MESSAGE_CREATE of %d mentioning %d: %+v", m.ID, w.bob.ID, entries)
	}
	// The relay ran and the log did not take the event; then the process
	// is gone.
	select {
	case <-stalled.attempts:
	case <-time.After(30 * time.Second):
		t.Fatal("the outbox relay never tried to append the event")
	}
	n1.stop()
	if got := records(t, filepath.Join(dir, "log")); len(got) != 0 {
		t.Fatalf("the stalled log holds %d records; the test needs the crash before any relay", len(got))
	}

	// Restart on the same directories: the new process relays what the
	// dead one committed, and read states count the mention.
	n2, _ := startNode(t, dir, false)
	rs, err := readstatepebble.New(readstatepebble.Config{Dir: filepath.Join(dir, "readstate")})
	if err != nil {
		t.Fatal(err)
	}
	states, err := readstate.New(readstate.Config{}, rs, n2.guilds, n2.guilds)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- states.Run(ctx, n2.log) }()
	t.Cleanup(func() {
		cancel()
		<-done
		states.Close(context.Background())
		rs.Close()
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		s, err := states.ChannelState(context.Background(), w.bob.ID, w.general)
		if err != nil {
			t.Fatal(err)
		}
		if s.MentionCount == 1 {
			break
		}
		if s.MentionCount > 1 || time.Now().After(deadline) {
			t.Fatalf("bob's mention count in #general = %d, want 1", s.MentionCount)
		}
		select {
		case err := <-done:
			t.Fatalf("read-state consumer stopped: %v", err)
		case <-time.After(20 * time.Millisecond):
		}
	}
	if err := n2.ob.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	left, err := n2.st.ListOutbox(context.Background(), store.OutboxShard(w.general), 100, 0)
	if err != nil {
		t.Fatal(err)
	}
	if hasCreate(t, left, m.ID, w.bob.ID) {
		t.Fatal("the relayed event is still in the store's outbox")
	}
	n2.stop()
	creates := 0
	for _, ev := range records(t, filepath.Join(dir, "log")) {
		if ev.Type == eventlog.MessageCreate && ev.MessageID == m.ID {
			creates++
		}
	}
	if creates != 1 {
		t.Fatalf("the log holds %d MESSAGE_CREATE of the message, want 1", creates)
	}
}

// TestDeleteEventCommittedWithDelete: a delete's MESSAGE_DELETE is in the
// store's outbox as soon as the 204 is sent, in the same write.
func TestDeleteEventCommittedWithDelete(t *testing.T) {
	n, _ := startNode(t, t.TempDir(), true)
	w := n.env.world()
	m := n.env.post(w.alice.Token, w.general, map[string]any{"content": "soon gone"})
	if r := n.env.call("DELETE", fmt.Sprintf("%s/channels/%d/messages/%d", v10, w.general, m.ID), w.alice.Token, nil); r.Status != 204 {
		t.Fatalf("delete status %d", r.Status)
	}
	entries, err := n.st.ListOutbox(context.Background(), store.OutboxShard(w.general), 100, 0)
	if err != nil {
		t.Fatal(err)
	}
	var types []string
	for _, e := range entries {
		ev, err := eventlog.DecodeMessageEvent(e.Event.Value)
		if err != nil {
			t.Fatal(err)
		}
		if ev.MessageID == m.ID {
			types = append(types, ev.Type)
		}
	}
	if !slices.Equal(types, []string{eventlog.MessageCreate, eventlog.MessageDelete}) {
		t.Fatalf("outbox events of the message = %v, want create then delete", types)
	}
}

func hasCreate(t *testing.T, es []store.OutboxEntry, msg, mentioned snowflake.ID) bool {
	t.Helper()
	for _, e := range es {
		ev, err := eventlog.DecodeMessageEvent(e.Event.Value)
		if err != nil {
			t.Fatalf("outbox entry: %v", err)
		}
		if e.Event.Topic == eventlog.MessagesTopic && ev.Type == eventlog.MessageCreate && ev.MessageID == msg && slices.Contains(ev.Mentions, mentioned) {
			return true
		}
	}
	return false
}

// records reads every message event the log in dir holds.
func records(t *testing.T, dir string) []eventlog.MessageEvent {
	t.Helper()
	lg, err := memlog.New(memlog.Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer lg.Close()
	ends, err := lg.End(context.Background(), eventlog.MessagesTopic)
	if err != nil {
		return nil // the topic was never created: nothing appended
	}
	total := int64(0)
	for _, e := range ends {
		total += e
	}
	if total == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out []eventlog.MessageEvent
	err = lg.Consume(ctx, fmt.Sprintf("reader-%d", time.Now().UnixNano()), []string{eventlog.MessagesTopic}, eventlog.Each(func(_ context.Context, r eventlog.Record) error {
		ev, err := eventlog.DecodeMessageEvent(r.Value)
		if err != nil {
			return err
		}
		out = append(out, ev)
		if int64(len(out)) == total {
			cancel()
		}
		return nil
	}))
	if err != nil && ctx.Err() == nil {
		t.Fatal(err)
	}
	if int64(len(out)) != total {
		t.Fatalf("read %d of %d records", len(out), total)
	}
	return out
}
