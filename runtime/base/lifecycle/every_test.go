package lifecycle

import (
	"context"
	"testing"
	"time"
)

// Every calls f with its context until the context ends, then returns.
func TestEvery(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	calls := 0
	done := make(chan struct{})
	go func() {
		defer close(done)
		Every(ctx, time.Millisecond, func(got context.Context) {
			if got != ctx {
				t.Error("f called with another context")
			}
			if calls++; calls == 3 {
				cancel()
			}
		})
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Every did not return once its context ended")
	}
	if calls != 3 {
		t.Fatalf("f called %d times, want 3 (the last one ended the context)", calls)
	}
}
