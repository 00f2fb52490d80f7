package livetest_test

import (
	"encoding/json"
	"testing"

	"github.com/concord-chat/concord/runtime/domain/live/livetest"
)

// FuzzRequestBodies sends arbitrary bytes as the body of every JSON
// endpoint: the answer is never a 5xx, and every error is the contract's
// {"code", "message"} JSON.
func FuzzRequestBodies(f *testing.F) {
	for _, s := range []string{`{"text":"hi","video_ts_ms":5,"nonce":"x"}`, `{"text":null}`, `{"batch_id":"b","counts":{"heart":2}}`,
		`{"slow_mode_seconds":3,"blocked_terms":["a"]}`, `{"remove_recent":true}`, `{"reason":"r"}`, `{"title":"t"}`, `[`, `{"nonce":1e400}`} {
		f.Add([]byte(s), uint8(0))
	}
	e := livetest.Start(f, livetest.Backends{}, livetest.Options{})
	alice := e.NewUser()
	s := e.CreateStream(alice, "fuzz")
	c := e.Post(alice, s.ID, "target", 0)
	bob := e.NewUser()
	routes := []struct{ method, path string }{
		{"POST", "/v1/streams/" + s.ID + "/comments"},
		{"POST", "/v1/streams/" + s.ID + "/reactions"},
		{"PATCH", "/v1/streams/" + s.ID},
		{"PUT", "/v1/streams/" + s.ID + "/bans/" + bob.ID.String()},
		{"POST", "/v1/streams/" + s.ID + "/comments/" + c.ID + "/reports"},
		{"POST", "/v1/streams"},
	}
	f.Fuzz(func(t *testing.T, body []byte, route uint8) {
		e.T = t
		rt := routes[int(route)%len(routes)]
		r := e.Do(rt.method, rt.path, alice.Token, string(body))
		if r.Status >= 500 {
			t.Fatalf("%s %s %q = %d %s", rt.method, rt.path, body, r.Status, r.Body)
		}
		if r.Status >= 400 {
			var m struct {
				Code    *int    `json:"code"`
				Message *string `json:"message"`
			}
			if json.Unmarshal(r.Body, &m) != nil || m.Code == nil || m.Message == nil {
				t.Fatalf("error body %s", r.Body)
			}
		}
	})
}
