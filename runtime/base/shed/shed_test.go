package shed

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestOrder: as pressure rises, kinds are shed in order: presence, typing,
// member list, messages; each drop is counted under its kind.
func TestOrder(t *testing.T) {
	reg := prometheus.NewRegistry()
	s, err := New(Config{MaxAge: 100 * time.Millisecond, MaxQueue: 1000, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	kinds := []Kind{Presence, Typing, MemberList, Message}
	tests := []struct {
		p     Pressure
		admit []bool
	}{
		{Pressure{Age: 50 * time.Millisecond, Queue: 10}, []bool{true, true, true, true}},
		{Pressure{Age: 100 * time.Millisecond}, []bool{false, true, true, true}},
		{Pressure{Queue: 2500}, []bool{false, false, true, true}},
		{Pressure{Age: 500 * time.Millisecond}, []bool{false, false, false, true}},
		{Pressure{Age: time.Second, Queue: 5}, []bool{false, false, false, false}},
	}
	for _, tt := range tests {
		for i, k := range kinds {
			if got := s.Admit(k, tt.p, 3); got != tt.admit[i] {
				t.Errorf("pressure %+v kind %s: admit %v, want %v", tt.p, k, got, tt.admit[i])
			}
		}
	}
	want := map[Kind]float64{Presence: 12, Typing: 9, MemberList: 6, Message: 3}
	for k, n := range want {
		if got := testutil.ToFloat64(s.Shed(k)); got != n {
			t.Errorf("shed %s = %v, want %v", k, got, n)
		}
	}
	if n, err := testutil.GatherAndCount(reg, "concord_guild_shed_total"); err != nil || n != 4 {
		t.Fatalf("series = %d, %v", n, err)
	}
}

func TestBadLevels(t *testing.T) {
	if _, err := New(Config{Levels: [4]float64{2, 1, 3, 4}}); err == nil {
		t.Fatal("decreasing levels accepted")
	}
}
