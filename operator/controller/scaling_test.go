package controller

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func TestDesiredRelays(t *testing.T) {
	for _, c := range []struct {
		online, per int64
		lo, hi      int32
		want        int32
	}{
		{0, 15000, 1, 20, 1},
		{15000, 15000, 1, 20, 1},
		{15001, 15000, 1, 20, 2},
		{40000, 15000, 1, 20, 3},
		{1_000_000, 15000, 1, 20, 20},
		{100, 15000, 0, 5, 1},
		{0, 15000, 0, 5, 0},
		{30000, 0, 1, 20, 2}, // unset per-relay: 15,000
	} {
		if got := desiredRelays(c.online, c.per, c.lo, c.hi); got != c.want {
			t.Errorf("desiredRelays(%d, %d, %d, %d) = %d, want %d", c.online, c.per, c.lo, c.hi, got, c.want)
		}
	}
}

func TestDesiredServersBufferPolicy(t *testing.T) {
	for _, c := range []struct {
		participants int64
		buffer       intstr.IntOrString
		want         int32
	}{
		{0, intstr.FromInt32(1), 1},
		{150, intstr.FromInt32(1), 3},      // ceil(1.5) + 1
		{200, intstr.FromInt32(2), 4},      // 2 full + 2 free
		{0, intstr.FromString("20%"), 1},   // always some free capacity
		{400, intstr.FromString("20%"), 5}, // 400 / 0.8 = 500 → 5 servers
		{401, intstr.FromString("20%"), 6},
		{100_000, intstr.FromInt32(1), 10}, // max
	} {
		if got := desiredServers(c.participants, 100, c.buffer, 1, 10); got != c.want {
			t.Errorf("desiredServers(%d, buffer %s) = %d, want %d", c.participants, c.buffer.String(), got, c.want)
		}
	}
}

func TestPickVictimsAndSuccessor(t *testing.T) {
	now := time.Now()
	pod := func(name string, age time.Duration) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(now.Add(-age))}}
	}
	pods := []gatewayPod{
		{pod: pod("busy", time.Hour), ready: true, current: true, sessions: 900},
		{pod: pod("light", time.Hour), ready: true, current: true, sessions: 10},
		{pod: pod("old", time.Hour), ready: true, current: false, sessions: 5000},
		{pod: pod("broken", time.Hour), ready: false, current: true, sessions: 0},
		{pod: pod("light-young", time.Minute), ready: true, current: true, sessions: 10},
	}
	var got []string
	for _, v := range pickVictims(pods, 5) {
		got = append(got, v.pod.Name)
	}
	want := []string{"broken", "old", "light-young", "light", "busy"}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("victim order = %v, want %v", got, want)
		}
	}
	succ := pickSuccessor(pods, map[string]bool{"light": true, "light-young": true})
	if succ == nil || succ.pod.Name != "busy" {
		t.Fatalf("successor = %v, want busy (ready, current, not leaving; old is outdated)", succ)
	}
	if pickSuccessor(pods[3:4], nil) != nil {
		t.Fatal("a pod that is not ready cannot be a successor")
	}
}
