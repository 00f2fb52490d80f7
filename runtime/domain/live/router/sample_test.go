package router

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/concord-chat/concord/runtime/adapters/eventlog"
	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/live"
	"github.com/concord-chat/concord/runtime/domain/live/board"
	"github.com/concord-chat/concord/runtime/domain/live/recent"
	"github.com/concord-chat/concord/runtime/domain/live/relay"
	"github.com/prometheus/client_golang/prometheus"
)

// feed counts perSecond comments into s for each second of secs, spread
// evenly, starting at *at (advanced past them), and returns the mode
// after each second (checked at the next second's start).
func feed(s *sampler, at *time.Time, perSecond []int) []bool {
	var modes []bool
	for _, n := range perSecond {
		for i := range n {
			s.countAt(at.Add(time.Duration(i) * time.Second / time.Duration(n)))
		}
		*at = at.Add(time.Second)
		s.tick(*at)
		modes = append(modes, s.sampled)
	}
	return modes
}

func repeat(n, times int) []int {
	out := make([]int, times)
	for i := range out {
		out[i] = n
	}
	return out
}

// Sampled mode on the router's clock: in after 10 s above 50 a second,
// out after 30 s below 30; between the thresholds the mode holds, and a
// second on the wrong side restarts the run (no flapping).
func TestSampledModeHysteresis(t *testing.T) {
	s := newSampler()
	at := time.Unix(1_000_000, 0)
	if m := feed(s, &at, repeat(60, 9)); m[8] {
		t.Fatal("sampled after 9 s above 50/s")
	}
	if m := feed(s, &at, repeat(60, 1)); !m[0] {
		t.Fatal("not sampled after 10 s above 50/s")
	}
	// Between 30 and 50: stays sampled for a minute.
	for i, m := range feed(s, &at, repeat(40, 60)) {
		if !m {
			t.Fatalf("left sampled mode at 40/s after %d s", i+1)
		}
	}
	// 29 s below 30, one second at 35, then 29 s below again: still in.
	modes := feed(s, &at, append(append(repeat(20, 29), 35), repeat(20, 29)...))
	for i, m := range modes {
		if !m {
			t.Fatalf("left sampled mode %d s into an interrupted quiet run", i+1)
		}
	}
	if m := feed(s, &at, repeat(20, 1)); m[0] {
		t.Fatal("still sampled after 30 s below 30/s")
	}
	// Out: 5 s above, one second at 45, 9 s above: stays out.
	for i, m := range feed(s, &at, append(append(repeat(80, 5), 45), repeat(80, 9)...)) {
		if m {
			t.Fatalf("sampled after an interrupted busy run, at second %d", i+1)
		}
	}
	if m := feed(s, &at, repeat(80, 1)); !m[0] {
		t.Fatal("not sampled after 10 s above 50/s")
	}
	// Silence counts as below: a stream that stops leaves within 30 s.
	at = at.Add(45 * time.Second)
	if s.tick(at); s.sampled {
		t.Fatal("still sampled after 45 s of silence")
	}
}

// claimFeed is a partition claim whose records the test sends.
type claimFeed struct{ ch chan eventlog.Record }

func (c claimFeed) Topic() string                   { return "c" }
func (c claimFeed) Partition() int32                { return 0 }
func (c claimFeed) InitialOffset() int64            { return 0 }
func (c claimFeed) Records() <-chan eventlog.Record { return c.ch }
func (claimFeed) MemberID() string                  { return "m" }
func (claimFeed) Generation() int64                 { return 1 }
func (claimFeed) Claims() map[string][]int32        { return nil }
func (claimFeed) Mark(string, int32, int64)         {}
func (claimFeed) Commit(context.Context) error      { return nil }

// captureRelay keeps every published batch.
type captureRelay struct {
	mu      sync.Mutex
	batches []live.Batch
}

func (r *captureRelay) Publish(_ context.Context, _ snowflake.ID, msg []byte) error {
	b, err := live.DecodeBatch(msg)
	if err != nil {
		return err
	}
	r.mu.Lock()
	r.batches = append(r.batches, b)
	r.mu.Unlock()
	return nil
}

// await waits until a batch holding seq was published.
func (r *captureRelay) await(t *testing.T, seq int64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		r.mu.Lock()
		n := len(r.batches)
		var last int64 = -1
		if n > 0 {
			evs := r.batches[n-1].Events
			last = evs[len(evs)-1].Seq
		}
		r.mu.Unlock()
		if last >= seq {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("seq %d not published within 10 s", seq)
		}
		time.Sleep(100 * time.Microsecond) // polling the capture
	}
}

