package livetest

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/concord-chat/concord/runtime/domain/live/sse"
)

// Viewer follows one SSE stream, reading events in the background.
type Viewer struct {
	t      testing.TB
	Stream *sse.Stream
	events chan sse.Event
	done   chan error
	// Pings counts ": ping" lines.
	Pings atomic.Int64
}

// Watch opens GET base/v1/streams/{id}/live with header (nil: none) and
// query (may be empty).
func Watch(t testing.TB, base, stream string, header http.Header, query string) *Viewer {
	t.Helper()
	return WatchWith(t, nil, base, stream, header, query)
}

// WatchWith is Watch with an HTTP client of the caller's (HTTP/2).
func WatchWith(t testing.TB, client *http.Client, base, stream string, header http.Header, query string) *Viewer {
	t.Helper()
	url := base + "/v1/streams/" + stream + "/live"
	if query != "" {
		url += "?" + query
	}
	s, err := sse.Dial(context.Background(), client, url, header)
	if err != nil {
		t.Fatalf("watch %s: %v", stream, err)
	}
	v := &Viewer{t: t, Stream: s, events: make(chan sse.Event, 4096), done: make(chan error, 1)}
	s.OnComment = func(text []byte) {
		if string(text) == "ping" {
			v.Pings.Add(1)
		}
	}
	t.Cleanup(func() { s.Close() })
	go func() {
		for {
			ev, err := s.Next()
			if err != nil {
				v.done <- err
				close(v.events)
				return
			}
			v.events <- ev
		}
	}()
	return v
}

// Auth returns an Authorization header for token, with a Last-Event-ID
// when lastID is not empty.
func Auth(token, lastID string) http.Header {
	h := http.Header{}
	if token != "" {
		h.Set("Authorization", token)
	}
	if lastID != "" {
		h.Set("Last-Event-ID", lastID)
	}
	return h
}

// Next returns the next event of one of types (others are skipped; no
// types: any), failing after timeout.
func (v *Viewer) Next(timeout time.Duration, types ...string) sse.Event {
	v.t.Helper()
	deadline := time.After(timeout)
	for {
		select {
		case ev, ok := <-v.events:
			if !ok {
				v.t.Fatalf("stream ended waiting for %v", types)
			}
			if len(types) == 0 || contains(types, ev.Type) {
				return ev
			}
		case <-deadline:
			v.t.Fatalf("no %v event within %s", types, timeout)
		}
	}
}

// Quiet checks that no event of types arrives within d.
func (v *Viewer) Quiet(d time.Duration, types ...string) {
	v.t.Helper()
	deadline := time.After(d)
	for {
		select {
		case ev, ok := <-v.events:
			if !ok {
				return
			}
			if len(types) == 0 || contains(types, ev.Type) {
				v.t.Fatalf("unexpected event %v", ev)
			}
		case <-deadline:
			return
		}
	}
}

// Ended waits for the stream to be closed by the server.
func (v *Viewer) Ended(timeout time.Duration) error {
	v.t.Helper()
	deadline := time.After(timeout)
	for {
		select {
		case _, ok := <-v.events:
			if !ok {
				return <-v.done
			}
		case <-deadline:
			v.t.Fatalf("stream still open after %s", timeout)
		}
	}
}

// Comments reads n comment events.
func (v *Viewer) Comments(n int, timeout time.Duration) []Comment {
	v.t.Helper()
	out := make([]Comment, 0, n)
	for len(out) < n {
		ev := v.Next(timeout, "comment")
		var c Comment
		if err := json.Unmarshal(ev.Data, &c); err != nil {
			v.t.Fatalf("comment data %s: %v", ev.Data, err)
		}
		if ev.ID == "" || !ev.HasID {
			v.t.Fatalf("comment without id: %v", ev)
		}
		out = append(out, c)
	}
	return out
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if strings.EqualFold(x, y) {
			return true
		}
	}
	return false
}
