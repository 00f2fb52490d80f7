package livetest_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/concord-chat/concord/runtime/domain/live/livetest"
)

// TestManyViewersGetEverything posts a burst faster than the flush
// interval to many viewers: each must get every comment once, in order.
// (The shared-buffer bug the post-to-screen benchmark found at 2,000
// viewers does not show at this size; the benchmark fails on it.)
func TestManyViewersGetEverything(t *testing.T) {
	if testing.Short() {
		t.Skip("burst of 300 viewers; run without -short")
	}
	e := livetest.Start(t, livetest.Backends{}, livetest.Options{})
	alice := e.NewUser()
	s := e.CreateStream(alice, "burst")
	var vs []*livetest.Viewer
	for range 300 {
		v := livetest.Watch(t, e.URL, s.ID, nil, "")
		vs = append(vs, v)
	}
	for _, v := range vs {
		v.Next(livetest.Wait, "state")
	}
	var posted []livetest.Comment
	for i := range 60 {
		posted = append(posted, e.Post(alice, s.ID, fmt.Sprintf("burst %d", i), 0))
		if i%7 == 0 {
			time.Sleep(60 * time.Millisecond)
		}
	}
	for n, v := range vs {
		got := v.Comments(len(posted), 30*time.Second)
		for i, c := range got {
			if c.ID != posted[i].ID {
				t.Fatalf("viewer %d: comment %d = %q, want %q", n, i, c.Text, posted[i].Text)
			}
		}
	}
}
