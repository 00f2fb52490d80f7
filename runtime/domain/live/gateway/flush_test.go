package gateway

import (
	"bytes"
	"sync"
	"testing"
	"time"

	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/live"
	"github.com/concord-chat/concord/runtime/domain/live/sse"
)

// testHub is a loaded hub of a gateway with cfg and one queued viewer
// (no connection: its frames collect in its buffer and it is woken).
func testHub(t *testing.T, cfg Config) (*hub, *viewer) {
	t.Helper()
	cfg.MaxPending, cfg.WriteTimeout = 256<<10, 10*time.Second
	if cfg.QuietGap == 0 {
		// The rule before QuietGap: every event flush FlushInterval apart.
		cfg.QuietGap = cfg.FlushInterval
	}
	g := &Gateway{cfg: cfg, m: newMetrics(nil)}
	h := newHub(g, 42)
	h.loading = false
	v := newViewer(0)
	h.viewers[v] = struct{}{}
	t.Cleanup(func() {
		h.mu.Lock()
		if h.flushTimer != nil {
			h.flushTimer.Stop()
		}
		h.mu.Unlock()
	})
	return h, v
}

// written waits for the viewer's next flush and returns what it holds.
func written(t *testing.T, v *viewer, what string) []byte {
	t.Helper()
	select {
	case <-v.wake:
	case <-time.After(30 * time.Second):
		t.Fatalf("%s: not flushed within 30 s", what)
	}
	b, _, _, _ := v.take(nil)
	return b
}

func comment(seq int64, text string) live.Event {
	return live.Event{Kind: live.KindComment, Seq: seq, Comment: &live.Comment{ID: snowflake.ID(1000 + seq), StreamID: 42,
		Author: live.Author{ID: 7, Username: "a"}, Text: text, Seq: seq}}
}

// The flush rule: a stream's events reach a viewer at most once per
// FlushInterval, but a lone comment after a quiet period goes at once,
// even when viewer counts, pings or reactions were just written (they are
// bookkeeping, and wait for an event's flush to ride on instead). With an
// hour's FlushInterval any wait the rule imposed would outlast the test.
func TestLoneCommentAfterBookkeepingGoesAtOnce(t *testing.T) {
	h, v := testHub(t, Config{FlushInterval: time.Hour, ReportInterval: 5 * time.Second, PingInterval: 15 * time.Second})
	viewers := sse.AppendEvent(nil, "viewers", "", []byte(`{"count":1}`))

	// Bookkeeping alone is written after lazyHold.
	h.mu.Lock()
	h.addPendingLocked(outFrame{frame: viewers, seq: -1, lazy: true})
	h.mu.Unlock()
	if b := written(t, v, "viewers event"); !bytes.Equal(b, viewers) {
		t.Fatalf("first flush = %q", b)
	}

	// A comment right after it: at once, not an hour later.
	h.mu.Lock()
	h.applyLocked([]live.Event{comment(1, "first")})
	h.mu.Unlock()
	if b := written(t, v, "lone comment after a viewers event"); !bytes.Contains(b, []byte(`"text":"first"`)) {
		t.Fatalf("comment flush = %q", b)
	}

	// The next comment waits FlushInterval after the last event flush,
	// and bookkeeping queued meanwhile rides on that same flush.
	h.mu.Lock()
	h.applyLocked([]live.Event{comment(2, "second")})
	h.addPendingLocked(outFrame{frame: viewers, seq: -1, lazy: true})
	armedIn, n := time.Until(h.armedFor), len(h.pending)
	h.mu.Unlock()
	if armedIn < 30*time.Minute || n != 2 {
		t.Fatalf("second comment: flush armed in %v with %d frames pending, want about an hour and 2", armedIn, n)
	}
	select {
	case <-v.wake:
		b, _, _, _ := v.take(nil)
		t.Fatalf("written within FlushInterval of the last event flush: %q", b)
	default:
	}
}

// Bookkeeping queued with an event goes in the event's flush: one write.
func TestBookkeepingRidesOnEventFlush(t *testing.T) {
	h, v := testHub(t, Config{FlushInterval: time.Hour, ReportInterval: 5 * time.Second, PingInterval: 15 * time.Second})
	h.mu.Lock()
	h.addPendingLocked(outFrame{frame: pingFrame, seq: -1, lazy: true})
	h.applyLocked([]live.Event{comment(1, "hello")})
	h.mu.Unlock()
	b := written(t, v, "comment with a pending ping")
	if !bytes.HasPrefix(b, pingFrame) || !bytes.Contains(b, []byte(`"text":"hello"`)) {
		t.Fatalf("flush = %q, want the ping and the comment together", b)
	}
	h.mu.Lock()
	pending := len(h.pending)
	h.mu.Unlock()
	if pending != 0 {
		t.Fatalf("%d frames left pending", pending)
	}
}

