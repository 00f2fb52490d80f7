package liverole

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/concord-chat/concord/runtime/adapters/registry"
	"github.com/concord-chat/concord/runtime/domain/live/board"
	"github.com/concord-chat/concord/runtime/services/wiring"
)

// watchRegistry hands Watch callers the snapshots sent on ch.
type watchRegistry struct {
	registry.Registry
	ch chan registry.Snapshot
}

func (w watchRegistry) Watch(ctx context.Context, role string) (<-chan registry.Snapshot, error) {
	if role != NameGateway {
		return nil, fmt.Errorf("watch %s", role)
	}
	return w.ch, nil
}

// TestForwarderRoutesByStream: GET .../live reaches a live gateway of
// the registry, the same one for every request of a stream; when a
// gateway leaves only its streams move; with none the answer is the
// contract's 503.
func TestForwarderRoutesByStream(t *testing.T) {
	gw := func(name string) (*httptest.Server, registry.Node) {
		s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprintf(w, "%s %s %s", name, r.URL.Path, r.URL.RawQuery)
		}))
		t.Cleanup(s.Close)
		return s, registry.Node{Name: name, Roles: []string{NameGateway}, HTTPAddr: strings.TrimPrefix(s.URL, "http://")}
	}
	_, a := gw("gw-a")
	_, b := gw("gw-b")
	reg := watchRegistry{ch: make(chan registry.Snapshot, 1)}
	f, err := newForwarder(&wiring.Builder{Parts: wiring.Parts{Registry: reg, Logger: slog.New(slog.DiscardHandler)}}, board.New())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go f.Run(ctx)
	mux := http.NewServeMux()
	mux.Handle(patternLive, f)
	front := httptest.NewServer(mux)
	defer front.Close()
	get := func(stream string) (int, string) {
		resp, err := http.Get(front.URL + "/v1/streams/" + stream + "/live?token=t")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	await := func(n int) {
		deadline := time.Now().Add(5 * time.Second)
		for len(*f.nodes.Load()) != n {
			if time.Now().After(deadline) {
				t.Fatalf("forwarder knows %d gateways, want %d", len(*f.nodes.Load()), n)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}

	reg.ch <- registry.Snapshot{Nodes: []registry.Node{{Name: "api-only", Roles: []string{NameAPI}, HTTPAddr: "127.0.0.1:1"}}}
	await(0)
	code, body := get("1")
	var e struct{ Code int }
	json.Unmarshal([]byte(body), &e)
	if code != 503 || e.Code != 130000 {
		t.Fatalf("no gateway = %d %s", code, body)
	}

	reg.ch <- registry.Snapshot{Nodes: []registry.Node{a, b}}
	await(2)
	where := map[string]string{}
	perGateway := map[string]int{}
	for i := range 200 {
		id := fmt.Sprint(1000 + i)
		code, body := get(id)
		name, rest, _ := strings.Cut(body, " ")
		if code != 200 || rest != "/v1/streams/"+id+"/live token=t" {
			t.Fatalf("stream %s = %d %q", id, code, body)
		}
		if _, again := get(id); !strings.HasPrefix(again, name+" ") {
			t.Fatalf("stream %s went to %s, then %s", id, name, again)
		}
		where[id] = name
		perGateway[name]++
	}
	if perGateway["gw-a"] < 50 || perGateway["gw-b"] < 50 {
		t.Fatalf("streams per gateway = %v", perGateway)
	}

	reg.ch <- registry.Snapshot{Nodes: []registry.Node{b}}
	await(1)
	for id, name := range where {
		if _, body := get(id); !strings.HasPrefix(body, "gw-b ") {
			t.Fatalf("stream %s (was on %s) = %q after gw-a left", id, name, body)
		}
	}
}
