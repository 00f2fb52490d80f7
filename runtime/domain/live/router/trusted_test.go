package router

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/concord-chat/concord/runtime/adapters/registry"
	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/live"
	"github.com/concord-chat/concord/runtime/domain/live/board"
	"github.com/concord-chat/concord/runtime/domain/live/moderation"
	"github.com/concord-chat/concord/runtime/domain/live/recent"
)

// While the classifier lags, a sampled stream's sample is drawn only from
// trusted authors (moderators past the pinned cap, accounts a month old
// that are not bots and had nothing taken down here); once it catches up,
// everyone competes again.
func TestTrustedOnlyWhileClassifierLags(t *testing.T) {
	s := newSampler()
	now := time.Unix(6_000_000, 0)
	s.tierBatch(now, nil, nil, false) // starts the token clock
	batch := func(at time.Time, trustedOnly bool) map[snowflake.ID]string {
		var evs []live.Event
		var feats []*live.Features
		add := func(author snowflake.ID, f *live.Features) {
			evs = append(evs, live.Event{Kind: live.KindComment, Seq: int64(len(evs)) + at.Unix()*100,
				Comment: &live.Comment{Author: live.Author{ID: author}, Text: "a sensible comment here"}})
			feats = append(feats, f)
		}
		base := snowflake.ID(at.Unix() * 1000)
		for i := range 20 {
			add(base+snowflake.ID(i), &live.Features{AccountAgeS: 3600}) // new accounts
		}
		add(base+100, &live.Features{AccountAgeS: 40 * 86400, Bot: true})
		add(base+101, &live.Features{AccountAgeS: 40 * 86400})
		add(base+102, &live.Features{AccountAgeS: 35 * 86400})
		s.tierBatch(at, evs, feats, trustedOnly)
		out := map[snowflake.ID]string{}
		for _, ev := range evs {
			out[ev.Comment.Author.ID-base] = ev.Tier
		}
		return out
	}
	lagging := batch(now.Add(time.Second), true)
	for a, tier := range lagging {
		if tier == live.TierSample && a < 101 {
			t.Fatalf("author %d (untrusted) sampled while the classifier lags: %v", a, lagging)
		}
	}
	if lagging[101] != live.TierSample || lagging[102] != live.TierSample {
		t.Fatalf("trusted authors not sampled while the classifier lags: %v", lagging)
	}
	caughtUp := batch(now.Add(2*time.Second), false)
	n := 0
	for a, tier := range caughtUp {
		if tier == live.TierSample && a < 100 {
			n++
		}
	}
	if n == 0 {
		t.Fatalf("new accounts never sampled once the classifier caught up: %v", caughtUp)
	}
}

// The router follows the classifier's report on the board: late, or
// silent for 5 s, is lagging; no report at all (no classifier deployed)
// is not.
func TestRouterReadsClassifierLag(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	b := board.New()
	r, err := New(Config{}, Deps{Log: nopConsumer{}, Recent: recent.New(), Relay: &captureRelay{}, Board: b})
	if err != nil {
		t.Fatal(err)
	}
	if r.classifierLags() {
		t.Fatal("lagging with no classifier report")
	}
	put := func(rep moderation.LagReport) {
		v, _ := json.Marshal(rep)
		if err := b.Put(ctx, moderation.LagKey, v, registry.Persistent); err != nil {
			t.Fatal(err)
		}
	}
	put(moderation.LagReport{LagMs: 4000, At: time.Now().UnixMilli()})
	go r.watchClassifier(ctx)
	await := func(want bool) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for r.classifierLags() != want {
			if time.Now().After(deadline) {
				t.Fatalf("classifierLags stays %v", !want)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	await(true)
	put(moderation.LagReport{LagMs: 100, At: time.Now().UnixMilli()})
	await(false)
	put(moderation.LagReport{LagMs: 0, At: time.Now().Add(-10 * time.Second).UnixMilli()})
	await(true)
}
