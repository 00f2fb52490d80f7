package guild

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/concord-chat/concord/runtime/adapters/eventlog/outbox"
	"github.com/concord-chat/concord/runtime/adapters/store"
	"github.com/concord-chat/concord/runtime/base/snowflake"
)

// overlapWriter is an outbox.Writer whose writes take a store round trip
// and which counts writes to one channel that ran at the same time, and
// writes to different channels that did.
type overlapWriter struct {
	outbox.Writer
	mu       sync.Mutex
	inFlight map[snowflake.ID]int
	total    int
	same     int // a write began while another of its channel ran
	across   int // a write began while one of another channel ran
}

func (w *overlapWriter) PutMessage(ctx context.Context, typ string, m store.Message) error {
	w.mu.Lock()
	if w.inFlight[m.ChannelID] > 0 {
		w.same++
	}
	if w.total > w.inFlight[m.ChannelID] {
		w.across++
	}
	w.inFlight[m.ChannelID]++
	w.total++
	w.mu.Unlock()
	// A store round trip: long enough for the writes queued behind this
	// one to be in the same batch.
	time.Sleep(3 * time.Millisecond)
	err := w.Writer.PutMessage(ctx, typ, m)
	w.mu.Lock()
	w.inFlight[m.ChannelID]--
	w.total--
	w.mu.Unlock()
	return err
}

// TestBatchedWritesKeepChannelOrder: writes batched in one actor step
// commit one after the other within a channel, in id order — a history
// reader never sees a message before an older one of its channel is
// stored (the history checker of test/faults found that broken) — while
// the writes of different channels still commit side by side.
func TestBatchedWritesKeepChannelOrder(t *testing.T) {
	f := newFixture(t)
	w := &overlapWriter{Writer: outbox.Unlogged(f.store), inFlight: map[snowflake.ID]int{}}
	svc, err := NewService(Config{Now: f.clock.Now}, Deps{Store: f.store, Sink: f.sink, IDs: f.ids, Auth: f.auth, Messages: w})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { svc.Close() })
	f.svc = svc
	g := f.secretGuild()
	channels := []snowflake.ID{g.general.ID, g.secret.ID}
	const n = 60
	errs := make(chan error, n)
	for i := range n {
		go func() {
			_, err := f.svc.Messages.Create(bg, MessageWrite{Check: CheckSend, UserID: g.owner.ID,
				Message:  store.Message{ChannelID: channels[i%2], AuthorID: g.owner.ID, Content: fmt.Sprint(i)},
				Mentions: &Mentions{}, Render: render(g.owner)})
			errs <- err
		}()
	}
	for range n {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.same != 0 {
		t.Fatalf("%d writes began while an older write of their channel was still running", w.same)
	}
	if w.across == 0 {
		t.Fatal("no two channels' writes ever ran side by side: the batch lost its concurrency")
	}
}
