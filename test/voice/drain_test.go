package voice

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/concord-chat/concord/runtime/domain/voice"
	"github.com/concord-chat/concord/runtime/edge/adminauth"
)

// loadRecorder is a voice.LoadReporter keeping every report.
type loadRecorder chan voice.Load

func (r loadRecorder) ReportLoad(_ context.Context, l voice.Load) error {
	select {
	case r <- l:
	default:
	}
	return nil
}

// TestDrain: a drained server reports it at once (not at the end of its
// period), counts the call it still hosts, and is drained once its
// participants are gone — one leaving cleanly, one whose socket just
// dropped, which while draining leaves at once rather than after the
// resume window.
func TestDrain(t *testing.T) {
	loads := make(loadRecorder, 16)
	s := startSFU(t, func(c *voice.Config) {
		c.Load = loads
		c.LoadInterval = time.Hour // only the start and the drain make a report
		c.ResumeWindow = time.Hour // a dropped socket would otherwise keep its session
	})
	// The server reports once when it starts (so the fleet knows it at
	// once), idle and not draining.
	select {
	case l := <-loads:
		if l.Draining || l.Calls != 0 {
			t.Fatalf("the start's load report: %+v, want idle and not draining", l)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("no load report at the start (the period is an hour: the first report goes out at once)")
	}
	ctx := ctxT(t)
	a := s.connect(ctx, s.newUser(channelID), "")
	b := s.connect(ctx, s.newUser(channelID), "")
	// Audio flows before the drain: a's first packet reaches b.
	deadline := time.Now().Add(20 * time.Second)
	for {
		if err := a.SendOpus(opus(40)); err != nil {
			t.Fatal(err)
		}
		if _, err := b.Recv(time.Now().Add(200 * time.Millisecond)); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no packet forwarded before the drain")
		}
	}
	if st := s.srv.DrainState(); st.Draining || st.Done || st.Sessions != 1 || st.Participants != 2 {
		t.Fatalf("before the drain: %+v, want not draining, 1 call of 2", st)
	}

	s.srv.Drain(time.Time{})
	select {
	case l := <-loads:
		if !l.Draining || l.Calls != 1 || l.Participants != 2 {
			t.Fatalf("the drain's load report: %+v, want draining with 1 call of 2", l)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("no load report after the drain (the period is an hour: the drain must report at once)")
	}
	if st := s.srv.DrainState(); !st.Draining || st.Done || st.Sessions != 1 {
		t.Fatalf("draining with a call left: %+v, want draining, not done, 1 call", st)
	}
	// The call stays up while it moves: audio still flows here.
	for {
		_ = a.SendOpus(opus(40))
		if _, err := b.Recv(time.Now().Add(200 * time.Millisecond)); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("a draining server stopped forwarding its calls' audio before they moved")
		}
	}

	a.Close()
	b.Drop()
	// The sessions end on their sockets' closes; the state has no event
	// to await, so it is polled (bounded).
	deadline = time.Now().Add(20 * time.Second)
	for st := s.srv.DrainState(); !st.Done || st.Sessions != 0 || st.Participants != 0; st = s.srv.DrainState() {
		if time.Now().After(deadline) {
			t.Fatalf("participants gone but the drain is not done: %+v (a dropped socket must not wait out the resume window)", st)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if l := s.srv.Load(); l.Calls != 0 || !l.Draining {
		t.Fatalf("drained server's load: %+v", l)
	}
}

// TestDrainDeadline: a drain whose deadline passed is done even with a
// call left (the operator deletes the pod then).
func TestDrainDeadline(t *testing.T) {
	s := startSFU(t, nil)
	ctx := ctxT(t)
	s.connect(ctx, s.newUser(channelID), "")
	s.srv.Drain(time.Now().Add(-time.Second))
	if st := s.srv.DrainState(); !st.Draining || !st.Done || st.Sessions != 1 {
		t.Fatalf("past the deadline: %+v, want done with the call still counted", st)
	}
}

// TestDrainAdminRoutes: the drain and load endpoints behind the admin
// token, as a process mounts them: refused without it, idempotent with it,
// answering the operator's DrainState shape.
func TestDrainAdminRoutes(t *testing.T) {
	s := startSFU(t, nil)
	ctx := ctxT(t)
	s.connect(ctx, s.newUser(channelID), "")
	mux := http.NewServeMux()
	s.srv.AdminRoutes(mux, true)
	hs := httptest.NewServer(adminauth.Guard("the-admin-token", mux))
	t.Cleanup(hs.Close)
	call := func(method, path, token, body string) (int, map[string]any) {
		t.Helper()
		req, _ := http.NewRequest(method, hs.URL+path, strings.NewReader(body))
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&out)
		return resp.StatusCode, out
	}
	for _, tok := range []string{"", "another-token"} {
		for _, path := range []string{"/admin/drain", "/admin/voice/drain"} {
			if code, _ := call("POST", path, tok, ""); code != http.StatusUnauthorized {
				t.Fatalf("POST %s with token %q: %d, want 401", path, tok, code)
			}
		}
	}
	if s.srv.DrainState().Draining {
		t.Fatal("an unauthenticated drain drained the server")
	}
	if code, _ := call("POST", "/admin/drain", "the-admin-token", "{not json"); code != http.StatusBadRequest {
		t.Fatalf("malformed body: %d, want 400", code)
	}
	code, st := call("POST", "/admin/drain", "the-admin-token", "")
	if code != http.StatusOK || st["draining"] != true || st["sessions"] != float64(1) || st["done"] != false {
		t.Fatalf("POST /admin/drain: %d %v, want 200 draining with 1 call, not done", code, st)
	}
	for _, path := range []string{"/admin/drain", "/admin/voice/drain"} {
		if code, st := call("GET", path, "the-admin-token", ""); code != http.StatusOK || st["draining"] != true {
			t.Fatalf("GET %s: %d %v", path, code, st)
		}
	}
	if code, l := call("GET", "/admin/voice/load", "the-admin-token", ""); code != http.StatusOK || l["activeCalls"] != float64(1) || l["draining"] != true {
		t.Fatalf("GET /admin/voice/load: %d %v", code, l)
	}
}
