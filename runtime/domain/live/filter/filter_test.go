package filter_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/concord-chat/concord/runtime/adapters/counters/mem"
	"github.com/concord-chat/concord/runtime/adapters/registry"
	"github.com/concord-chat/concord/runtime/adapters/store"
	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/live"
	"github.com/concord-chat/concord/runtime/domain/live/board"
	"github.com/concord-chat/concord/runtime/domain/live/filter"
)

func TestNormalize(t *testing.T) {
	for in, want := range map[string]string{
		"Hello, World!":  " hello world ",
		"ＢＡＤ":            " bad ",
		"b\u200bad":      " bad ",
		"bádword":        " badword ",
		"ﬁne":            " fine ",
		"STRASSE straße": " strasse strasse ",
	} {
		if got := filter.Normalize(in); got != want {
			t.Errorf("Normalize(%q) = %q, want %q", in, got, want)
		}
	}
}

func setup(t *testing.T) (*filter.Filter, *board.Board, context.Context) {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	b := board.New()
	dir := filter.NewDirectory(nil)
	go dir.Run(ctx, b)
	<-dir.Synced()
	c, err := mem.New(mem.Config{})
	if err != nil {
		t.Fatal(err)
	}
	return filter.New(dir, c), b, ctx
}

// await polls the filter until cond holds for the check of text: the
// board pushes asynchronously.
func await(t *testing.T, f *filter.Filter, s *live.Stream, u store.User, text, want string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		d, err := f.Check(context.Background(), s, u, text)
		if err != nil {
			t.Fatal(err)
		}
		if d.Reject == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("Check(%q) = %+v, want reject %q", text, d, want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestRules(t *testing.T) {
	f, b, ctx := setup(t)
	s := &live.Stream{ID: 100, CreatorID: 1, BlockedTerms: []string{"Spoiler"}, Moderators: []snowflake.ID{2}}
	ann := store.User{ID: 10, Username: "ann", CreatedAt: time.Now().Add(-time.Hour)}

	// Stream terms match whole words whatever the case and Unicode form.
	for i, text := range []string{"no SPOILERS please", "hello"} {
		d, _ := f.Check(ctx, s, store.User{ID: snowflake.ID(40 + i)}, text)
		if d.Reject != "" {
			t.Fatalf("%q rejected: %+v", text, d)
		}
	}
	await(t, f, s, store.User{ID: 51}, "big ＳＰＯＩＬＥＲ here", filter.ReasonBlockedTerm)
	await(t, f, s, store.User{ID: 52}, "s\u200bpoiler", filter.ReasonBlockedTerm)

	// Links are blocked for viewers, allowed for the creator and moderators.
	await(t, f, s, store.User{ID: 53}, "see example.com now", filter.ReasonLink)
	await(t, f, s, store.User{ID: 53}, "https://x.y/z", filter.ReasonLink)
	await(t, f, s, store.User{ID: 2}, "mod link example.com", "")

	// Global and creator rules and bans arrive through the board.
	g, _ := json.Marshal(filter.Rules{BlockedTerms: []string{"globalbad"}, MinAccountAgeSeconds: 3600 * 24})
	b.Put(ctx, filter.KeyGlobal, g, registry.Persistent)
	await(t, f, s, store.User{ID: 54, CreatedAt: time.Now().Add(-48 * time.Hour)}, "GlobalBad!", filter.ReasonBlockedTerm)
	await(t, f, s, ann, "young account", filter.ReasonAccountAge)
	b.Put(ctx, filter.KeyGlobal, []byte(`{}`), registry.Persistent)
	cr, _ := json.Marshal(filter.CreatorRules{BlockedTerms: []string{"creatorbad"}})
	b.Put(ctx, filter.CreatorRulesKey(1), cr, registry.Persistent)
	await(t, f, s, store.User{ID: 55}, "so creatorbad", filter.ReasonBlockedTerm)

	b.Put(ctx, filter.StreamBanKey(100, 60), []byte("{}"), registry.Persistent)
	await(t, f, s, store.User{ID: 60}, "hi", filter.ReasonBanned)
	b.Put(ctx, filter.CreatorBanKey(1, 61), []byte("{}"), registry.Persistent)
	await(t, f, s, store.User{ID: 61}, "hi", filter.ReasonBanned)
	b.Put(ctx, filter.UserBanKey(62), []byte("{}"), registry.Persistent)
	await(t, f, s, store.User{ID: 62}, "hi", filter.ReasonBanned)
	b.Delete(ctx, filter.StreamBanKey(100, 60))
	await(t, f, s, store.User{ID: 60}, "back", "")
}

func TestRateLimitAndDuplicates(t *testing.T) {
	f, _, ctx := setup(t)
	s := &live.Stream{ID: 200, CreatorID: 1}
	u := store.User{ID: 10}
	d, _ := f.Check(ctx, s, u, "first")
	if d.Reject != "" || d.Shadow {
		t.Fatalf("first = %+v", d)
	}
	d, _ = f.Check(ctx, s, u, "second")
	if d.Reject != filter.ReasonRateLimited || d.RetryAfter <= 0 || d.RetryAfter > 2*time.Second {
		t.Fatalf("second = %+v", d)
	}
	// The creator is exempt and may repeat itself.
	for range 3 {
		if d, _ := f.Check(ctx, s, store.User{ID: 1}, "same"); d.Reject != "" || d.Shadow {
			t.Fatalf("creator = %+v", d)
		}
	}
	// Slow mode widens the interval.
	slow := &live.Stream{ID: 201, CreatorID: 1, SlowModeSeconds: 30}
	f.Check(ctx, slow, u, "a")
	d, _ = f.Check(ctx, slow, u, "b")
	if d.Reject != filter.ReasonRateLimited || d.RetryAfter < 25*time.Second {
		t.Fatalf("slow mode = %+v", d)
	}
	// The same text again (after the interval) is shadow-accepted.
	other := &live.Stream{ID: 202, CreatorID: 1, SlowModeSeconds: 0}
	f.Check(ctx, other, store.User{ID: 11}, "Buy now")
	deadline := time.Now().Add(5 * time.Second)
	for {
		d, _ = f.Check(ctx, other, store.User{ID: 11}, "buy NOW!")
		if d.Reject == "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("still limited: %+v", d)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if !d.Shadow || d.ShadowReason != filter.ReasonShadowDup {
		t.Fatalf("duplicate = %+v", d)
	}
}

func FuzzNormalize(f *testing.F) {
	f.Add("Hello ＷＯＲＬＤ b\u200bad")
	f.Fuzz(func(t *testing.T, s string) {
		n := filter.Normalize(s)
		if filter.Normalize(n) != n {
			t.Fatalf("not idempotent: %q -> %q -> %q", s, n, filter.Normalize(n))
		}
	})
}