// A bookkeeping-only flush keeps FlushInterval from the flush before it.
func TestBookkeepingKeepsFlushInterval(t *testing.T) {
	h, v := testHub(t, Config{FlushInterval: time.Hour, ReportInterval: 5 * time.Second, PingInterval: 15 * time.Second})
	h.mu.Lock()
	h.applyLocked([]live.Event{comment(1, "hello")})
	h.mu.Unlock()
	written(t, v, "lone comment")
	h.mu.Lock()
	h.addPendingLocked(outFrame{frame: pingFrame, seq: -1, lazy: true})
	armedIn := time.Until(h.armedFor)
	h.mu.Unlock()
	if armedIn < 30*time.Minute {
		t.Fatalf("ping after a comment armed in %v, want about FlushInterval (an hour)", armedIn)
	}
}

// fakeClock is a settable clock for the flush rule.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// The pace of a stream's events decides whether batching them pays: an
// event arriving at least QuietGap after the stream's last event flush is
// written at once; one arriving sooner waits until FlushInterval after
// that flush, and what arrives meanwhile rides on the same write. On an
// injected clock (QuietGap a minute, FlushInterval an hour), so no real
// wait the rule imposed could pass during the test.
func TestFlushAtOnceOnlyWhileEventsComeSlowerThanQuietGap(t *testing.T) {
	h, v := testHub(t, Config{FlushInterval: time.Hour, QuietGap: time.Minute, ReportInterval: 5 * time.Second, PingInterval: 15 * time.Second})
	clock := &fakeClock{now: time.Unix(1_000_000, 0)}
	h.g.now = clock.Now
	post := func(seq int64, text string) {
		h.mu.Lock()
		h.applyLocked([]live.Event{comment(seq, text)})
		h.mu.Unlock()
	}

	// A quiet stream: each event a little more than QuietGap after the
	// last flush goes at once, several within one FlushInterval.
	for i, text := range []string{"one", "two", "three"} {
		post(int64(i+1), text)
		if b := written(t, v, text); !bytes.Contains(b, []byte(`"text":"`+text+`"`)) {
			t.Fatalf("flush %d = %q", i, b)
		}
		clock.advance(time.Minute + time.Second)
	}

	// Faster than QuietGap: the event waits for FlushInterval after the
	// last event flush (written at the clock's start + 2 × 61 s), and the
	// next ones ride along.
	lastFlush := time.Unix(1_000_000, 0).Add(2 * (time.Minute + time.Second))
	clock.now = lastFlush.Add(30 * time.Second)
	post(4, "four")
	clock.advance(10 * time.Second)
	post(5, "five")
	h.mu.Lock()
	armedFor, n := h.armedFor, len(h.pending)
	h.mu.Unlock()
	if want := lastFlush.Add(time.Hour); !armedFor.Equal(want) || n != 2 {
		t.Fatalf("busy: flush armed for %v with %d pending, want %v and 2", armedFor, n, want)
	}
	select {
	case <-v.wake:
		b, _, _, _ := v.take(nil)
		t.Fatalf("written within QuietGap of the last event flush: %q", b)
	default:
	}

	// When that slot comes, both go in one write.
	clock.now = lastFlush.Add(time.Hour)
	h.flush()
	if b := written(t, v, "batched"); !bytes.Contains(b, []byte(`"text":"four"`)) || !bytes.Contains(b, []byte(`"text":"five"`)) {
		t.Fatalf("batched flush = %q", b)
	}
}

