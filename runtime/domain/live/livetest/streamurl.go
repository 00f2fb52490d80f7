package livetest

import "testing"

// testStreamURL: stream_url is optional on POST /v1/streams, set and
// cleared by the creator with PATCH, validated as an http(s) URL, and
// absent from the Stream while unset.
func testStreamURL(t *testing.T, e *Env) {
	alice, bob := e.NewUser(), e.NewUser()
	for _, bad := range []any{"ftp://example.com/v.webm", "javascript:alert(1)", "/relative.webm", "https://", "https://user:pw@example.com/v", 5} {
		want(t, e.Do("POST", "/v1/streams", alice.Token, map[string]any{"title": "x", "stream_url": bad}), 400, 50035)
	}
	r := e.Do("POST", "/v1/streams", alice.Token, map[string]any{"title": "Video", "stream_url": "https://media.example.com/live/1.m3u8"})
	if r.Status != 201 {
		t.Fatalf("create = %d %s", r.Status, r.Body)
	}
	m := r.Map(t)
	id, _ := m["id"].(string)
	if m["stream_url"] != "https://media.example.com/live/1.m3u8" {
		t.Fatalf("created stream_url = %v: %s", m["stream_url"], r.Body)
	}
	if g := e.Do("GET", "/v1/streams/"+id, "", nil).Map(t); g["stream_url"] != "https://media.example.com/live/1.m3u8" {
		t.Fatalf("GET stream_url = %v", g["stream_url"])
	}
	want(t, e.Do("PATCH", "/v1/streams/"+id, bob.Token, map[string]any{"stream_url": "https://evil.example.com/v"}), 403, 50013)
	want(t, e.Do("PATCH", "/v1/streams/"+id, alice.Token, map[string]any{"stream_url": "data:video/webm;base64,AAAA"}), 400, 50035)
	p := e.Do("PATCH", "/v1/streams/"+id, alice.Token, map[string]any{"stream_url": "http://127.0.0.1:9000/v.webm"})
	if p.Status != 200 || p.Map(t)["stream_url"] != "http://127.0.0.1:9000/v.webm" {
		t.Fatalf("patch = %d %s", p.Status, p.Body)
	}
	// Other settings leave it alone; "" clears it.
	e.Do("PATCH", "/v1/streams/"+id, alice.Token, map[string]any{"slow_mode_seconds": 0})
	if g := e.Do("GET", "/v1/streams/"+id, "", nil).Map(t); g["stream_url"] != "http://127.0.0.1:9000/v.webm" {
		t.Fatalf("stream_url after another PATCH = %v", g["stream_url"])
	}
	e.Do("PATCH", "/v1/streams/"+id, alice.Token, map[string]any{"stream_url": ""})
	if g := e.Do("GET", "/v1/streams/"+id, "", nil).Map(t); g["stream_url"] != nil {
		t.Fatalf("stream_url after clearing = %v", g["stream_url"])
	}
	// Without one, the Stream has no such key.
	if m := e.Do("POST", "/v1/streams", alice.Token, map[string]any{"title": "No video"}).Map(t); m["stream_url"] != nil {
		t.Fatalf("stream without a URL has stream_url %v", m["stream_url"])
	}
}
