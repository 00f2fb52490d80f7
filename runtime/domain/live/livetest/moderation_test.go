package livetest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/concord-chat/concord/runtime/domain/live/classifier/linear"
	"github.com/concord-chat/concord/runtime/domain/live/livetest"
	"github.com/concord-chat/concord/runtime/domain/live/moderation"
)

// ML moderation end to end, with the Go model: an offensive comment is
// shown, then retracted with the classifier's reason through the usual
// takedown path (viewers get `retract`, scroll-back no longer lists it);
// a clean one stays; an author taken down three times is banned, so the
// next post is refused.
func TestModerationTakesDown(t *testing.T) {
	reg := prometheus.NewRegistry()
	e := livetest.Start(t, livetest.Backends{}, livetest.Options{Registerer: reg})
	m, err := linear.Default()
	if err != nil {
		t.Fatal(err)
	}
	mod, err := moderation.New(moderation.Config{Topics: e.B.Topics, Group: e.B.Topics.Comments + ".moderation",
		Logger: slog.New(slog.DiscardHandler)}, moderation.Deps{Log: e.B.Log, Append: e.B.Log, Classifier: m, Board: e.B.Board})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go mod.Run(ctx)

	creator, troll, fan := e.NewUser(), e.NewUser(), e.NewUser()
	var streams []livetest.Stream
	for _, title := range []string{"one", "two", "three", "four"} {
		streams = append(streams, e.CreateStream(creator, title))
	}
	v := livetest.Watch(t, e.URL, streams[0].ID, nil, "")
	v.Next(livetest.Wait, "state")
	clean := e.Post(fan, streams[0].ID, "what a great stream, thanks!", 0)
	posted := time.Now()
	bad := e.Post(troll, streams[0].ID, "shut up you stupid moron", 0)
	if got := v.Comments(2, livetest.Wait); got[0].ID != clean.ID || got[1].ID != bad.ID {
		t.Fatalf("comments %v", got)
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
	t.Logf("post to takedown on screen: %s", time.Since(posted).Round(time.Millisecond))
	// The exposure metric: the one viewer was shown two comments, one of
	// them later removed.
	counter := func(name string) float64 {
		mfs, _ := reg.Gather()
		for _, mf := range mfs {
			if mf.GetName() == name {
				return mf.GetMetric()[0].GetCounter().GetValue()
			}
		}
		return -1
	}
	e.Eventually(livetest.Wait, func() string {
		if shown, removed := counter("concord_live_gateway_comment_impressions_total"), counter("concord_live_gateway_removed_comment_impressions_total"); shown != 2 || removed != 1 {
			return fmt.Sprintf("impressions %v, of removed comments %v; want 2 and 1", shown, removed)
		}
		return ""
	})
	e.Eventually(livetest.Wait, func() string {
		var list []livetest.Comment
		e.Do(http.MethodGet, "/v1/streams/"+streams[0].ID+"/comments", fan.Token, nil).JSON(t, &list)
		for _, c := range list {
			if c.ID == bad.ID {
				return "the taken-down comment is still listed"
			}
		}
		if len(list) != 1 || list[0].ID != clean.ID {
			return "the clean comment is not listed"
		}
		return ""
	})
	// Two more takedowns (other streams: the per-user interval is per
	// stream) make three: the author is banned everywhere.
	e.Post(troll, streams[1].ID, "you are a fucking idiot", 0)
	e.Post(troll, streams[2].ID, "this is shit, fuck off", 0)
	e.Eventually(livetest.Wait, func() string {
		r := e.Do(http.MethodPost, "/v1/streams/"+streams[3].ID+"/comments", troll.Token, map[string]any{"text": "hello there"})
		if r.Status == http.StatusCreated || r.Status == http.StatusTooManyRequests {
			return "a repeat offender may still post"
		}
		if r.Status != http.StatusForbidden {
			t.Fatalf("post after the ban: %d %s", r.Status, r.Body)
		}
		return ""
	})
}
