package ratelimit_test

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/concord-chat/concord/runtime/adapters/counters"
	"github.com/concord-chat/concord/runtime/adapters/counters/counterstest"
	"github.com/concord-chat/concord/runtime/adapters/counters/mem"
	"github.com/concord-chat/concord/runtime/edge/ratelimit"
)

func newMem(t testing.TB, clock *counterstest.Clock) counterstest.Harness {
	c, err := mem.New(mem.Config{Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return counterstest.Harness{Counters: c, Advance: clock.Advance}
}

func TestMiddlewareMem(t *testing.T) {
	runSuite(t, newMem)
}

func TestTemplate(t *testing.T) {
	for _, c := range []struct{ path, template, major string }{
		{"/api/v10/channels/1234567890/messages/42", "/channels/{channel_id}/messages/{message_id}", "1234567890"},
		{"/api/v9/channels/1/messages", "/channels/{channel_id}/messages", "1"},
		{"/api/channels/1/typing", "/channels/{channel_id}/typing", "1"},
		{"/channels/1/messages/bulk-delete", "/channels/{channel_id}/messages/bulk-delete", "1"},
		{"/api/v10/guilds/7/members/8", "/guilds/{guild_id}/members/{user_id}", "7"},
		{"/api/v10/guilds/7/members/@me", "/guilds/{guild_id}/members/@me", "7"},
		{"/api/v10/guilds/7/bans/8", "/guilds/{guild_id}/bans/{user_id}", "7"},
		{"/api/v10/channels/1/messages/2/reactions/%F0%9F%91%8D/@me", "/channels/{channel_id}/messages/{message_id}/reactions/{emoji}/@me", "1"},
		{"/api/v10/channels/1/messages/2/reactions/name:123/9", "/channels/{channel_id}/messages/{message_id}/reactions/{emoji}/{id}", "1"},
		{"/api/v10/users/@me", "/users/@me", ""},
		{"/api/v10/users/55", "/users/{user_id}", ""},
		{"/api/v10/gateway/bot", "/gateway/bot", ""},
		{"/api/v10/interactions/99/aW50ZXJhY3Rpb246OTk/callback", "/interactions/{interaction_id}/{interaction_token}/callback", "99"},
		{"/api/v10/applications/5/commands/6", "/applications/{application_id}/commands/{command_id}", ""},
		{"/api/v10/invites/abcDEF", "/invites/{invite_code}", ""},
		{"/api/v10/v2", "/v2", ""},
		{"/api/v10", "/", ""},
		{"", "/", ""},
		{"/api/v10/channels/99999999999999999999999/messages", "/channels/99999999999999999999999/messages", ""}, // beyond uint64: not an id
		{"/a/b/c/d/e/f/g/h/i/j/k/l/m/n/o/p/q/r/s", "/a/b/c/d/e/f/g/h/i/j/k/l/m/n/o/p/{...}", ""},
	} {
		tmpl, major := ratelimit.Template(c.path)
		if tmpl != c.template || major != c.major {
			t.Errorf("Template(%q) = %q, %q; want %q, %q", c.path, tmpl, major, c.template, c.major)
		}
	}
	// A webhook's major parameter is its id and a digest of its token; the
	// token itself never appears.
	tmpl, major := ratelimit.Template("/api/v10/webhooks/777/s3cr3t-token/messages/@original")
	if tmpl != "/webhooks/{webhook_id}/{webhook_token}/messages/@original" || len(major) != len("777+")+16 || major[:4] != "777+" {
		t.Fatalf("webhook Template = %q, %q", tmpl, major)
	}
	if _, other := ratelimit.Template("/api/v10/webhooks/777/other-token"); other == major {
		t.Fatal("two webhook tokens share a major parameter")
	}
	if _, m := ratelimit.Template("/api/v10/webhooks/777"); m != "777" {
		t.Fatalf("webhook without token: major %q", m)
	}
}

func TestBearerToken(t *testing.T) {
	for in, want := range map[string]string{"Bot abc": "abc", "bot abc": "abc", "Bearer xyz": "xyz", "abc": "abc", "": "", "Bot ": "Bot "} {
		r := httptest.NewRequest("GET", "/", nil)
		r.Header.Set("Authorization", in)
		if got := ratelimit.BearerToken(r); got != want {
			t.Errorf("BearerToken(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestNewValidates(t *testing.T) {
	c, _ := mem.New(mem.Config{})
	for name, cfg := range map[string]ratelimit.Config{
		"no counters":     {},
		"bad route":       {Counters: c, Routes: map[string]ratelimit.Limit{"GET /x": {Requests: 0, Window: time.Second}}},
		"bad default":     {Counters: c, DefaultLimit: ratelimit.Limit{Requests: 5}},
		"negative global": {Counters: c, GlobalBot: -1},
	} {
		if _, err := ratelimit.New(cfg); !errors.Is(err, ratelimit.ErrInvalidConfig) {
			t.Errorf("%s: err = %v, want ErrInvalidConfig", name, err)
		}
	}
}

// failing is a counters.Counters whose store is down.
type failing struct{ counters.Counters }

func (failing) Take(context.Context, string, int, time.Duration, time.Time) (counters.Decision, error) {
	return counters.Decision{}, counters.ErrUnavailable
}
func (failing) Banned(context.Context, ...string) (time.Duration, error) {
	return 0, counters.ErrUnavailable
}
func (failing) Incr(context.Context, string, int64, time.Duration) (int64, error) {
	return 0, counters.ErrUnavailable
}

// TestFailOpen checks that a counters outage lets requests through, with
// headers, and is counted: rate limiting must not become an API outage.
func TestFailOpen(t *testing.T) {
	reg := prometheus.NewRegistry()
	lim, err := ratelimit.New(ratelimit.Config{Counters: failing{}, Registerer: reg, InvalidLimit: 1, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	status := http.StatusOK
	h := lim.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(status) }),
		func(*http.Request) (ratelimit.Principal, bool) { return ratelimit.Principal{ID: "1", Bot: true}, true })
	for i := range 20 {
		if i == 10 {
			status = http.StatusUnauthorized
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest("POST", "/api/v10/channels/1/messages", nil))
		if w.Code != status || w.Header().Get("X-RateLimit-Limit") != "5" || w.Header().Get("X-RateLimit-Bucket") == "" {
			t.Fatalf("request %d during an outage: %d, headers %v", i, w.Code, w.Header())
		}
	}
	if got := metricValue(t, reg, "concord_ratelimit_counter_errors_total", "op", "take"); got != 20 {
		t.Fatalf("counter errors (take) = %v, want 20", got)
	}
	if got := metricValue(t, reg, "concord_ratelimit_counter_errors_total", "op", "incr"); got != 10 {
		t.Fatalf("counter errors (incr) = %v, want 10 (the 401s tallied by address; they carry no token)", got)
	}
}

// TestOverHTTP runs the middleware behind a real listener, so the headers
// and body are checked as a client library receives them.
func TestOverHTTP(t *testing.T) {
	c, _ := mem.New(mem.Config{})
	lim, err := ratelimit.New(ratelimit.Config{Counters: c})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(lim.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"id":"1"}`))
	}), func(*http.Request) (ratelimit.Principal, bool) { return ratelimit.Principal{ID: "1", Bot: true}, true }))
	defer srv.Close()
	var last *http.Response
	for range 6 {
		resp, err := srv.Client().Post(srv.URL+"/api/v10/channels/1/messages", "application/json", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.Header.Get("X-RateLimit-Remaining") == "" || resp.Header.Get("X-RateLimit-Reset") == "" {
			t.Fatalf("%d response without rate-limit headers: %v", resp.StatusCode, resp.Header)
		}
		last = resp
	}
	if last.StatusCode != http.StatusTooManyRequests || last.Header.Get("Via") == "" || last.Header.Get("Retry-After") != "1" {
		t.Fatalf("6th send: %d, Via %q, Retry-After %q", last.StatusCode, last.Header.Get("Via"), last.Header.Get("Retry-After"))
	}
}
