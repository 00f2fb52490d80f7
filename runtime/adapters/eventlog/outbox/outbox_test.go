package outbox_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/concord-chat/concord/runtime/adapters/eventlog"
	"github.com/concord-chat/concord/runtime/adapters/eventlog/memlog"
	"github.com/concord-chat/concord/runtime/adapters/eventlog/outbox"
	"github.com/concord-chat/concord/runtime/base/snowflake"
)

// gatedLog is an eventlog.Log whose Append blocks while the gate is shut
// (a broker that does not answer) and fails when its context ends.
type gatedLog struct {
	eventlog.Log
	mu      sync.Mutex
	open    chan struct{}
	attempt chan struct{}
}

func newGated(l eventlog.Log) *gatedLog {
	return &gatedLog{Log: l, open: make(chan struct{}), attempt: make(chan struct{}, 100)}
}

func (g *gatedLog) Append(ctx context.Context, rs ...eventlog.Record) error {
	select {
	case g.attempt <- struct{}{}:
	default:
	}
	g.mu.Lock()
	open := g.open
	g.mu.Unlock()
	select {
	case <-open:
		return g.Log.Append(ctx, rs...)
	case <-ctx.Done():
		return eventlog.ErrUnavailable
	}
}

func (g *gatedLog) release() { close(g.open) }

func event(id uint64) eventlog.MessageEvent {
	return eventlog.MessageEvent{Type: eventlog.MessageCreate, GuildID: 1, ChannelID: 7, MessageID: snowflake.ID(id), AuthorID: 3}
}

// readAll consumes topic with a fresh group until n records arrived and
// returns the message ids in order.
func readAll(t *testing.T, l eventlog.Log, n int) []snowflake.ID {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var ids []snowflake.ID
	err := l.Consume(ctx, t.Name()+time.Now().String(), []string{eventlog.MessagesTopic}, eventlog.Each(func(_ context.Context, r eventlog.Record) error {
		ev, err := eventlog.DecodeMessageEvent(r.Value)
		if err != nil {
			return err
		}
		ids = append(ids, ev.MessageID)
		if len(ids) == n {
			cancel()
		}
		return nil
	}))
	if err != nil {
		t.Fatalf("Consume: %v", err)
	}
	if len(ids) < n {
		t.Fatalf("read %d records, want %d", len(ids), n)
	}
	return ids
}

func TestPublishDoesNotWaitForTheLogAndRetries(t *testing.T) {
	ml, err := memlog.New(memlog.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer ml.Close()
	gl := newGated(ml)
	ob, err := outbox.New(outbox.Config{Dir: t.TempDir(), PublishTimeout: 20 * time.Millisecond, MaxBackoff: 20 * time.Millisecond}, gl)
	if err != nil {
		t.Fatal(err)
	}
	defer ob.Close()

	// The log does not answer; Publish still returns, within its bound.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for i := uint64(1); i <= 5; i++ {
		if err := ob.Publish(ctx, event(i)); err != nil {
			t.Fatalf("Publish while the log is down: %v", err)
		}
	}
	// Wait for two relay attempts: the first timed out and was retried.
	for i := 0; i < 2; i++ {
		select {
		case <-gl.attempt:
		case <-ctx.Done():
			t.Fatal("relay never tried the log")
		}
	}
	gl.release()
	if err := ob.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	ids := readAll(t, ml, 5)
	for i, id := range ids {
		if id != snowflake.ID(i+1) {
			t.Fatalf("ids %v, want 1..5 in order", ids)
		}
	}
}

func TestQueuedRecordsSurviveRestart(t *testing.T) {
	dir := t.TempDir()
	ml, err := memlog.New(memlog.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer ml.Close()
	down := newGated(ml)
	ob, err := outbox.New(outbox.Config{Dir: dir, PublishTimeout: 10 * time.Millisecond}, down)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for i := uint64(1); i <= 3; i++ {
		if err := ob.Publish(ctx, event(i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := ob.Close(); err != nil {
		t.Fatal(err)
	}
	// A new process on the same queue, with the log reachable.
	ob, err = outbox.New(outbox.Config{Dir: dir}, ml)
	if err != nil {
		t.Fatal(err)
	}
	defer ob.Close()
	fctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := ob.Flush(fctx); err != nil {
		t.Fatal(err)
	}
	if ids := readAll(t, ml, 3); len(ids) != 3 || ids[0] != 1 || ids[2] != 3 {
		t.Fatalf("after restart the log holds %v, want [1 2 3]", ids)
	}
}

func TestPublishAfterClose(t *testing.T) {
	ml, _ := memlog.New(memlog.Config{})
	defer ml.Close()
	ob, err := outbox.New(outbox.Config{}, ml)
	if err != nil {
		t.Fatal(err)
	}
	ob.Close()
	if err := ob.Publish(context.Background(), event(1)); !errors.Is(err, outbox.ErrClosed) {
		t.Fatalf("Publish after Close = %v, want ErrClosed", err)
	}
}
