package live

import (
	"testing"
	"time"
)

// Stop waits for a delivery in progress, and nothing is delivered after it.
func TestGatedStopWaitsAndDrops(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	var got []string
	g := NewGated(func(b []byte) {
		got = append(got, string(b))
		if string(b) == "slow" {
			close(entered)
			<-release
		}
	})
	go g.Deliver([]byte("slow"))
	<-entered
	stopped := make(chan struct{})
	go func() { g.Stop(); close(stopped) }()
	select {
	case <-stopped:
		t.Fatal("Stop returned while a delivery was in progress")
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	<-stopped
	g.Deliver([]byte("late"))
	if len(got) != 1 || got[0] != "slow" {
		t.Fatalf("delivered %q", got)
	}
}
