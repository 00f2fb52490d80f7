package logbatch_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/concord-chat/concord/runtime/adapters/eventlog"
	"github.com/concord-chat/concord/runtime/domain/live/logbatch"
)

type session struct{ marks []int64 }

func (*session) MemberID() string                  { return "m" }
func (*session) Generation() int64                 { return 1 }
func (*session) Claims() map[string][]int32        { return nil }
func (s *session) Mark(_ string, _ int32, n int64) { s.marks = append(s.marks, n) }
func (*session) Commit(context.Context) error      { return nil }

type claim struct{ ch chan eventlog.Record }

func (claim) Topic() string                     { return "t" }
func (claim) Partition() int32                  { return 3 }
func (claim) InitialOffset() int64              { return 0 }
func (c claim) Records() <-chan eventlog.Record { return c.ch }

// Records already waiting form one batch; an Apply record comes after
// the batch before it is flushed; marks never pass what is not done; a
// failed flush ends the claim without marking its batch.
func TestLoop(t *testing.T) {
	ch := make(chan eventlog.Record, 16)
	for i, v := range []string{"a", "b", "skip", "c", "!x", "d", "e"} {
		ch <- eventlog.Record{Offset: int64(10 + i), Value: []byte(v)}
	}
	close(ch)
	var log []string
	h := logbatch.Handler[string]{
		MaxBatch: 2,
		Sort: func(r eventlog.Record) (logbatch.Step, string) {
			v := string(r.Value)
			switch {
			case v == "skip":
				return logbatch.Skip, ""
			case v[0] == '!':
				return logbatch.Apply, v
			}
			return logbatch.Add, v
		},
		Flush: func(_ context.Context, p int32, b []string) error {
			if p != 3 {
				t.Errorf("partition %d", p)
			}
			log = append(log, "flush "+joined(b))
			return nil
		},
		Apply: func(_ context.Context, _ int32, r eventlog.Record, v string) error {
			log = append(log, "apply "+v)
			return nil
		},
	}
	s := &session{}
	if err := h.ConsumeClaim(context.Background(), s, claim{ch}); err != nil {
		t.Fatal(err)
	}
	want := []string{"flush ab", "flush c", "apply !x", "flush de"}
	if !slices.Equal(log, want) {
		t.Fatalf("calls %q, want %q", log, want)
	}
	if last := s.marks[len(s.marks)-1]; last != 17 {
		t.Fatalf("last mark %d, want 17", last)
	}
	for i := 1; i < len(s.marks); i++ {
		if s.marks[i] < s.marks[i-1] {
			t.Fatalf("marks went back: %v", s.marks)
		}
	}

	// A failing flush: nothing of its batch is marked.
	ch = make(chan eventlog.Record, 4)
	ch <- eventlog.Record{Offset: 0, Value: []byte("a")}
	ch <- eventlog.Record{Offset: 1, Value: []byte("b")}
	close(ch)
	boom := errors.New("boom")
	h.Flush = func(context.Context, int32, []string) error { return boom }
	s = &session{}
	if err := h.ConsumeClaim(context.Background(), s, claim{ch}); !errors.Is(err, boom) {
		t.Fatalf("err %v", err)
	}
	if len(s.marks) != 0 {
		t.Fatalf("marked %v past a failed batch", s.marks)
	}
}

func joined(b []string) string {
	out := ""
	for _, v := range b {
		out += v
	}
	return out
}

// A flush that fails because the generation ended (a rebalance cancels its
// context) ends the claim quietly, its batch unmarked for the partition's
// next owner: an error would stop the consumer, and the process's role.
func TestGenerationEndDuringFlush(t *testing.T) {
	ch := make(chan eventlog.Record, 2)
	ch <- eventlog.Record{Offset: 0, Value: []byte("a")}
	ctx, cancel := context.WithCancel(context.Background())
	h := logbatch.Handler[string]{
		Sort: func(r eventlog.Record) (logbatch.Step, string) { return logbatch.Add, string(r.Value) },
		Flush: func(ctx context.Context, _ int32, _ []string) error {
			cancel() // the rebalance, while the batch is written
			<-ctx.Done()
			return ctx.Err()
		},
	}
	s := &session{}
	if err := h.ConsumeClaim(ctx, s, claim{ch}); err != nil {
		t.Fatalf("generation's end reported as the consumer's failure: %v", err)
	}
	if len(s.marks) != 0 {
		t.Fatalf("marked %v past a batch the generation's end cut short", s.marks)
	}
}
