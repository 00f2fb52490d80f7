package live_test

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/concord-chat/concord/runtime/domain/live"
)

func TestLogRecordRoundTrip(t *testing.T) {
	c := &live.Comment{ID: 9, StreamID: 5, Author: live.Author{ID: 3, Username: "u"}, Text: "hi", VideoTSMs: 12, CreatedAt: time.UnixMilli(1e12).UTC(), Shadow: true}
	rec, err := live.LogRecord{Kind: live.KindComment, StreamID: 5, Comment: c, AcceptedAt: 77}.Record("t")
	if err != nil {
		t.Fatal(err)
	}
	got, err := live.DecodeLogRecord(rec.Value)
	if err != nil {
		t.Fatal(err)
	}
	ev := got.Event(41)
	if ev.Seq != 41 || ev.Comment.Seq != 41 || !ev.Comment.Shadow || ev.Comment.Text != "hi" || ev.AcceptedAt != 77 {
		t.Fatalf("event = %+v %+v", ev, ev.Comment)
	}
	b, _ := live.EncodeBatch(live.Batch{StreamID: 5, Prev: 40, Events: []live.Event{ev}})
	batch, err := live.DecodeBatch(b)
	if err != nil || len(batch.Events) != 1 || batch.Events[0].Comment.ID != 9 {
		t.Fatalf("batch = %+v, %v", batch, err)
	}
	// Views never carry the internal fields.
	v, _ := json.Marshal(ev.Comment.View())
	var m map[string]any
	json.Unmarshal(v, &m)
	if _, ok := m["shadow"]; ok || len(m) != 7 {
		t.Fatalf("view = %s", v)
	}
}

func TestDecodersReject(t *testing.T) {
	for _, b := range []string{
		`{}`, `{"k":"comment","s":5}`, `{"k":"comment","s":5,"c":{"id":1,"stream_id":6,"author":{"id":1}}}`,
		`{"k":"retract","s":5,"r":{"comment_id":0}}`, `{"k":"state","s":5,"st":{"state":"paused"}}`, `{"k":"x","s":5}`, `[`,
	} {
		if _, err := live.DecodeLogRecord([]byte(b)); err == nil {
			t.Errorf("DecodeLogRecord(%s) accepted", b)
		}
	}
	for _, b := range []string{
		`{"s":5,"p":-1}`,
		`{"s":5,"p":10,"e":[{"k":"state","q":9,"st":{"state":"live"}}]}`,
		`{"s":5,"p":1,"e":[{"k":"state","q":3,"st":{"state":"live"}},{"k":"state","q":3,"st":{"state":"live"}}]}`,
		`{"s":5,"p":-1,"rx":{"second":1,"counts":{"poop":1}}}`,
	} {
		if _, err := live.DecodeBatch([]byte(b)); err == nil {
			t.Errorf("DecodeBatch(%s) accepted", b)
		}
	}
	if _, err := live.DecodeReactionRecord([]byte(`{"s":5,"sec":1,"counts":{"heart":-1}}`)); err == nil {
		t.Error("negative reaction accepted")
	}
}

func TestSumViewers(t *testing.T) {
	now := time.Now()
	fresh, _ := json.Marshal(live.ViewerReport{Count: 3, At: now.Add(-time.Second).UnixMilli()})
	stale, _ := json.Marshal(live.ViewerReport{Count: 100, At: now.Add(-20 * time.Second).UnixMilli()})
	if n := live.SumViewers(map[string][]byte{"a": fresh, "b": fresh, "c": stale, "d": []byte("x")}, now); n != 6 {
		t.Fatalf("sum = %d", n)
	}
}

func FuzzDecodeLogRecord(f *testing.F) {
	f.Add([]byte(`{"k":"comment","s":5,"c":{"id":1,"stream_id":5,"author":{"id":1},"text":"x"}}`))
	f.Add([]byte(`{"k":"scored","s":0,"sc":{"through":41}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := live.DecodeLogRecord(b)
		if err != nil {
			return
		}
		if r.Kind == live.KindScored {
			if r.Scored == nil || r.Scored.Through < 0 || r.StreamID != 0 {
				t.Fatalf("accepted a scored mark of shape %+v", r)
			}
			return
		}
		if r.StreamID == 0 || r.Scored != nil {
			t.Fatal("accepted a stream record without stream, or with a scored mark")
		}
		_ = r.Event(1)
	})
}

func FuzzDecodeBatch(f *testing.F) {
	f.Add([]byte(`{"s":5,"p":-1,"e":[{"k":"retract","q":3,"r":{"comment_id":2,"seq":1}}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		batch, err := live.DecodeBatch(b)
		if err != nil {
			return
		}
		last := batch.Prev
		for _, ev := range batch.Events {
			if ev.Seq <= last {
				t.Fatalf("accepted out-of-order seq %d after %d", ev.Seq, last)
			}
			last = ev.Seq
		}
	})
}

func FuzzDecodeEvent(f *testing.F) {
	f.Add([]byte(`{"k":"state","q":3,"st":{"state":"ended"}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		if ev, err := live.DecodeEvent(5, b); err == nil && ev.Seq < 0 {
			t.Fatal("negative seq accepted")
		}
	})
}

func FuzzDecodeReactionRecord(f *testing.F) {
	f.Add([]byte(`{"s":5,"sec":100,"counts":{"heart":2}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := live.DecodeReactionRecord(b)
		if err != nil {
			return
		}
		for k, n := range r.Counts {
			if !live.ReactionKinds[k] || n < 0 {
				t.Fatalf("accepted %s=%d", k, n)
			}
		}
	})
}

// A scored mark has no stream and nothing but its mark; a stream record
// never carries one.
func TestScoredMarkShape(t *testing.T) {
	rec, err := live.LogRecord{Kind: live.KindScored, Scored: &live.ScoredMark{Through: 41}}.Record("t")
	if err != nil {
		t.Fatal(err)
	}
	r, err := live.DecodeLogRecord(rec.Value)
	if err != nil || r.Scored == nil || r.Scored.Through != 41 {
		t.Fatalf("round trip: %+v, %v", r, err)
	}
	for _, bad := range []string{
		`{"k":"scored","s":5,"sc":{"through":1}}`,
		`{"k":"scored","s":0}`,
		`{"k":"scored","s":0,"sc":{"through":-1}}`,
		`{"k":"scored","s":0,"sc":{"through":1},"c":{"id":1,"stream_id":5,"author":{"id":1},"text":"x"}}`,
		`{"k":"comment","s":5,"c":{"id":1,"stream_id":5,"author":{"id":1},"text":"x"},"sc":{"through":1}}`,
	} {
		if _, err := live.DecodeLogRecord([]byte(bad)); !errors.Is(err, live.ErrInvalid) {
			t.Errorf("%s: err %v, want ErrInvalid", bad, err)
		}
	}
}