func (r *captureRelay) Subscribe(context.Context, snowflake.ID, func([]byte)) (func(), error) {
	return func() {}, nil
}

// clock is the router's injected clock.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) set(t time.Time) {
	c.mu.Lock()
	c.now = t
	c.mu.Unlock()
}

// A flood of comments on one stream, through the router on an injected
// clock: once sampled, what every viewer is shown (pinned + sample) is
// about 10 a second whatever the posting rate, pinned at most 2 a second,
// no author twice in the sample within a minute, the stream's mode is on
// the board and in the batches, and the recent cache holds no rest-tier
// comment.
func TestSampledStreamShowsAboutTenASecond(t *testing.T) {
	for _, rate := range []int{200, 1000} {
		t.Run(fmt.Sprintf("%d per second", rate), func(t *testing.T) {
			const stream, creator = snowflake.ID(77), snowflake.ID(5)
			clk := &clock{now: time.Unix(2_000_000, 0)}
			rel := &captureRelay{}
			cache := recent.New()
			brd := board.New()
			// Batch windows are real time: a millisecond, and the feed
			// waits for each 100 ms of the clock to be published, so the
			// router batches as it would at this rate in real time.
			r, err := New(Config{Now: clk.Now, BatchWindow: time.Millisecond, Hold: -1}, Deps{Log: nopConsumer{}, Recent: cache, Relay: rel, Board: brd})
			if err != nil {
				t.Fatal(err)
			}
			cf := claimFeed{ch: make(chan eventlog.Record)}
			done := make(chan error, 1)
			go func() { done <- commentsHandler{r}.ConsumeClaim(context.Background(), cf, cf) }()

			const seconds = 30
			start := clk.Now()
			off := int64(0)
			sampledOnBoard := false
			for sec := range seconds {
				for i := range rate {
					at := start.Add(time.Duration(sec)*time.Second + time.Duration(i)*time.Second/time.Duration(rate))
					author := snowflake.ID(1000 + (sec*rate+i)%(rate*20)) // each author every 20 s
					f := &live.Features{AccountAgeS: int64(i%400) * 86400}
					if i%(rate/5) == 0 { // the creator: 5 a second, over the pinned cap
						author, f = creator, &live.Features{Moderator: true, AccountAgeS: 400 * 86400}
					}
					lr := live.LogRecord{Kind: live.KindComment, StreamID: stream, AcceptedAt: at.UnixNano(), Features: f,
						Comment: &live.Comment{ID: snowflake.ID(1_000_000 + off), StreamID: stream, Author: live.Author{ID: author, Username: "u"},
							Text: fmt.Sprintf("comment number %d", off)}}
					rec, err := lr.Record("c")
					if err != nil {
						t.Fatal(err)
					}
					rec.Offset = off
					off++
					clk.set(at)
					cf.ch <- rec
					if (i+1)%(rate/10) == 0 {
						rel.await(t, rec.Offset)
					}
				}
				if sec == 20 {
					_, err := brd.Get(context.Background(), live.SampledKey(stream))
					sampledOnBoard = err == nil
				}
			}
			clk.set(start.Add(seconds * time.Second))
			close(cf.ch)
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			if !sampledOnBoard {
				t.Error("the board had no sampled key 20 s into the flood")
			}

			// Per second of the accept stamps, once sampled (from second 11
			// on: 10 s above the rate, then the switch).
			shown := map[int64]int{}
			pinned := map[int64]int{}
			lastSample := map[snowflake.ID]int64{}
			total := 0
			for _, b := range rel.batches {
				for _, ev := range b.Events {
					total++
					sec := time.Unix(0, ev.AcceptedAt).Sub(start).Milliseconds() / 1000
					if sec >= 11 && (ev.Tier == "" || !b.Sampled) {
						t.Fatalf("second %d: comment %d untiered (batch sampled %v)", sec, ev.Seq, b.Sampled)
					}
					switch ev.Tier {
					case live.TierPinned:
						pinned[sec]++
						shown[sec]++
					case live.TierSample:
						shown[sec]++
						a := ev.Comment.Author.ID
						if prev, ok := lastSample[a]; ok && ev.AcceptedAt-prev < int64(time.Minute) {
							t.Fatalf("author %d sampled twice within a minute", a)
						}
						lastSample[a] = ev.AcceptedAt
					}
				}
			}
			if total != rate*seconds {
				t.Fatalf("published %d comments, want %d", total, rate*seconds)
			}
			for sec := int64(12); sec < seconds; sec++ {
				if pinned[sec] > live.PinnedRate {
					t.Errorf("second %d: %d pinned, cap %d", sec, pinned[sec], live.PinnedRate)
				}
				if n := shown[sec]; n < live.SampleRate-2 || n > live.SampleRate+live.PinnedRate+1 {
					t.Errorf("second %d: %d comments shown to every viewer (%d pinned), want about %d; all seconds: %v", sec, n, pinned[sec], live.SampleRate+live.PinnedRate, shown)
				}
			}
			t.Logf("shown to every viewer per second: %v (pinned %v)", shown, pinned)
			cached, err := cache.Range(context.Background(), stream, -1, 0, live.RecentSize)
			if err != nil {
				t.Fatal(err)
			}
			for _, ev := range cached {
				if ev.Tier == live.TierRest {
					t.Fatalf("recent cache holds rest-tier comment %d", ev.Seq)
				}
			}
			if len(cached) == 0 || cached[len(cached)-1].Tier == "" {
				t.Fatalf("recent cache's newest is not a tiered comment: %d held", len(cached))
			}
		})
	}
}

