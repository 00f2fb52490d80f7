package guild

import (
	"runtime"
	"testing"
	"time"

	"github.com/concord-chat/concord/runtime/domain/event"
)

func TestStatsQuantilesOverRecentWindow(t *testing.T) {
	var st actorStats
	now := time.Unix(1_000_000, 0)
	if p50, p99, n := st.quantiles(now, StatsWindow); p50 != 0 || p99 != 0 || n != 0 {
		t.Fatalf("empty stats = %v %v %d, want zeros", p50, p99, n)
	}
	// 100 events of 1..100 ms, dispatched now.
	for i := 1; i <= 100; i++ {
		st.observe(now, time.Duration(i)*time.Millisecond)
	}
	if p50, p99, n := st.quantiles(now, StatsWindow); p50 != 50*time.Millisecond || p99 != 99*time.Millisecond || n != 100 {
		t.Fatalf("quantiles = p50 %v p99 %v n %d, want 50ms 99ms 100", p50, p99, n)
	}
	// The ring keeps the latest statsSamples events: a burst of 1 s ages
	// replaces every older one.
	for range statsSamples {
		st.observe(now, time.Second)
	}
	if p50, p99, n := st.quantiles(now, StatsWindow); p50 != time.Second || p99 != time.Second || n != statsSamples {
		t.Fatalf("after the burst: p50 %v p99 %v n %d, want 1s 1s %d", p50, p99, n, statsSamples)
	}
	// Past the window, an idle guild reports nothing.
	later := now.Add(StatsWindow + time.Second)
	if p50, p99, n := st.quantiles(later, StatsWindow); p50 != 0 || p99 != 0 || n != 0 {
		t.Fatalf("after the window: %v %v %d, want zeros", p50, p99, n)
	}
	// Only the events inside the window count.
	st.observe(later, 3*time.Millisecond)
	if p50, p99, n := st.quantiles(later, StatsWindow); p50 != 3*time.Millisecond || p99 != 3*time.Millisecond || n != 1 {
		t.Fatalf("one recent event: %v %v %d", p50, p99, n)
	}
}

func TestGuildStatsOfLoadedGuild(t *testing.T) {
	f := newFixture(t)
	g := f.secretGuild()
	gid := g.guild.Guild.ID

	if _, ok := f.svc.GuildStats(gid + 1); ok {
		t.Fatal("GuildStats of a guild without an actor: ok")
	}
	f.session(g.owner, "a1", 1<<0|1<<9, 1)
	f.session(g.member, "b1", 1<<0|1<<9, 1)
	st, ok := f.svc.GuildStats(gid)
	if !ok {
		t.Fatal("GuildStats of a loaded guild: not ok")
	}
	if st.GuildID != gid || st.Online != 2 || st.Members != 2 || st.QueueLength != 0 {
		t.Fatalf("stats = %+v, want guild %d online 2 members 2 queue 0", st, gid)
	}
	if st.Events == 0 {
		t.Fatalf("stats count no events after loading and subscribing: %+v", st)
	}

	// Hold the actor, queue 5 operations behind it: the queue length is
	// visible while the actor is busy, and once they ran their ages (at
	// least the hold) show in p99.
	a, err := f.svc.actor(gid)
	if err != nil {
		t.Fatal(err)
	}
	release, held := make(chan struct{}), make(chan struct{})
	if err := a.enqueue(bg, func(*Actor) { close(held); <-release }); err != nil {
		t.Fatal(err)
	}
	<-held
	done := make(chan struct{}, 5)
	for range 5 {
		if err := f.svc.post(bg, gid, func(*Actor) { done <- struct{}{} }); err != nil {
			t.Fatal(err)
		}
	}
	if st, _ := f.svc.GuildStats(gid); st.QueueLength != 5 {
		t.Fatalf("queue length while the actor is held = %d, want 5", st.QueueLength)
	}
	const hold = 5 * time.Millisecond
	time.Sleep(hold) // the queued operations wait at least this long
	close(release)
	for range 5 {
		<-done
	}
	st, _ = f.svc.GuildStats(gid)
	if st.QueueLength != 0 || st.EventAgeP99 < hold || st.EventAgeP50 > st.EventAgeP99 {
		t.Fatalf("after the held operations: %+v, want queue 0 and p99 >= %v >= p50", st, hold)
	}

	// A detached session leaves the online count (the detach is posted
	// to the actor: wait for it to run).
	if err := f.svc.DetachSession(bg, gid, event.Session{ID: "b1", UserID: g.member.ID, Node: "node-b"}); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); ; {
		st, _ := f.svc.GuildStats(gid)
		if st.Online == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("online after a detach = %d, want 1", st.Online)
		}
		runtime.Gosched()
	}

	all := f.svc.AllGuildStats()
	if len(all) != 1 || all[0].GuildID != gid {
		t.Fatalf("AllGuildStats = %+v, want the one loaded guild", all)
	}
}

// VoiceCalls counts the channels with a call: one per channel however
// many are in it, none once the last one left.
func TestGuildStatsVoiceCalls(t *testing.T) {
	f := newVoiceFixture(t)
	calls := func() int {
		t.Helper()
		st, ok := f.svc.GuildStats(f.gid)
		if !ok {
			t.Fatal("GuildStats of a loaded guild: not ok")
		}
		return st.VoiceCalls
	}
	if n := calls(); n != 0 {
		t.Fatalf("voice calls before any join = %d, want 0", n)
	}
	if err := f.join(f.aliceS, f.open.ID); err != nil {
		t.Fatal(err)
	}
	if err := f.join(f.bobS, f.open.ID); err != nil {
		t.Fatal(err)
	}
	if n := calls(); n != 1 {
		t.Fatalf("voice calls with two in one channel = %d, want 1", n)
	}
	if err := f.join(f.ownerS, f.limited.ID); err != nil {
		t.Fatal(err)
	}
	if n := calls(); n != 2 {
		t.Fatalf("voice calls with two channels in use = %d, want 2", n)
	}
	for _, s := range []event.Session{f.aliceS, f.bobS, f.ownerS} {
		if err := f.join(s, 0); err != nil {
			t.Fatal(err)
		}
	}
	if n := calls(); n != 0 {
		t.Fatalf("voice calls after everyone left = %d, want 0", n)
	}
}
