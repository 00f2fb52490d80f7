package api_test

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/concord-chat/concord/runtime/domain/live/livetest"
)

// BenchmarkPostComment is the API's own work for one POST
// /v1/streams/{id}/comments on the in-process backends (token, the
// author's account, the sync filter, the memlog append, the 201), called
// on the handler directly so no HTTP client or server is measured.
//
//	go test ./runtime/domain/live/api -run '^$' -bench BenchmarkPostComment -benchmem
func BenchmarkPostComment(b *testing.B) {
	e := livetest.Start(b, livetest.Backends{}, livetest.Options{NoRouter: true})
	alice := e.NewUser()
	s := e.CreateStream(alice, "bench")
	path := "/v1/streams/" + s.ID + "/comments"
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		req := httptest.NewRequest(http.MethodPost, path, strings.NewReader(`{"text":"comment `+strconv.Itoa(i)+`","video_ts_ms":1}`))
		req.Header.Set("Authorization", alice.Token)
		w := httptest.NewRecorder()
		e.API.ServeHTTP(w, req)
		if w.Code != http.StatusCreated {
			b.Fatalf("status %d: %s", w.Code, w.Body)
		}
	}
}