// nopConsumer stands in for the log: the test drives ConsumeClaim.
type nopConsumer struct{}

func (nopConsumer) Consume(context.Context, string, []string, eventlog.Handler) error { return nil }

// Reactions past the budget: the partial asks for a report probability
// that brings the requests under it, and the next second's batches, sent
// with that p, are scaled by 1/p, so the counts keep their size; a batch
// claiming a lower p than half the one in force is scaled by that half.
func TestReactionReportProbability(t *testing.T) {
	rel := &captureRelay{}
	r, err := New(Config{}, Deps{Log: nopConsumer{}, Recent: recent.New(), Relay: rel})
	if err != nil {
		t.Fatal(err)
	}
	const stream = snowflake.ID(9)
	cf := claimFeed{ch: make(chan eventlog.Record)}
	done := make(chan error, 1)
	go func() { done <- reactionsHandler{r}.ConsumeClaim(context.Background(), cf, cf) }()
	now := time.Now().Unix()
	off := int64(0)
	send := func(sec int64, viewer snowflake.ID, p float64, hearts int64) {
		rec, err := live.ReactionRecord{StreamID: stream, Second: sec, Counts: map[string]int64{"heart": hearts}, P: p}.Record("r", viewer)
		if err != nil {
			t.Fatal(err)
		}
		rec.Offset = off
		off++
		cf.ch <- rec
	}
	// Second 1 (the next second of the wall clock, so the router holds
	// it open until all of it arrived): 4,000 requests over all 16 shards
	// (twice the budget), one heart each, at p = 1.
	for i := range 4000 {
		send(now+1, snowflake.ID(i), 1, 1)
	}
	// Second 1's partial is out (the p is in force) before second 2.
	deadline := time.Now().Add(15 * time.Second)
	for {
		rel.mu.Lock()
		n := len(rel.batches)
		rel.mu.Unlock()
		if n > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("second 1 not published within 15 s")
		}
		time.Sleep(10 * time.Millisecond) // polling the capture: the router publishes on its 250 ms tick
	}
	// Second 2: the clients thin to the p asked for (1/2): 2,000 requests
	// of one heart each, and one client claiming p = 1/1024 for 1 heart.
	for i := range 2000 {
		send(now+2, snowflake.ID(i), 0.5, 1)
	}
	send(now+2, 1, live.MinReportP, 1)
	close(cf.ch)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	got := map[int64]*live.Reactions{}
	for _, b := range rel.batches {
		got[b.Reactions.Second] = b.Reactions
	}
	first, second := got[now+1], got[now+2]
	if first == nil || second == nil {
		t.Fatalf("partials published: %v", got)
	}
	if first.Counts["heart"] != 4000 || first.P != 0.5 {
		t.Fatalf("second 1: %d hearts asking p=%v, want 4000 and 0.5", first.Counts["heart"], first.P)
	}
	// 2,000 × 2, plus the over-claiming batch scaled by 1/(0.5/2) = 4.
	if second.Counts["heart"] != 4004 {
		t.Fatalf("second 2: %d hearts, want 4004", second.Counts["heart"])
	}
}

