package liverole_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/live"
	"github.com/concord-chat/concord/runtime/domain/live/livetest"
	"github.com/concord-chat/concord/runtime/domain/live/moderation"
	"github.com/concord-chat/concord/runtime/services/liverole"
	"github.com/concord-chat/concord/runtime/services/wiring"
)

// TestDevRunsRelayModerationFriends: `concord dev` runs the relay tree,
// the ML moderation consumer and the friends boost through their roles,
// on its embedded backends. A comment reaches a viewer through the
// live-relay node (its copies count it); an offensive one is retracted
// with the classifier's reason; on a sampled stream a rest-tier comment
// reaches its author's friend — whose friendship the presence role's
// relationships hold — and not a stranger.
func TestDevRunsRelayModerationFriends(t *testing.T) {
	o := livetest.TestOptions()
	n, e, _ := startDevNode(t, o, t.TempDir())
	alice, fan, troll := e.NewUser(), e.NewUser(), e.NewUser()

	// Relay tree: the node announced itself and carries the stream.
	s := e.CreateStream(alice, "wired")
	v := livetest.Watch(t, e.URL, s.ID, nil, "")
	v.Next(livetest.Wait, "state")
	before := livetest.Metric(t, e.URL, "concord_live_relay_copies_total")
	c := e.Post(fan, s.ID, "what a great stream, thanks!", 0)
	if got := v.Comments(1, livetest.Wait); got[0].ID != c.ID {
		t.Fatalf("viewer got %+v, want %s", got[0], c.ID)
	}
	if after := livetest.Metric(t, e.URL, "concord_live_relay_copies_total"); after <= before {
		t.Fatalf("relay copies %v -> %v: the comment did not travel through the relay tree", before, after)
	}

	// ML moderation: shown, then retracted by the classifier.
	bad := e.Post(troll, s.ID, "shut up you stupid moron", 1)
	if got := v.Comments(1, livetest.Wait); got[0].ID != bad.ID {
		t.Fatalf("viewer got %+v, want %s", got[0], bad.ID)
	}
	ev := v.Next(livetest.Wait, "retract")
	var rt struct {
		CommentID string `json:"comment_id"`
		Reason    string `json:"reason"`
	}
	json.Unmarshal(ev.Data, &rt)
	if rt.CommentID != bad.ID || rt.Reason != moderation.Reason {
		t.Fatalf("retract %s, want %s by the classifier", ev.Data, bad.ID)
	}

	// Friends boost on a sampled stream.
	rel, ok := wiring.Lookup(n.Seams(), wiring.Relationships)
	if !ok {
		t.Fatal("concord dev gives no relationships port")
	}
	type setter interface {
		Set(ctx context.Context, a, b snowflake.ID, friends bool) error
	}
	poster, friend, stranger := e.NewUser(), e.NewUser(), e.NewUser()
	if err := rel.(setter).Set(context.Background(), poster.ID, friend.ID, true); err != nil {
		t.Fatal(err)
	}
	bk, ok := wiring.Lookup(n.Seams(), liverole.BackendsPort)
	if !ok {
		t.Fatal("no live backends")
	}
	busy := e.CreateStream(alice, "busy")
	floodSampled(t, e, bk, busy.ID)
	watch := func(u livetest.User) *livetest.Viewer {
		v := livetest.Watch(t, e.URL, busy.ID, livetest.Auth(u.Token, ""), "")
		if ev := v.Next(livetest.Wait, "state"); !strings.Contains(string(ev.Data), `"sampled":true`) {
			t.Fatalf("state %s, want sampled", ev.Data)
		}
		return v
	}
	fetched := livetest.Metric(t, e.URL, "concord_live_gateway_friend_fetches_total")
	vf, vs := watch(friend), watch(stranger)
	// Friend lists are fetched in the background at join: the poster's
	// comment waits until the gateway indexed both.
	e.Eventually(livetest.Wait, func() string {
		if got := livetest.Metric(t, e.URL, "concord_live_gateway_friend_fetches_total"); got < fetched+2 {
			return fmt.Sprintf("friend lists fetched %v, want %v", got, fetched+2)
		}
		return ""
	})
	// Two comments of the poster: the sample takes at most one comment
	// per author a minute, so at least one of them is rest tier, which
	// only the poster's friend (and the poster) gets.
	first := e.Post(poster, busy.ID, "hello from a friend", 2)
	time.Sleep(2100 * time.Millisecond) // the per-user comment interval, a protocol limit
	second := e.Post(poster, busy.ID, "rest tier from a friend", 3)
	closing := e.Post(alice, busy.ID, "pinned: that's all", 4)
	seen := func(v *livetest.Viewer) []string {
		var ids []string
		for {
			ev := v.Next(livetest.Wait, "comment")
			var c livetest.Comment
			json.Unmarshal(ev.Data, &c)
			if strings.HasPrefix(c.Text, "filler") {
				continue
			}
			if c.ID == closing.ID {
				return ids
			}
			ids = append(ids, c.ID)
		}
	}
	if got := seen(vf); len(got) != 2 || got[0] != first.ID || got[1] != second.ID {
		t.Fatalf("friend saw %v before the closing comment, want both of the friend's %s %s", got, first.ID, second.ID)
	}
	if got := seen(vs); len(got) > 1 {
		t.Fatalf("stranger saw %v before the closing comment, want at most the one the sample drew", got)
	}
}

// floodSampled appends a bot flood of 60 comments a second to the
// stream's partition of the dev process's log until the stream is
// sampled.
func floodSampled(t *testing.T, e *livetest.Env, bk liverole.Backends, stream string) {
	t.Helper()
	id, _ := snowflake.Parse(stream)
	rec, err := bk.Store.GetStream(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	topic := live.TopicsFor("concord.live.").Comments
	warm := livetest.Watch(t, e.URL, stream, nil, "")
	warm.Next(livetest.Wait, "state")
	deadline := time.Now().Add(40 * time.Second)
	for n := 0; time.Now().Before(deadline); {
		for range 60 {
			n++
			c := live.Comment{ID: snowflake.ID(1_000_000 + n), StreamID: id,
				Author: live.Author{ID: snowflake.ID(2_000_000 + n%97), Username: "bot"},
				Text:   fmt.Sprintf("filler %d", n), CreatedAt: time.Now().UTC().Truncate(time.Millisecond)}
			r, err := live.LogRecord{Kind: live.KindComment, StreamID: id, Comment: &c,
				AcceptedAt: time.Now().UnixNano(), Features: &live.Features{Bot: true}}.Record(topic)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := bk.Log.AppendTo(context.Background(), topic, rec.Partition, r); err != nil {
				t.Fatal(err)
			}
		}
		// Paced by the viewer: the next 60 once these arrived, or the
		// switch to sampled.
		for got := 0; got < 60; {
			ev := warm.Next(livetest.Wait, "comment", "state")
			if ev.Type == "state" && strings.Contains(string(ev.Data), `"sampled":true`) {
				warm.Stream.Close()
				return
			}
			if ev.Type == "comment" {
				got++
			}
		}
	}
	t.Fatal("the stream did not switch to sampled within 40 s of a bot flood")
}
