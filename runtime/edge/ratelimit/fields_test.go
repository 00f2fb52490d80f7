package ratelimit_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/concord-chat/concord/runtime/adapters/counters/mem"
	"github.com/concord-chat/concord/runtime/edge/ratelimit"
)

// TestChannelEditLimitOnlyNameAndTopic: Discord's two-per-ten-minutes
// channel edit limit applies to name and topic changes; any other edit
// goes through the default bucket, and the handler reads the body intact.
func TestChannelEditLimitOnlyNameAndTopic(t *testing.T) {
	c, _ := mem.New(mem.Config{})
	lim, err := ratelimit.New(ratelimit.Config{Counters: c})
	if err != nil {
		t.Fatal(err)
	}
	var bodies []string
	srv := httptest.NewServer(lim.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		bodies = append(bodies, string(b))
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"id":"1"}`))
	}), func(*http.Request) (ratelimit.Principal, bool) { return ratelimit.Principal{ID: "1", Bot: true}, true }))
	defer srv.Close()
	patch := func(channel, body string) int {
		t.Helper()
		req, _ := http.NewRequest("PATCH", srv.URL+"/api/v10/channels/"+channel, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for i := range 6 {
		if got := patch("10", `{"nsfw":true,"rate_limit_per_user":5}`); got != 200 {
			t.Fatalf("edit %d without name or topic: %d", i, got)
		}
	}
	if bodies[0] != `{"nsfw":true,"rate_limit_per_user":5}` {
		t.Fatalf("handler read %q", bodies[0])
	}
	if a, b := patch("10", `{"name":"a"}`), patch("10", `{"topic":"b"}`); a != 200 || b != 200 {
		t.Fatalf("first two renames: %d %d", a, b)
	}
	if got := patch("10", `{"name":"c","nsfw":false}`); got != http.StatusTooManyRequests {
		t.Fatalf("third rename within ten minutes: %d, want 429", got)
	}
	if got := patch("10", `{"position":3}`); got != 200 {
		t.Fatalf("other edit after the rename limit: %d", got)
	}
	if got := patch("11", `{"name":"d"}`); got != 200 {
		t.Fatalf("rename of another channel: %d", got)
	}
}
