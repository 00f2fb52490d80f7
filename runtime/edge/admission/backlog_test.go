package admission

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/concord-chat/concord/runtime/domain/event"
	"github.com/concord-chat/concord/runtime/edge/gateway"
)

// blockingIdentify holds every identify until release closes, telling
// entered when one arrives.
type blockingIdentify struct {
	gateway.Backend
	entered chan struct{}
	release chan struct{}
}

func (b *blockingIdentify) Identify(ctx context.Context, _ string, _ event.Session) (event.Ready, error) {
	b.entered <- struct{}{}
	<-b.release
	return event.Ready{UserID: 7}, nil
}

// The backlog gauge counts the identifies past the throttle waiting for
// their lookups, and falls back when they are answered.
func TestAdmissionBacklog(t *testing.T) {
	next := &blockingIdentify{entered: make(chan struct{}), release: make(chan struct{})}
	a, err := New(next, Config{Registerer: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 3)
	for range 3 {
		go func() {
			_, err := a.Identify(context.Background(), "t", event.Session{})
			done <- err
		}()
		<-next.entered
	}
	if got := testutil.ToFloat64(a.m.backlog); got != 3 {
		t.Fatalf("backlog with 3 identifies waiting = %v, want 3", got)
	}
	close(next.release)
	for range 3 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	if got := testutil.ToFloat64(a.m.backlog); got != 0 {
		t.Fatalf("backlog after the answers = %v, want 0", got)
	}
}
