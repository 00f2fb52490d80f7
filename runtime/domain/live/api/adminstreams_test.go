package api

import (
	"encoding/json"
	"testing"
	"time"
)

func TestStreamsByViewers(t *testing.T) {
	now := time.UnixMilli(1_800_000_000_000)
	rep := func(n int64, age time.Duration) []byte {
		b, _ := json.Marshal(map[string]int64{"n": n, "at": now.Add(-age).UnixMilli()})
		return b
	}
	reports := map[string][]byte{
		"live/viewers/10/gw-a": rep(5, time.Second),
		"live/viewers/10/gw-b": rep(7, time.Second),
		"live/viewers/20/gw-a": rep(30, time.Second),
		"live/viewers/30/gw-a": rep(99, time.Minute), // stale: its gateway stopped reporting
		"live/viewers/40/gw-a": rep(0, time.Second),
		"live/viewers/bad":     rep(1, 0),
	}
	got := streamsByViewers(reports, map[string][]byte{"live/sampled/20": nil}, now)
	want := []StreamViewers{{StreamID: "20", Viewers: 30, Gateways: 1, Sampled: true}, {StreamID: "10", Viewers: 12, Gateways: 2}}
	if len(got) != len(want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("row %d = %+v, want %+v", i, got[i], want[i])
		}
	}
}
