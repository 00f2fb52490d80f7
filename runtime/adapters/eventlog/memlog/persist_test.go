package memlog_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/concord-chat/concord/runtime/adapters/eventlog"
	"github.com/concord-chat/concord/runtime/adapters/eventlog/memlog"
)

func TestReopenKeepsRecordsAndCommits(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	l, err := memlog.New(memlog.Config{Dir: dir, Partitions: 2})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 10; i++ {
		if err := l.Append(ctx, eventlog.Record{Topic: "t", Key: []byte("k"), Value: []byte(fmt.Sprint(i))}); err != nil {
			t.Fatal(err)
		}
	}
	// Process the first 4 records; the handler fails on the fifth, which
	// ends Consume after committing the marks.
	stop := errors.New("stop")
	err = l.Consume(ctx, "g", []string{"t"}, eventlog.Each(func(_ context.Context, r eventlog.Record) error {
		if r.Offset == 4 {
			return stop
		}
		return nil
	}))
	if !errors.Is(err, stop) {
		t.Fatalf("Consume: %v, want the handler's error", err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}

	l, err = memlog.New(memlog.Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	p := eventlog.PartitionFor([]byte("k"), 2)
	if got := end(t, l, "t"); len(got) != 2 || got[p] != 10 {
		t.Fatalf("after reopen End = %v, want 2 partitions with 10 records in %d", got, p)
	}
	if got := committed(t, l, "g", "t"); got[p] != 4 {
		t.Fatalf("after reopen committed %v, want partition %d at 4", got, p)
	}
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var first int64 = -1
	err = l.Consume(cctx, "g", []string{"t"}, eventlog.Each(func(_ context.Context, r eventlog.Record) error {
		if first < 0 {
			first = r.Offset
		}
		if string(r.Value) != fmt.Sprint(r.Offset) {
			t.Errorf("offset %d holds %q", r.Offset, r.Value)
		}
		if r.Offset == 9 {
			cancel()
		}
		return nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	if first != 4 {
		t.Fatalf("resumed at %d, want 4", first)
	}
}

func TestTornTailIsTruncated(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	l, err := memlog.New(memlog.Config{Dir: dir, Partitions: 1})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		if err := l.Append(ctx, eventlog.Record{Topic: "t", Value: []byte("v")}); err != nil {
			t.Fatal(err)
		}
	}
	l.Close()
	seg := filepath.Join(dir, "topics", "t", "00000.log")
	f, err := os.OpenFile(seg, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	// Half a frame: a crash in the middle of an unacknowledged append.
	f.Write([]byte{0, 0, 0, 50, 1, 2, 3, 4, 5})
	f.Close()

	l, err = memlog.New(memlog.Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if got := end(t, l, "t"); got[0] != 3 {
		t.Fatalf("End = %v after a torn tail, want 3", got)
	}
	if err := l.Append(ctx, eventlog.Record{Topic: "t", Value: []byte("w")}); err != nil {
		t.Fatal(err)
	}
	if got := end(t, l, "t"); got[0] != 4 {
		t.Fatalf("End = %v after appending past a truncated tail, want 4", got)
	}
}

func end(t *testing.T, l *memlog.Log, topic string) []int64 {
	t.Helper()
	e, err := l.End(context.Background(), topic)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func committed(t *testing.T, l *memlog.Log, group, topic string) map[int32]int64 {
	t.Helper()
	c, err := l.Committed(context.Background(), group, topic)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
