package livetest_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http/httptest"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/live/api"
	"github.com/concord-chat/concord/runtime/domain/live/livetest"
)

// TestDeleteBeforeArchived: DELETE of a comment posted a moment ago
// takes it down while it is only in the event log (no router has put it
// in the recent cache, no archiver in the store). On the API that
// accepted it the answer is immediate from what that process remembers.
// On a second API instance, which never saw the comment, the DELETE is
// answered at once too, with neither a router nor an archiver running:
// nothing waits on the store; the takedown is appended to the log after
// the comment, and once the router and the archiver run, in log order,
// the retraction reaches the viewer (after the comment, with the
// comment's seq and the author's reason) and the store soft-deletes it.
// A stranger's DELETE of a fresh comment there is answered the same way
// and applies nowhere; a moderator's applies with the moderator's reason.
func TestDeleteBeforeArchived(t *testing.T) {
	reg := prometheus.NewRegistry()
	e := livetest.Start(t, livetest.Backends{}, livetest.Options{NoRouter: true, NoArchiver: true, Registerer: reg})
	alice, bob, carol, dave, erin, mallory := e.NewUser(), e.NewUser(), e.NewUser(), e.NewUser(), e.NewUser(), e.NewUser()
	s := e.CreateStream(alice, "delete me")
	viewer := livetest.Watch(t, e.URL, s.ID, nil, "")
	viewer.Next(livetest.Wait, "state")
	c := e.Post(alice, s.ID, "typo", 0)
	if r := e.Do("DELETE", "/v1/streams/"+s.ID+"/comments/"+c.ID, alice.Token, nil); r.Status != 204 {
		t.Fatalf("DELETE on the accepting API before archiving = %d %s, want 204", r.Status, r.Body)
	}
	// Twice is still 204 (already taken down).
	if r := e.Do("DELETE", "/v1/streams/"+s.ID+"/comments/"+c.ID, alice.Token, nil); r.Status != 204 {
		t.Fatalf("second DELETE = %d %s", r.Status, r.Body)
	}

	// Another API instance on the same backends, which never saw them.
	oreg := prometheus.NewRegistry()
	ids, err := snowflake.New(snowflake.Config{Worker: 30})
	if err != nil {
		t.Fatal(err)
	}
	other, err := api.New(api.Config{Topics: e.B.Topics, Logger: slog.New(slog.DiscardHandler), Registerer: oreg},
		api.Deps{Verifier: e.Issuer, Users: e.Users, IDs: ids, Log: e.B.Log, Store: e.B.Store, Recent: e.B.Cache,
			Nonces: e.B.Cache, Counters: e.B.Counters, Board: e.B.Board})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go other.Run(ctx)
	<-other.Synced()
	srv := httptest.NewServer(other)
	t.Cleanup(srv.Close)
	o := livetest.Remote(t, srv.URL, livetest.RemoteRoles{})

	mine := e.Post(bob, s.ID, "second typo", 1)
	theirs := e.Post(carol, s.ID, "not mallory's", 2)
	rude := e.Post(dave, s.ID, "rude", 3)
	// No router and no archiver run: an answer now waited on nothing.
	for _, d := range []struct {
		c      livetest.Comment
		by     livetest.User
		reason any
	}{{mine, bob, nil}, {theirs, mallory, nil}, {rude, alice, map[string]any{"reason": "rude"}}} {
		if r := o.Do("DELETE", "/v1/streams/"+s.ID+"/comments/"+d.c.ID, d.by.Token, d.reason); r.Status != 204 {
			t.Fatalf("DELETE of %q on another API before archiving = %d %s, want 204", d.c.Text, r.Status, r.Body)
		}
	}
	if n := counter(t, oreg, "concord_live_api_takedowns_deferred_total", ""); n != 3 {
		t.Fatalf("takedowns deferred to the log = %v, want 3", n)
	}
	last := e.Post(erin, s.ID, "the end", 4)

	e.StartRouter(ctx)
	e.StartArchiver(ctx)
	// The viewer, in log order: c, its retraction, mine, theirs, rude,
	// the retractions of mine and rude (none of theirs: mallory may
	// not), the end.
	retracted := map[string]string{}
	seen := []string{}
	for len(seen) == 0 || seen[len(seen)-1] != last.ID {
		ev := viewer.Next(livetest.Wait, "comment", "retract")
		var data struct {
			ID        string `json:"id"`
			CommentID string `json:"comment_id"`
			Seq       int64  `json:"seq"`
			Reason    string `json:"reason"`
		}
		if err := json.Unmarshal(ev.Data, &data); err != nil {
			t.Fatalf("%s data %s: %v", ev.Type, ev.Data, err)
		}
		if ev.Type == "comment" {
			seen = append(seen, data.ID)
			continue
		}
		if !slices.Contains(seen, data.CommentID) {
			t.Fatalf("retract of %s before its comment (seen %v)", data.CommentID, seen)
		}
		for _, cm := range []livetest.Comment{c, mine, rude} {
			if cm.ID == data.CommentID && cm.Seq != data.Seq {
				t.Fatalf("retract of %s names seq %d, the comment's is %d", cm.ID, data.Seq, cm.Seq)
			}
		}
		retracted[data.CommentID] = data.Reason
	}
	want := map[string]string{c.ID: "deleted by author", mine.ID: "deleted by author", rude.ID: "rude"}
	if len(retracted) != len(want) {
		t.Fatalf("viewer saw retractions %v, want %v", retracted, want)
	}
	for id, reason := range want {
		if retracted[id] != reason {
			t.Fatalf("viewer saw retractions %v, want %v", retracted, want)
		}
	}
	if n := counter(t, reg, "concord_live_router_takedowns_total", "refused"); n != 1 {
		t.Fatalf("router refused %v takedowns, want 1 (mallory's)", n)
	}
	e.Eventually(livetest.Wait, func() string {
		for _, cm := range []livetest.Comment{c, mine, theirs, rude, last} {
			sc, err := e.B.Store.GetComment(context.Background(), mustID(t, s.ID), mustID(t, cm.ID))
			if err != nil {
				return err.Error()
			}
			if sc.Retracted != (want[cm.ID] != "") || sc.Reason != want[cm.ID] {
				return "comment " + cm.Text + " in the store: retracted " + strconv.FormatBool(sc.Retracted) + " " + sc.Reason
			}
		}
		return ""
	})
	// An id a minute old that no one has is 404 at once.
	ghost := snowflake.FromTime(time.Now().Add(-time.Minute))
	if r := o.Do("DELETE", "/v1/streams/"+s.ID+"/comments/"+ghost.String(), alice.Token, nil); r.Status != 404 {
		t.Fatalf("DELETE of an unknown comment = %d %s", r.Status, r.Body)
	}
}

func mustID(t *testing.T, s string) snowflake.ID {
	t.Helper()
	id, err := snowflake.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// counter reads one counter of reg (the series whose only label value
// is label, or the unlabelled one).
func counter(t *testing.T, reg *prometheus.Registry, name, label string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.Metric {
			if label == "" && len(m.Label) == 0 || len(m.Label) == 1 && m.Label[0].GetValue() == label {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}
