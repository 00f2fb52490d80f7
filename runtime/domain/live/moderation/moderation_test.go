package moderation

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/concord-chat/concord/runtime/adapters/eventlog"
	"github.com/concord-chat/concord/runtime/adapters/eventlog/memlog"
	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/live"
)

// flaky fails while down, then scores "bad" texts 1 and others 0.
type flaky struct{ down atomic.Bool }

func (f *flaky) Score(_ context.Context, texts []string) ([]float64, error) {
	if f.down.Load() {
		return nil, errors.New("inference server unreachable")
	}
	out := make([]float64, len(texts))
	for i, t := range texts {
		if t == "bad" {
			out[i] = 1
		}
	}
	return out, nil
}

// recorder keeps the retractions appended, and the kinds of every
// append's records.
type recorder struct {
	*memlog.Log
	mu      sync.Mutex
	got     []live.Retraction
	appends [][]live.LogRecord
}

func (r *recorder) AppendTo(ctx context.Context, topic string, p int32, recs ...eventlog.Record) ([]int64, error) {
	var call []live.LogRecord
	for _, rec := range recs {
		lr, err := live.DecodeLogRecord(rec.Value)
		if err != nil {
			return nil, err
		}
		call = append(call, lr)
		if lr.Kind == live.KindRetract {
			r.mu.Lock()
			r.got = append(r.got, *lr.Retract)
			r.mu.Unlock()
		}
	}
	r.mu.Lock()
	r.appends = append(r.appends, call)
	r.mu.Unlock()
	return r.Log.AppendTo(ctx, topic, p, recs...)
}

// A classifier that is down holds the comments back (they are judged
// late, not skipped), and the consumer's lag grows meanwhile, which is
// what routers read to sample from trusted authors only; once it is back
// the offensive comment is retracted on its own partition with its seq.
func TestClassifierOutageJudgedLate(t *testing.T) {
	l, err := memlog.New(memlog.Config{Dir: t.TempDir(), NoSync: true, CommitInterval: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	rec := &recorder{Log: l}
	cl := &flaky{}
	cl.down.Store(true)
	topics := live.TopicsFor("mod.")
	m, err := New(Config{Topics: topics, Logger: slog.New(slog.DiscardHandler)}, Deps{Log: l, Append: rec, Classifier: cl})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go m.Run(ctx)
	stream := snowflake.ID(7)
	var seqs []int64
	for _, text := range []string{"fine", "bad"} {
		r, _ := live.LogRecord{Kind: live.KindComment, StreamID: stream, AcceptedAt: time.Now().UnixNano(),
			Comment: &live.Comment{ID: snowflake.ID(100 + len(seqs)), StreamID: stream, Author: live.Author{ID: 9}, Text: text}}.Record(topics.Comments)
		offs, err := l.AppendTo(ctx, topics.Comments, 0, r)
		if err != nil {
			t.Fatal(err)
		}
		seqs = append(seqs, offs[0])
	}
	deadline := time.Now().Add(10 * time.Second)
	for m.Lag(time.Now()) < 500*time.Millisecond {
		if time.Now().After(deadline) {
			t.Fatalf("lag %s while the classifier is down", m.Lag(time.Now()))
		}
		time.Sleep(20 * time.Millisecond)
	}
	rec.mu.Lock()
	if len(rec.got) != 0 {
		t.Fatalf("retracted while the classifier was down: %v", rec.got)
	}
	rec.mu.Unlock()
	cl.down.Store(false)
	for {
		rec.mu.Lock()
		n := len(rec.got)
		rec.mu.Unlock()
		if n > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the offensive comment was not retracted after the classifier came back")
		}
		time.Sleep(20 * time.Millisecond)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.got) != 1 || rec.got[0].Seq != seqs[1] || rec.got[0].Reason != Reason || rec.got[0].CommentID != 101 {
		t.Fatalf("retractions %+v, want the comment at seq %d", rec.got, seqs[1])
	}
}

// A scored batch holding a comment of a sampled stream is followed, in
// the same append and after its retractions, by a scored mark through
// the batch's last offset (the router then releases what it held for
// them); a batch of streams that are not sampled appends nothing more
// than its retractions.
func TestScoredMarkAfterRetractionsOfSampledStreams(t *testing.T) {
	l, err := memlog.New(memlog.Config{Dir: t.TempDir(), NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	rec := &recorder{Log: l}
	topics := live.TopicsFor("mod.")
	m, err := New(Config{Topics: topics, Logger: slog.New(slog.DiscardHandler)}, Deps{Log: l, Append: rec, Classifier: &flaky{}})
	if err != nil {
		t.Fatal(err)
	}
	m.sampled = map[snowflake.ID]bool{7: true}
	batch := func(stream snowflake.ID, first int64, texts ...string) []item {
		var b []item
		for i, text := range texts {
			b = append(b, item{offset: first + int64(i), lr: live.LogRecord{Kind: live.KindComment, StreamID: stream,
				Comment: &live.Comment{ID: snowflake.ID(100 + first + int64(i)), StreamID: stream, Author: live.Author{ID: 9}, Text: text}}})
		}
		return b
	}
	ctx := context.Background()
	if err := m.score(ctx, 0, batch(8, 0, "fine", "fine")); err != nil {
		t.Fatal(err)
	}
	if len(rec.appends) != 0 {
		t.Fatalf("a clean batch of a stream not sampled appended %d times", len(rec.appends))
	}
	if err := m.score(ctx, 0, batch(7, 3, "fine", "bad", "fine")); err != nil {
		t.Fatal(err)
	}
	if len(rec.appends) != 1 {
		t.Fatalf("%d appends for a sampled stream's batch, want 1", len(rec.appends))
	}
	got := rec.appends[0]
	if len(got) != 2 || got[0].Kind != live.KindRetract || got[0].Retract.Seq != 4 || got[1].Kind != live.KindScored || got[1].Scored.Through != 5 {
		t.Fatalf("appended %+v, want the retraction of seq 4 then a scored mark through 5", got)
	}
}
