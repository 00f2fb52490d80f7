package ratelimit_test

import (
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/concord-chat/concord/runtime/adapters/counters/mem"
	"github.com/concord-chat/concord/runtime/edge/ratelimit"
)

// TestResponsesByRoute checks concord_api_responses_total: one series per
// route and status class, 429s of the limiter counted as such, and the
// route label bounded against clients walking random paths.
func TestResponsesByRoute(t *testing.T) {
	reg := prometheus.NewRegistry()
	c, err := mem.New(mem.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	lim, err := ratelimit.New(ratelimit.Config{Counters: c, Registerer: reg, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	status := http.StatusInternalServerError
	srv := lim.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(status) }),
		func(*http.Request) (ratelimit.Principal, bool) { return ratelimit.Principal{ID: "1", Bot: true}, true })
	serve := func(method, path string) int {
		w := httptest.NewRecorder()
		srv.ServeHTTP(w, httptest.NewRequest(method, path, nil))
		return w.Code
	}
	// The message route allows 5 per 5 s: the sixth is the limiter's 429.
	for i := range 6 {
		code := serve("POST", "/api/v10/channels/123456789012345678/messages")
		if want := map[bool]int{true: 429, false: 500}[i == 5]; code != want {
			t.Fatalf("request %d: status %d, want %d", i, code, want)
		}
	}
	const route = "POST /channels/{channel_id}/messages"
	if got := responses(t, reg, route, "5xx"); got != 5 {
		t.Errorf("5xx of %s = %v, want 5", route, got)
	}
	if got := responses(t, reg, route, "429"); got != 1 {
		t.Errorf("429 of %s = %v, want 1", route, got)
	}
	status = http.StatusNotFound
	for i := range ratelimit.MaxRouteLabels + 10 {
		serve("GET", fmt.Sprintf("/api/v10/nowhere-%d", i))
	}
	// The message route took one label: MaxRouteLabels-1 random routes
	// got their own, the remaining 11 share "other" (as 404s or, past
	// the global limit, 429s).
	if got := responses(t, reg, "other", "4xx") + responses(t, reg, "other", "429"); got != 10+1 {
		t.Errorf("responses of other = %v, want 11", got)
	}
}

// responses is the value of concord_api_responses_total{route,class}, 0
// when there is no such series.
func responses(t *testing.T, reg *prometheus.Registry, route, class string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "concord_api_responses_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			var r, c string
			for _, lp := range m.GetLabel() {
				switch lp.GetName() {
				case "route":
					r = lp.GetValue()
				case "class":
					c = lp.GetValue()
				}
			}
			if r == route && c == class {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}
