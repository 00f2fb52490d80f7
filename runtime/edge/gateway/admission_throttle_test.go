package gateway

import (
	"testing"
	"time"
)

// TestNodeThrottle: a full bucket admits Burst at once, then one identify
// per 1/Rate; a nil throttle (rate 0) admits everything.
func TestNodeThrottle(t *testing.T) {
	now := time.Unix(1000, 0)
	th := NewNodeThrottle(10, 3, func() time.Time { return now })
	for i := range 3 {
		if ok, _ := th.Allow(); !ok {
			t.Fatalf("identify %d of the burst refused", i+1)
		}
	}
	ok, retry := th.Allow()
	if ok || retry <= 0 || retry > 100*time.Millisecond {
		t.Fatalf("identify past the burst: ok %v retry %v, want refused with retry ≤ 100ms", ok, retry)
	}
	now = now.Add(100 * time.Millisecond)
	if ok, _ := th.Allow(); !ok {
		t.Fatal("identify after one refill period refused")
	}
	if ok, _ := th.Allow(); ok {
		t.Fatal("second identify in one refill period admitted")
	}
	now = now.Add(time.Hour)
	for i := range 3 {
		if ok, _ := th.Allow(); !ok {
			t.Fatalf("identify %d after a quiet hour refused: the bucket must refill to Burst", i+1)
		}
	}
	if ok, _ := th.Allow(); ok {
		t.Fatal("the bucket refilled past Burst")
	}
	var off *NodeThrottle = NewNodeThrottle(0, 5, nil)
	if off != nil {
		t.Fatal("rate 0 built a throttle")
	}
	for range 1000 {
		if ok, _ := off.Allow(); !ok {
			t.Fatal("a nil throttle refused")
		}
	}
}
