package route

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestDefaultVersion(t *testing.T) {
	var got, gotRaw string
	h := DefaultVersion(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, gotRaw = r.URL.Path, r.URL.RawPath
	}))
	for _, c := range []struct{ in, want string }{
		{"/api/webhooks/1/tok", "/api/v10/webhooks/1/tok"},
		{"/api/v9/channels/1", "/api/v9/channels/1"},
		{"/api/v10/gateway", "/api/v10/gateway"},
		{"/api/v6/gateway", "/api/v6/gateway"},
		{"/api/videos", "/api/v10/videos"},
		{"/api/v", "/api/v10/v"},
		{"/healthz", "/healthz"},
	} {
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("POST", c.in, nil))
		if got != c.want {
			t.Errorf("%s served as %s, want %s", c.in, got, c.want)
		}
	}
	// An escaped segment keeps its escaping.
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("PUT", "/api/channels/1/messages/2/reactions/a%2Fb/@me", nil))
	if got != "/api/v10/channels/1/messages/2/reactions/a/b/@me" || gotRaw != "/api/v10/channels/1/messages/2/reactions/a%2Fb/@me" {
		t.Errorf("escaped path served as %q (raw %q)", got, gotRaw)
	}
}
