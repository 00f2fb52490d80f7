package livetest_test

import (
	"context"
	"log/slog"
	"net/http/httptest"
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
// accepted it the answer is immediate; on another API instance the
// DELETE waits for the comment to reach the store, and answers 204 once
// the archiver runs. Then the store has it soft-deleted with the
// author's reason.
func TestDeleteBeforeArchived(t *testing.T) {
	e := livetest.Start(t, livetest.Backends{}, livetest.Options{NoRouter: true, NoArchiver: true})
	alice := e.NewUser()
	s := e.CreateStream(alice, "delete me")
	c := e.Post(alice, s.ID, "typo", 0)
	if r := e.Do("DELETE", "/v1/streams/"+s.ID+"/comments/"+c.ID, alice.Token, nil); r.Status != 204 {
		t.Fatalf("DELETE on the accepting API before archiving = %d %s, want 204", r.Status, r.Body)
	}
	// Twice is still 204 (already taken down).
	if r := e.Do("DELETE", "/v1/streams/"+s.ID+"/comments/"+c.ID, alice.Token, nil); r.Status != 204 {
		t.Fatalf("second DELETE = %d %s", r.Status, r.Body)
	}

	// Another API instance on the same backends, which never saw it.
	reg := prometheus.NewRegistry()
	ids, err := snowflake.New(snowflake.Config{Worker: 30})
	if err != nil {
		t.Fatal(err)
	}
	other, err := api.New(api.Config{Topics: e.B.Topics, Logger: slog.New(slog.DiscardHandler), Registerer: reg},
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

	c2 := e.Post(alice, s.ID, "second typo", 1)
	done := make(chan livetest.Response, 1)
	go func() { done <- o.Do("DELETE", "/v1/streams/"+s.ID+"/comments/"+c2.ID, alice.Token, nil) }()
	// The DELETE is waiting for the comment (it would have been a 404).
	e.Eventually(livetest.Wait, func() string {
		select {
		case r := <-done:
			t.Fatalf("DELETE on another API before archiving = %d %s, want it to wait", r.Status, r.Body)
		default:
		}
		if n := gauge(t, reg, "concord_live_api_takedowns_waiting"); n != 1 {
			return "no takedown waiting yet"
		}
		return ""
	})
	e.StartArchiver(ctx)
	select {
	case r := <-done:
		if r.Status != 204 {
			t.Fatalf("DELETE on another API once archived = %d %s, want 204", r.Status, r.Body)
		}
	case <-time.After(livetest.Wait):
		t.Fatal("DELETE still waiting after the archiver started")
	}
	e.Eventually(livetest.Wait, func() string {
		for _, id := range []string{c.ID, c2.ID} {
			sc, err := e.B.Store.GetComment(context.Background(), mustID(t, s.ID), mustID(t, id))
			if err != nil {
				return err.Error()
			}
			if !sc.Retracted || sc.Reason != "deleted by author" {
				return "comment " + id + " not soft-deleted yet"
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

// gauge reads one gauge of reg.
func gauge(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.Metric) > 0 {
			return mf.Metric[0].GetGauge().GetValue()
		}
	}
	return 0
}
