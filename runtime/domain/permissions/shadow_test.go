package permissions

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/concord-chat/concord/runtime/base/snowflake"
)

// TestShadowCountsCorruptedCache corrupts one cached entry of a real
// engine and checks that the shadow check, comparing Channel with Compute
// over the same inputs, counts and logs exactly that decision.
func TestShadowCountsCorruptedCache(t *testing.T) {
	const (
		gid   snowflake.ID = 100
		owner snowflake.ID = 1
		alice snowflake.ID = 2
		bob   snowflake.ID = 3
		mods  snowflake.ID = 200
		ch    snowflake.ID = 300
	)
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	roles := map[snowflake.ID]Bits{gid: ViewChannel | SendMessages, mods: ManageMessages}
	ows := []Overwrite{{ID: gid, Deny: ViewChannel}, {ID: mods, Allow: ViewChannel}}
	members := map[snowflake.ID]Member{alice: {UserID: alice, Roles: []snowflake.ID{mods}}, bob: {UserID: bob}}

	e := NewEngine(gid, owner)
	for id, b := range roles {
		e.SetRole(id, b)
	}
	e.SetOverwrites(ch, ows)
	for _, m := range members {
		e.SetMember(m)
	}
	reg := prometheus.NewRegistry()
	var logs bytes.Buffer
	s, err := NewShadow(ShadowConfig{Every: 1, Registerer: reg, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	check := func(user snowflake.ID) bool {
		if !s.Sample() {
			t.Fatal("Every: 1 did not sample")
		}
		fresh := Compute(Inputs{GuildID: gid, OwnerID: owner, Member: members[user], Overwrites: ows, Now: now,
			Role: func(id snowflake.ID) (Bits, bool) { b, ok := roles[id]; return b, ok }})
		return s.Record(DecisionFanout, gid, user, ch, e.Channel(user, ch, now), fresh)
	}
	if !check(alice) || !check(bob) {
		t.Fatal("an intact engine disagrees with Compute")
	}
	// Corrupt bob's cached entry: the hidden channel becomes visible.
	c := e.channels[ch]
	set := e.members[bob].set
	if c.cache[set] == 0 {
		t.Fatal("bob's entry was not cached")
	}
	c.cache[set] = (ViewChannel | SendMessages) | cachedFlag
	if e.Channel(bob, ch, now)&ViewChannel == 0 {
		t.Fatal("corruption did not reach Channel")
	}
	if check(bob) {
		t.Fatal("the shadow check agreed with a corrupted cache")
	}
	if !check(alice) {
		t.Fatal("alice's intact entry disagrees")
	}
	if got := testutil.ToFloat64(s.checks.WithLabelValues("fanout")); got != 4 {
		t.Errorf("checks = %v, want 4", got)
	}
	if got := testutil.ToFloat64(s.disagreements.WithLabelValues("fanout")); got != 1 {
		t.Errorf("disagreements = %v, want 1", got)
	}
	if n, err := testutil.GatherAndCount(reg, "concord_permissions_shadow_disagreements_total"); err != nil || n != 2 {
		t.Errorf("registered disagreement series = %d (%v), want 2 (fanout, read)", n, err)
	}
	if got := testutil.ToFloat64(s.disagreements.WithLabelValues("read")); got != 0 {
		t.Errorf("read disagreements = %v, want 0", got)
	}
	if !strings.Contains(logs.String(), "user_id=3") || strings.Count(logs.String(), "\n") != 1 {
		t.Errorf("want one log line naming bob, got %q", logs.String())
	}
}

func TestShadowSampling(t *testing.T) {
	if s, err := NewShadow(ShadowConfig{Every: -1}); err != nil || s != nil || s.Sample() || !s.Record(DecisionRead, 1, 2, 3, 1, 2) {
		t.Fatalf("a disabled shadow (%v, %v) samples or records", s, err)
	}
	s, err := NewShadow(ShadowConfig{})
	if err != nil || s.every != DefaultShadowEvery {
		t.Fatalf("default every = %v (%v), want %d", s, err, DefaultShadowEvery)
	}
	n := 0
	for range 200_000 {
		if s.Sample() {
			n++
		}
	}
	// 200 expected; a binomial(200000, 1/1000) is within [120, 300] with
	// overwhelming probability.
	if n < 120 || n > 300 {
		t.Fatalf("sampled %d of 200000 at 1 in 1000", n)
	}
	sm, n := s.Sampler(), 0
	for range 200_000 {
		if sm.Sample() {
			n++
		}
	}
	if n < 120 || n > 300 {
		t.Fatalf("Sampler sampled %d of 200000 at 1 in 1000", n)
	}
	var off Sampler
	if off.Sample() {
		t.Fatal("a zero Sampler samples")
	}
	every1, _ := NewShadow(ShadowConfig{Every: 1})
	one := every1.Sampler()
	for i := range 2 {
		if !one.Sample() {
			t.Fatalf("Every: 1 Sampler skipped decision %d", i)
		}
	}
	// Two shadows on one registerer share the counters.
	reg := prometheus.NewRegistry()
	a, errA := NewShadow(ShadowConfig{Every: 1, Registerer: reg})
	b, errB := NewShadow(ShadowConfig{Every: 1, Registerer: reg})
	if errA != nil || errB != nil {
		t.Fatal(errA, errB)
	}
	a.Record(DecisionRead, 1, 2, 3, 5, 5)
	b.Record(DecisionRead, 1, 2, 3, 5, 5)
	if got := testutil.ToFloat64(a.checks.WithLabelValues("read")); got != 2 {
		t.Fatalf("shared checks = %v, want 2", got)
	}
}
