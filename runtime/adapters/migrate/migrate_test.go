package migrate

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/concord-chat/concord/runtime/adapters/store"
	"github.com/concord-chat/concord/runtime/adapters/store/pebble"
	"github.com/concord-chat/concord/runtime/base/snowflake"
)

// listed is a pebble store that knows its channels, as a migration source.
type listed struct {
	*pebble.Store
	mu    sync.Mutex
	chans []snowflake.ID
}

func (l *listed) MessageChannels(_ context.Context, after, before snowflake.ID, limit int) ([]snowflake.ID, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []snowflake.ID
	for _, c := range l.chans {
		if c > after && (before == 0 || c < before) && len(out) < limit {
			out = append(out, c)
		}
	}
	return out, nil
}

func newPebble(t *testing.T) *pebble.Store {
	s, err := pebble.New(pebble.Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// fill writes channels with histories of various lengths spread over
// years, and returns the source and the total message count.
func fill(t *testing.T, channels int) (*listed, int) {
	src := &listed{Store: newPebble(t)}
	ctx := context.Background()
	total := 0
	rng := rand.New(rand.NewPCG(1, 2))
	for c := range channels {
		// Channel ids spread over the id space like real ones.
		ch := snowflake.FromTime(time.Date(2016+c%10, time.Month(1+c%12), 1+c%28, 0, 0, 0, 0, time.UTC)) | snowflake.ID(c)
		src.chans = append(src.chans, ch)
		n := rng.IntN(450)
		for i := range n {
			at := ch.Time().Add(time.Duration(i) * time.Duration(rng.IntN(48)+1) * time.Hour)
			m := store.Message{ID: snowflake.FromTime(at) | snowflake.ID(i), ChannelID: ch, AuthorID: 7,
				Content: "history " + at.String(), Mentions: []snowflake.ID{1, 2}[:i%3%2],
				EditedAt: time.UnixMilli(at.UnixMilli() * int64(i%2)).UTC()}
			if i%2 == 0 {
				m.EditedAt = time.Time{}
			}
			if err := src.PutMessage(ctx, m); err != nil {
				t.Fatal(err)
			}
		}
		total += n
	}
	slices.Sort(src.chans)
	return src, total
}

// history returns every message of ch, newest first.
func history(t *testing.T, s store.Messages, ch snowflake.ID) []store.Message {
	var out []store.Message
	var before snowflake.ID
	for {
		page, err := s.ListMessages(context.Background(), ch, store.HistoryQuery{Before: before, Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, page...)
		if len(page) < 100 {
			return out
		}
		before = page[len(page)-1].ID
	}
}

func assertCopied(t *testing.T, src *listed, dst store.Messages) {
	t.Helper()
	for _, ch := range src.chans {
		if d := diff(history(t, src, ch), history(t, dst, ch)); d != "" {
			t.Fatalf("channel %v: %s", ch, d)
		}
	}
}

// failingDest fails every write after the first limit ones.
type failingDest struct {
	store.Messages
	limit  int64
	writes atomic.Int64
}

func (f *failingDest) PutMessage(ctx context.Context, m store.Message) error {
	if f.writes.Add(1) > f.limit {
		return errors.New("destination down")
	}
	return f.Messages.PutMessage(ctx, m)
}

func TestCopyAndVerify(t *testing.T) {
	src, total := fill(t, 40)
	dst := newPebble(t)
	var bar strings.Builder
	rep, err := Run(context.Background(), Config{From: src, To: dst, Ranges: 8, Workers: 3, Progress: &bar})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Channels != 40 || rep.Messages != int64(total) {
		t.Fatalf("report %+v, want 40 channels, %d messages", rep, total)
	}
	assertCopied(t, src, dst)
	if !strings.Contains(bar.String(), "100.0%") {
		t.Fatalf("progress bar never reached 100%%: %q", bar.String())
	}
	vr, err := Verify(context.Background(), VerifyConfig{From: src, To: dst, Samples: 20})
	if err != nil || !vr.OK() || vr.Channels == 0 || vr.Reads < 2*vr.Channels {
		t.Fatalf("Verify: %+v %v", vr, err)
	}
}

// TestResume: a copy that fails midway saves its progress; the rerun
// finishes from the checkpoint without starting over.
func TestResume(t *testing.T) {
	src, total := fill(t, 30)
	dst := newPebble(t)
	cpFile := t.TempDir() + "/migrate.json"
	failing := &failingDest{Messages: dst, limit: int64(total / 2)}
	_, err := Run(context.Background(), Config{From: src, To: failing, Ranges: 6, Workers: 2, Checkpoint: cpFile})
	if err == nil || !strings.Contains(err.Error(), "destination down") {
		t.Fatalf("first run: %v", err)
	}
	cp, resumed, err := loadCheckpoint(cpFile, 6)
	if err != nil || !resumed || cp.Channels == 0 || cp.Channels >= 30 {
		t.Fatalf("checkpoint after failure: %+v resumed=%v %v", cp, resumed, err)
	}
	copiedBefore := cp.Channels
	rep, err := Run(context.Background(), Config{From: src, To: dst, Ranges: 6, Workers: 2, Checkpoint: cpFile})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Resumed || rep.Channels != 30-copiedBefore {
		t.Fatalf("resumed run copied %d channels, want %d (report %+v)", rep.Channels, 30-copiedBefore, rep)
	}
	assertCopied(t, src, dst)
	// Running again with the finished checkpoint copies nothing.
	rep, err = Run(context.Background(), Config{From: src, To: dst, Ranges: 6, Checkpoint: cpFile})
	if err != nil || rep.Channels != 0 {
		t.Fatalf("rerun after completion: %+v %v", rep, err)
	}
}

// TestVerifyFindsDifferences: a message missing or changed on the
// destination is reported.
func TestVerifyFindsDifferences(t *testing.T) {
	src, _ := fill(t, 1)
	dst := newPebble(t)
	if _, err := Run(context.Background(), Config{From: src, To: dst}); err != nil {
		t.Fatal(err)
	}
	ch := src.chans[0]
	newest := history(t, src, ch)
	if len(newest) == 0 {
		t.Fatal("test setup: fill made an empty channel")
	}
	if err := dst.DeleteMessage(context.Background(), ch, newest[0].ID); err != nil {
		t.Fatal(err)
	}
	vr, err := Verify(context.Background(), VerifyConfig{From: src, To: dst, Samples: 1})
	if err != nil || vr.OK() || vr.Mismatches[0].ChannelID != ch {
		t.Fatalf("Verify after a deletion: %+v %v", vr, err)
	}
}

func TestSplitRanges(t *testing.T) {
	rs := splitRanges(16, time.Now())
	if rs[0].Lo != 0 || rs[15].Hi != 0 {
		t.Fatalf("ranges do not cover the id space: %+v %+v", rs[0], rs[15])
	}
	for i := 1; i < len(rs); i++ {
		if rs[i].Lo != rs[i-1].Hi || rs[i].Lo <= rs[i-1].Lo {
			t.Fatalf("ranges %d and %d do not tile", i-1, i)
		}
	}
}
