package snowflake

import (
	"testing"
	"time"
)

func TestWallClockTracksTimeNow(t *testing.T) {
	var c wallClock
	c.resync()
	deadline := time.Now().Add(WallResync + 50*time.Millisecond)
	for time.Now().Before(deadline) {
		before := time.Now().UnixMilli()
		got := c.unixMilli()
		after := time.Now().UnixMilli()
		if got < before-1 || got > after+1 {
			t.Fatalf("wall clock %d not within [%d, %d]", got, before, after)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestWallClockSeesAStepWithinResync(t *testing.T) {
	var c wallClock
	now := time.Now()
	// An anchor taken before the wall clock stepped back by 5 s: the
	// clock runs 5 s ahead until the next resync.
	c.anchor.Store(&wallAnchor{at: now, wallNs: now.UnixNano() + int64(5*time.Second)})
	if got := c.unixMilli(); got < now.UnixMilli()+4900 {
		t.Fatalf("before resync: %d", got)
	}
	c.anchor.Store(&wallAnchor{at: now.Add(-WallResync), wallNs: now.Add(-WallResync).UnixNano() + int64(5*time.Second)})
	if got, want := c.unixMilli(), time.Now().UnixMilli(); got < want-1 || got > want+1 {
		t.Fatalf("after resync: %d, want %d", got, want)
	}
}
