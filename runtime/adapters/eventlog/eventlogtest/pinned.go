package eventlogtest

import (
	"context"
	"fmt"
	"testing"

	"github.com/concord-chat/concord/runtime/adapters/eventlog"
)

// RunPinned checks an adapter's eventlog.Pinned: records appended to a
// chosen partition land there, in order, at the offsets AppendTo reports,
// and a consumer group reads them back at those offsets.
func RunPinned(t *testing.T, newLog NewFunc) {
	ctx := ctxFor(t)
	l := newLog(t)
	p, ok := l.(eventlog.Pinned)
	if !ok {
		t.Fatalf("%T does not implement eventlog.Pinned", l)
	}
	topic := Name(t, "topic")
	if err := l.EnsureTopic(ctx, topic, 4); err != nil {
		t.Fatalf("EnsureTopic: %v", err)
	}
	n, err := p.Partitions(ctx, topic)
	if err != nil || n != 4 {
		t.Fatalf("Partitions = %d, %v; want 4", n, err)
	}
	// Keys that hash elsewhere must not move a pinned record.
	want := map[int64]string{}
	var last int64 = -1
	for i := range 3 {
		recs := []eventlog.Record{
			{Key: []byte(fmt.Sprintf("k%d", i)), Value: []byte(fmt.Sprintf("a%d", i))},
			{Key: []byte(fmt.Sprintf("j%d", i)), Value: []byte(fmt.Sprintf("b%d", i))},
		}
		offs, err := p.AppendTo(ctx, topic, 2, recs...)
		if err != nil {
			t.Fatalf("AppendTo: %v", err)
		}
		if len(offs) != 2 {
			t.Fatalf("AppendTo returned %d offsets, want 2", len(offs))
		}
		for j, o := range offs {
			if o <= last {
				t.Fatalf("offset %d after %d: not increasing", o, last)
			}
			last = o
			want[o] = string(recs[j].Value)
		}
	}
	if _, err := p.AppendTo(ctx, topic, 9, eventlog.Record{Value: []byte("x")}); err == nil {
		t.Fatal("AppendTo partition 9 of 4 succeeded")
	}
	got := map[int64]string{}
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	err = l.Consume(cctx, Name(t, "group"), []string{topic}, eventlog.Each(func(_ context.Context, r eventlog.Record) error {
		if r.Partition != 2 {
			return fmt.Errorf("record %q on partition %d, want 2", r.Value, r.Partition)
		}
		got[r.Offset] = string(r.Value)
		if len(got) == len(want) {
			cancel()
		}
		return nil
	}))
	if err != nil {
		t.Fatalf("Consume: %v", err)
	}
	for o, v := range want {
		if got[o] != v {
			t.Fatalf("offset %d holds %q, want %q", o, got[o], v)
		}
	}
}