// A batch's backbone copies are the gateways subscribed to its stream,
// counted from the relay's answer.
func TestRelayCopiesPerBatch(t *testing.T) {
	rel := relay.New()
	for range 2 {
		cancel, err := rel.Subscribe(context.Background(), 77, func([]byte) {})
		if err != nil {
			t.Fatal(err)
		}
		defer cancel()
	}
	reg := prometheus.NewRegistry()
	r, err := New(Config{Registerer: reg}, Deps{Log: nopConsumer{}, Recent: recent.New(), Relay: rel})
	if err != nil {
		t.Fatal(err)
	}
	cf := claimFeed{ch: make(chan eventlog.Record)}
	done := make(chan error, 1)
	go func() { done <- commentsHandler{r}.ConsumeClaim(context.Background(), cf, cf) }()
	lr := live.LogRecord{Kind: live.KindComment, StreamID: 77, Comment: &live.Comment{ID: 1, StreamID: 77, Author: live.Author{ID: 2}, Text: "hi"}}
	rec, err := lr.Record("c")
	if err != nil {
		t.Fatal(err)
	}
	cf.ch <- rec
	close(cf.ch)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "concord_live_router_relay_copies" {
			h := mf.GetMetric()[0].GetHistogram()
			if h.GetSampleCount() != 1 || h.GetSampleSum() != 2 {
				t.Fatalf("copies: %d batches, %v copies; want 1 and 2", h.GetSampleCount(), h.GetSampleSum())
			}
			return
		}
	}
	t.Fatal("no concord_live_router_relay_copies")
}

// A backlog read far behind (accepted an hour before the router reads
// it: a replay, a router catching up) does not count toward the rate, so
// it does not switch the stream to sampled mode however fast it is read.
func TestBacklogDoesNotSample(t *testing.T) {
	clk := &clock{now: time.Unix(4_000_000, 0)}
	rel := &captureRelay{}
	r, err := New(Config{Now: clk.Now}, Deps{Log: nopConsumer{}, Recent: recent.New(), Relay: rel})
	if err != nil {
		t.Fatal(err)
	}
	cf := claimFeed{ch: make(chan eventlog.Record)}
	done := make(chan error, 1)
	go func() { done <- commentsHandler{r}.ConsumeClaim(context.Background(), cf, cf) }()
	start := clk.Now()
	for i := range 1500 { // 100 a second of the clock for 15 s
		at := start.Add(time.Duration(i) * 10 * time.Millisecond)
		lr := live.LogRecord{Kind: live.KindComment, StreamID: 3, AcceptedAt: at.Add(-time.Hour).UnixNano(),
			Comment: &live.Comment{ID: snowflake.ID(10 + i), StreamID: 3, Author: live.Author{ID: snowflake.ID(100 + i)}, Text: "old"}}
		rec, err := lr.Record("c")
		if err != nil {
			t.Fatal(err)
		}
		rec.Offset = int64(i)
		clk.set(at)
		cf.ch <- rec
	}
	close(cf.ch)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	for _, b := range rel.batches {
		if b.Sampled {
			t.Fatal("a backlog switched the stream to sampled mode")
		}
	}
}

// heldStream runs a router with an hour's hold (whatever it publishes
// before the claim closes was not held) on one claim, and floods stream
// 88 until it is sampled.
type heldStream struct {
	t    *testing.T
	clk  *clock
	rel  *captureRelay
	cf   claimFeed
	done chan error
	off  int64
	at   time.Time // the clock after the flood
}

const heldID = snowflake.ID(88)

func startHeld(t *testing.T) *heldStream {
	h := &heldStream{t: t, clk: &clock{now: time.Unix(5_000_000, 0)}, rel: &captureRelay{},
		cf: claimFeed{ch: make(chan eventlog.Record)}, done: make(chan error, 1)}
	r, err := New(Config{Now: h.clk.Now, BatchWindow: time.Millisecond, Hold: time.Hour}, Deps{Log: nopConsumer{}, Recent: recent.New(), Relay: h.rel})
	if err != nil {
		t.Fatal(err)
	}
	go func() { h.done <- commentsHandler{r}.ConsumeClaim(context.Background(), h.cf, h.cf) }()
	start := h.clk.Now()
	// 11 s at 60 a second from new accounts: sampled from the 11th on.
	for i := range 660 {
		h.comment(snowflake.ID(1000+i), snowflake.ID(5000+i), "x", nil, start.Add(time.Duration(i)*time.Second/60))
	}
	h.at = start.Add(11 * time.Second)
	return h
}

