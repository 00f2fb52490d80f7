package ratelimit_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/concord-chat/concord/runtime/adapters/counters/mem"
	"github.com/concord-chat/concord/runtime/edge/ratelimit"
)

// Example wires the limiter in front of a REST mux, as the API does: the
// middleware wraps the whole mux (it runs before routing and reads the
// route from the path), identify is the API's token check.
func Example() {
	c, _ := mem.New(mem.Config{}) // counters/redis in production
	lim, err := ratelimit.New(ratelimit.Config{Counters: c})
	if err != nil {
		panic(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /api/v10/channels/{channel_id}/messages", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"id":"1"}`)
	})
	identify := func(r *http.Request) (ratelimit.Principal, bool) {
		if ratelimit.BearerToken(r) == "" {
			return ratelimit.Principal{}, false
		}
		return ratelimit.Principal{ID: "41771983423143937", Bot: true}, true // the token's application
	}
	h := lim.Middleware(mux, identify)

	for range 6 {
		r := httptest.NewRequest("POST", "/api/v10/channels/81384788765712384/messages", nil)
		r.Header.Set("Authorization", "Bot token")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		fmt.Printf("%d remaining=%s retry-after=%q\n", w.Code, w.Header().Get("X-RateLimit-Remaining"), w.Header().Get("Retry-After"))
	}
	// Output:
	// 200 remaining=4 retry-after=""
	// 200 remaining=3 retry-after=""
	// 200 remaining=2 retry-after=""
	// 200 remaining=1 retry-after=""
	// 200 remaining=0 retry-after=""
	// 429 remaining=0 retry-after="1"
}
