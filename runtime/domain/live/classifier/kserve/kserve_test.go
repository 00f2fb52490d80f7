package kserve

import (
	"context"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/concord-chat/concord/runtime/domain/live/classifier/linear"
)

// The client against a KServe v2 server the test starts (serving the Go
// model): the scores are the model's (to FP32 precision), readiness and
// an unknown model are reported, and the server's error reaches the
// caller.
func TestClientAgainstServer(t *testing.T) {
	m, err := linear.Default()
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer((&Server{Model: "offensive", Classifier: m}).Handler())
	defer srv.Close()
	ctx := context.Background()
	c, err := New(Config{URL: srv.URL, Model: "offensive"})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Ready(ctx); err != nil {
		t.Fatal(err)
	}
	texts := []string{"what a great stream", "shut up you moron", "", "ok"}
	got, err := c.Score(ctx, texts)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := m.Score(ctx, texts)
	for i := range texts {
		if math.Abs(got[i]-want[i]) > 1e-6 {
			t.Fatalf("%q: server %v, model %v", texts[i], got[i], want[i])
		}
	}
	if got[1] < 0.5 || got[0] > 0.5 {
		t.Fatalf("scores do not separate: %v", got)
	}
	other, _ := New(Config{URL: srv.URL, Model: "nope"})
	if err := other.Ready(ctx); err == nil {
		t.Fatal("an unknown model is ready")
	}
	if _, err := other.Score(ctx, texts); err == nil || !strings.Contains(err.Error(), "404") {
		t.Fatalf("unknown model: %v", err)
	}
	wrongOut, _ := New(Config{URL: srv.URL, Model: "offensive", Output: "probabilities"})
	if _, err := wrongOut.Score(ctx, texts); err == nil {
		t.Fatal("a missing output tensor was not an error")
	}
	down := httptest.NewServer(http.NotFoundHandler())
	down.Close()
	gone, _ := New(Config{URL: down.URL, Model: "offensive"})
	if _, err := gone.Score(ctx, texts); err == nil {
		t.Fatal("an unreachable server was not an error")
	}
}