// A sampled stream's batch: every viewer is told the mode first, then
// shown the pinned and sample tiers; a rest-tier comment goes to its
// author only, a retraction of one likewise; the ring (joins, resumes)
// keeps no rest-tier comment.
func TestSampledBatchPerViewerFrames(t *testing.T) {
	h, anon := testHub(t, Config{FlushInterval: time.Hour, ReportInterval: 5 * time.Second, PingInterval: 15 * time.Second})
	h.state = live.StateChange{State: live.StateLive}
	const a, b = snowflake.ID(7), snowflake.ID(8)
	va, vb := newViewer(a), newViewer(b)
	h.viewers[va], h.viewers[vb] = struct{}{}, struct{}{}
	by := func(seq int64, author snowflake.ID, tier, text string) live.Event {
		ev := comment(seq, text)
		ev.Comment.Author.ID = author
		ev.Tier = tier
		return ev
	}
	msg, err := live.EncodeBatch(live.Batch{StreamID: 42, Prev: -1, Sampled: true, Events: []live.Event{
		by(1, 99, live.TierPinned, "pinned"), by(2, a, live.TierRest, "rest by a"), by(3, 55, live.TierSample, "sampled"),
		by(4, 56, live.TierRest, "rest by someone else")}})
	if err != nil {
		t.Fatal(err)
	}
	h.process(msg)
	state := stateFrame(live.StateChange{State: live.StateLive, Sampled: true})
	for _, c := range []struct {
		name string
		v    *viewer
		want []string
	}{{"anonymous", anon, []string{"pinned", "sampled"}}, {"author", va, []string{"pinned", "rest by a", "sampled"}}, {"other", vb, []string{"pinned", "sampled"}}} {
		got := written(t, c.v, c.name)
		if !bytes.HasPrefix(got, state) {
			t.Fatalf("%s: flush does not start with the sampled state: %q", c.name, got)
		}
		n := 0
		for _, text := range []string{"pinned", "rest by a", "sampled", "rest by someone else"} {
			if bytes.Contains(got, []byte(`"text":"`+text+`"`)) {
				if n >= len(c.want) || c.want[n] != text {
					t.Fatalf("%s was shown %q (in %q), want %q in order", c.name, text, got, c.want)
				}
				n++
			}
		}
		if n != len(c.want) {
			t.Fatalf("%s: shown %d of %q: %q", c.name, n, c.want, got)
		}
	}
	h.mu.Lock()
	var ring []int64
	for _, e := range h.ring {
		ring = append(ring, e.seq)
	}
	h.mu.Unlock()
	if len(ring) != 2 || ring[0] != 1 || ring[1] != 3 {
		t.Fatalf("ring holds seqs %v, want the pinned and sample comments 1 and 3", ring)
	}

	// The author's rest comment is taken down: only the author is told.
	rt := live.Event{Kind: live.KindRetract, Seq: 5, Tier: live.TierRest, Retract: &live.Retraction{CommentID: 1002, Seq: 2, Reason: "x", AuthorID: a}}
	h.mu.Lock()
	h.lastUrgent = time.Time{} // not this test's rule: flush at once
	h.applyLocked([]live.Event{rt})
	h.mu.Unlock()
	if got := written(t, va, "author's retraction"); !bytes.Contains(got, []byte("event: retract")) {
		t.Fatalf("author got %q", got)
	}
	for _, v := range []*viewer{anon, vb} {
		select {
		case <-v.wake:
			got, _, _, _ := v.take(nil)
			t.Fatalf("a viewer not shown the rest comment got %q", got)
		default:
		}
	}
}

// A second whose partials ask for a report probability below 1 tells the
// viewers with a state event before its reactions event; back at 1 they
// are told again.
func TestReportProbabilityInStateEvent(t *testing.T) {
	h, v := testHub(t, Config{FlushInterval: time.Hour, ReportInterval: 5 * time.Second, PingInterval: 15 * time.Second})
	h.state = live.StateChange{State: live.StateLive}
	now := time.Now()
	sec := now.Unix() - 5
	h.mu.Lock()
	h.addReactionsLocked(&live.Reactions{Second: sec, Counts: map[string]int64{"heart": 10}, P: 0.25})
	h.addReactionsLocked(&live.Reactions{Second: sec, Counts: map[string]int64{"heart": 12}, P: 0.5})
	h.mu.Unlock()
	h.emitReactions(now)
	got := written(t, v, "thinned second")
	want := stateFrame(live.StateChange{State: live.StateLive, ReportP: 0.25})
	if !bytes.HasPrefix(got, want) || !bytes.Contains(got, []byte(`"heart":22`)) || !bytes.Contains(got, []byte(`"report_p":0.25`)) {
		t.Fatalf("flush = %q, want %q then the reactions", got, want)
	}
	h.mu.Lock()
	h.lastUrgent = time.Time{}
	h.addReactionsLocked(&live.Reactions{Second: sec + 1, Counts: map[string]int64{"heart": 3}})
	h.mu.Unlock()
	h.emitReactions(now)
	if got := written(t, v, "second back at p=1"); !bytes.Contains(got, []byte(`"report_p":1`)) {
		t.Fatalf("flush = %q, want report_p 1", got)
	}
}

// A sampled stream's rest tier between two flushes may be far more than
// MaxPending (a 5,000 comments/s flood's), but each frame of it is for
// its author and the author's friends: it cuts no viewer. The tiers
// every viewer is sent still count, and past MaxPending they cut.
func TestRestTierDoesNotCutViewers(t *testing.T) {
	h, anon := testHub(t, Config{FlushInterval: time.Hour, ReportInterval: 5 * time.Second, PingInterval: 15 * time.Second})
	h.state = live.StateChange{State: live.StateLive, Sampled: true}
	text := string(bytes.Repeat([]byte("x"), 180))
	var evs []live.Event
	for seq := int64(1); seq <= 3000; seq++ { // ~0.8 MB of rest tier, three times MaxPending
		ev := comment(seq, text)
		ev.Comment.Author.ID = snowflake.ID(10_000 + seq)
		ev.Tier = live.TierRest
		evs = append(evs, ev)
	}
	h.mu.Lock()
	h.applyLocked(evs)
	h.mu.Unlock()
	select {
	case <-anon.cut:
		t.Fatal("a viewer shown none of the rest tier was cut for its bytes")
	default:
	}
	var shared []live.Event
	for seq := int64(3001); seq <= 6000; seq++ {
		ev := comment(seq, text)
		ev.Tier = live.TierSample
		shared = append(shared, ev)
	}
	h.mu.Lock()
	h.applyLocked(shared)
	h.mu.Unlock()
	select {
	case <-anon.cut:
	default:
		t.Fatal("a viewer sent more than MaxPending of sample tier between two flushes was not cut")
	}
}
