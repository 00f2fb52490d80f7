package gatewayrole

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/concord-chat/concord/runtime/base/adminapi"

	"github.com/concord-chat/concord/runtime/domain/event"
	"github.com/concord-chat/concord/runtime/edge/gateway"
)

// noGuilds is a gateway.Backend that admits nobody.
type noGuilds struct{}

func (noGuilds) Identify(context.Context, string, event.Session) (event.Ready, error) {
	return event.Ready{}, gateway.ErrAuthenticationFailed
}
func (noGuilds) Subscribe(context.Context, event.Session) error { return nil }
func (noGuilds) Disconnect(context.Context, event.Session)      {}

// The drain endpoints of both modes: a bad body or a successor where no
// hand-off runs is refused and starts nothing; a drain takes readiness
// away, refuses identifies, and says done once no session is left.
func TestDrainEndpoints(t *testing.T) {
	node, err := gateway.NewNode(gateway.Config{Node: "gw-test", Logger: slog.New(slog.DiscardHandler)}, noGuilds{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { node.Close() })
	d := &drainer{node: node, self: "gw-test", log: slog.New(slog.DiscardHandler)}
	mux := http.NewServeMux()
	d.routes(mux)
	call := func(method, body string) (int, adminapi.DrainState) {
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest(method, "/admin/drain", strings.NewReader(body)))
		var st adminapi.DrainState
		_ = json.Unmarshal(rec.Body.Bytes(), &st)
		return rec.Code, st
	}
	for _, body := range []string{"{not json", `{"successor":"gw-2"}`, `{"successor":"gw-2","successorAddress":"127.0.0.1:1"}`} {
		if code, _ := call("POST", body); code != http.StatusBadRequest {
			t.Fatalf("POST /admin/drain %s: %d, want 400", body, code)
		}
	}
	if d.ready() != nil || node.Draining() {
		t.Fatal("a refused drain request started a drain")
	}
	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest("POST", "/admin/sessions", strings.NewReader(`{"sessions":[]}`)))
	if rec.Code != http.StatusNotFound && rec.Code != http.StatusMethodNotAllowed {
		t.Fatalf("hand-off endpoint served without hand-off: %d", rec.Code)
	}
	code, st := call("POST", "")
	if code != http.StatusOK || !st.Draining {
		t.Fatalf("POST /admin/drain: %d %+v, want 200 draining", code, st)
	}
	if d.ready() == nil {
		t.Fatal("ready while draining")
	}
	deadline := time.Now().Add(30 * time.Second)
	for _, st = call("GET", ""); !st.Done; _, st = call("GET", "") {
		if time.Now().After(deadline) {
			t.Fatalf("drain of a node without sessions not done within 30 s: %+v", st)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