func (h *heldStream) send(lr live.LogRecord, at time.Time) int64 {
	rec, err := lr.Record("c")
	if err != nil {
		h.t.Fatal(err)
	}
	rec.Offset = h.off
	h.off++
	h.clk.set(at)
	h.cf.ch <- rec
	return rec.Offset
}

func (h *heldStream) comment(id, author snowflake.ID, text string, f *live.Features, at time.Time) int64 {
	return h.send(live.LogRecord{Kind: live.KindComment, StreamID: heldID, AcceptedAt: at.UnixNano(), Features: f,
		Comment: &live.Comment{ID: id, StreamID: heldID, Author: live.Author{ID: author}, Text: text}}, at)
}

func (h *heldStream) retract(id, author snowflake.ID, seq int64, at time.Time) {
	h.send(live.LogRecord{Kind: live.KindRetract, StreamID: heldID, AcceptedAt: at.UnixNano(),
		Retract: &live.Retraction{CommentID: id, Seq: seq, Reason: "ml", AuthorID: author}}, at)
}

// published returns the tier seq was published with ("" and false: not
// published).
func (h *heldStream) published(seq int64) (string, bool) {
	h.rel.mu.Lock()
	defer h.rel.mu.Unlock()
	for _, b := range h.rel.batches {
		for _, ev := range b.Events {
			if ev.Seq == seq {
				return ev.Tier, true
			}
		}
	}
	return "", false
}

// close ends the claim, which publishes everything still held.
func (h *heldStream) close() {
	close(h.cf.ch)
	if err := <-h.done; err != nil {
		h.t.Fatal(err)
	}
}

// On a sampled stream the router holds events before tiering them: a
// comment is not published while held, and one taken down within the
// hold never enters the sample, however well it scores.
func TestHeldCommentTakenDownNeverSampled(t *testing.T) {
	h := startHeld(t)
	// The best candidate there could be: a year-old account, a sensible
	// text; then a comment after it, which the router takes only once it
	// handled the first.
	star := h.comment(9, 9, "a very reasonable comment", &live.Features{AccountAgeS: 400 * 86400}, h.at)
	h.comment(10, 10, "y", nil, h.at.Add(time.Millisecond))
	if _, ok := h.published(star); ok {
		t.Fatal("the comment was published while it should be held")
	}
	h.retract(9, 9, star, h.at.Add(500*time.Millisecond))
	h.close()
	tier, ok := h.published(star)
	if !ok {
		t.Fatal("the held comment was never published")
	}
	if tier != live.TierRest {
		t.Fatalf("a comment taken down in the hold was tiered %q", tier)
	}
}

// The moderation consumer's scored mark ends the hold of what it covers:
// those events go out at once (an hour's hold notwithstanding), a
// comment it took down before the mark still never enters the sample,
// and what came after the mark stays held. Before, every event of a
// sampled stream waited the whole hold, pinned comments too, and the
// pinned and sample tiers could not reach viewers within a second.
func TestScoredMarkEndsTheHold(t *testing.T) {
	h := startHeld(t)
	star := h.comment(9, 9, "a very reasonable comment", &live.Features{AccountAgeS: 400 * 86400}, h.at)
	good := h.comment(10, 11, "another reasonable comment", &live.Features{AccountAgeS: 400 * 86400}, h.at.Add(time.Millisecond))
	h.retract(9, 9, star, h.at.Add(20*time.Millisecond))
	h.send(live.LogRecord{Kind: live.KindScored, Scored: &live.ScoredMark{Through: good}}, h.at.Add(20*time.Millisecond))
	h.rel.await(t, good)
	if tier, _ := h.published(star); tier != live.TierRest {
		t.Fatalf("a comment the classifier took down before its mark was tiered %q", tier)
	}
	after := h.comment(12, 12, "after the mark", nil, h.at.Add(30*time.Millisecond))
	h.comment(13, 13, "and one more", nil, h.at.Add(31*time.Millisecond))
	if _, ok := h.published(after); ok {
		t.Fatal("a comment after the scored mark was published before its hold or a mark covering it")
	}
	h.close()
	if _, ok := h.published(after); !ok {
		t.Fatal("the comment after the mark was never published")
	}
}
