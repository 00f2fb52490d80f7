package livetest_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/concord-chat/concord/runtime/domain/live/livetest"
)

// testClock is the router's injected clock.
type testClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *testClock) set(t time.Time) {
	c.mu.Lock()
	c.now = t
	c.mu.Unlock()
}

// Sampled mode over HTTP, on the router's injected clock: 60 comments a
// second for 10 s switch the stream to sampled; GET /v1/streams/{id}
// then says "sampled": true and the viewer is sent `state` with sampled
// true; 30 quiet seconds later GET says false again and the next comment
// brings the viewer `state` with sampled false.
func TestSampledModeOverHTTP(t *testing.T) {
	start := time.Unix(3_000_000, 0)
	clk := &testClock{now: start}
	e := livetest.Start(t, livetest.Backends{}, livetest.Options{RouterNow: clk.Now})
	alice := e.NewUser()
	s := e.CreateStream(alice, "busy")
	v := livetest.Watch(t, e.URL, s.ID, nil, "")
	sampled := func(data []byte) bool {
		var st struct {
			Sampled *bool `json:"sampled"`
		}
		if err := json.Unmarshal(data, &st); err != nil || st.Sampled == nil {
			t.Fatalf("no sampled field in %s", data)
		}
		return *st.Sampled
	}
	if ev := v.Next(livetest.Wait, "state"); sampled(ev.Data) {
		t.Fatalf("a new stream opens sampled: %s", ev.Data)
	}
	get := func() bool {
		r := e.Do(http.MethodGet, "/v1/streams/"+s.ID, alice.Token, nil)
		if r.Status != http.StatusOK {
			t.Fatalf("GET stream: %d %s", r.Status, r.Body)
		}
		return sampled(r.Body)
	}

	// The creator (exempt from the per-user interval) posts 60 a second
	// of the router's clock (within its first 800 ms), and the viewer
	// reads them all before the clock moves to the next second, so the
	// router counted each second's comments in it.
	const perSecond = 60
	for sec := range 10 {
		at := start.Add(time.Duration(sec) * time.Second)
		for i := range perSecond {
			clk.set(at.Add(time.Duration(i) * 800 * time.Millisecond / perSecond))
			e.Post(alice, s.ID, fmt.Sprintf("second %d comment %d", sec, i), 0)
		}
		clk.set(at.Add(990 * time.Millisecond))
		v.Comments(perSecond, livetest.Wait)
		if get() {
			t.Fatalf("sampled after %d s", sec+1)
		}
	}
	// The next comment closes the tenth busy second: the mode switches
	// before its batch, and the viewer is told first.
	clk.set(start.Add(10 * time.Second))
	e.Post(alice, s.ID, "the one that tips it", 0)
	if ev := v.Next(livetest.Wait, "state"); !sampled(ev.Data) {
		t.Fatalf("state after 10 s above 50/s: %s", ev.Data)
	}
	if !get() {
		t.Fatal(`GET /v1/streams/{id}: "sampled" false on a sampled stream`)
	}

	// Quiet for 30 s of the router's clock: it leaves (its one-second
	// check sees the silence), GET says so at once, viewers with the next
	// batch.
	clk.set(start.Add(41 * time.Second))
	e.Eventually(livetest.Wait, func() string {
		if get() {
			return "still sampled after 31 quiet seconds"
		}
		return ""
	})
	e.Post(alice, s.ID, "after the quiet", 0)
	if ev := v.Next(livetest.Wait, "state"); sampled(ev.Data) {
		t.Fatalf("state after 30 s below 30/s: %s", ev.Data)
	}
}
