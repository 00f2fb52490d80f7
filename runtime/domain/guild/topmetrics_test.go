package guild

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/concord-chat/concord/runtime/base/snowflake"
)

// busy runs n operations on the guild's actor and waits for them.
func busy(t *testing.T, f *fixture, gid snowflake.ID, n int) {
	t.Helper()
	done := make(chan struct{}, n)
	for range n {
		if err := f.svc.post(bg, gid, func(*Actor) { done <- struct{}{} }); err != nil {
			t.Fatal(err)
		}
	}
	for range n {
		<-done
	}
}

// wantTop is the exposition the collector must give for guilds: the
// values GuildStats (what GET /admin/guilds serves) reports for each.
func wantTop(t *testing.T, f *fixture, guilds []snowflake.ID) string {
	t.Helper()
	var age, queue strings.Builder
	fmt.Fprintf(&age, "# HELP %s %s\n# TYPE %[1]s gauge\n", topAgeName, topAgeHelp)
	fmt.Fprintf(&queue, "# HELP %s %s\n# TYPE %[1]s gauge\n", topQueueName, topQueueHelp)
	for _, id := range guilds {
		st, ok := f.svc.GuildStats(id)
		if !ok {
			t.Fatalf("guild %d not loaded", id)
		}
		g := strconv.FormatUint(uint64(id), 10)
		fmt.Fprintf(&age, "concord_guild_top_event_age_seconds{guild=%q,quantile=\"0.5\"} %g\n", g, st.EventAgeP50.Seconds())
		fmt.Fprintf(&age, "concord_guild_top_event_age_seconds{guild=%q,quantile=\"0.99\"} %g\n", g, st.EventAgeP99.Seconds())
		fmt.Fprintf(&queue, "concord_guild_top_mailbox_length_messages{guild=%q} %d\n", g, st.QueueLength)
	}
	return age.String() + queue.String()
}

func TestTopGuildsOnlyTheBusiest(t *testing.T) {
	f := newFixture(t)
	owner := f.user("owner", false)
	const guilds, k = 12, 3
	ids := make([]snowflake.ID, guilds)
	for i := range ids {
		ids[i] = must[GuildInfo](t)(f.svc.CreateGuild(bg, owner.ID, "g"+strconv.Itoa(i))).Guild.ID
		busy(t, f, ids[i], 1) // loads the actor
	}
	const every = 5 * time.Second
	top := NewTopGuilds(f.svc, TopGuildsConfig{K: k, Every: every, Now: f.clock.Now})
	compare := func(want []snowflake.ID) {
		t.Helper()
		if err := testutil.CollectAndCompare(top, strings.NewReader(wantTop(t, f, want))); err != nil {
			t.Fatal(err)
		}
		if n := testutil.CollectAndCount(top, "concord_guild_top_mailbox_length_messages"); n != len(want) {
			t.Fatalf("%d guilds have a mailbox series, want %d", n, len(want))
		}
	}

	// The first ranking counts everything each actor did since it loaded:
	// every guild did the same (creation and one operation), so none
	// stands out; start the measured interval after it.
	top.Ranked()
	f.clock.Advance(every)

	// Guilds 9, 10, 11 are the busy ones (11 the busiest); the others run
	// one operation each.
	for i, id := range ids {
		n := 1
		if i >= guilds-k {
			n = 10 * (i - (guilds - k) + 2)
		}
		busy(t, f, id, n)
	}
	hot := []snowflake.ID{ids[11], ids[10], ids[9]}
	if got := top.Ranked(); !slices.Equal(got, hot) {
		t.Fatalf("ranked %v, want %v", got, hot)
	}
	compare(hot)

	// Guild 4's actor gets stuck with 50 operations queued behind the one
	// it runs: by its queue it is now the busiest guild, and its mailbox
	// series shows the queue GuildStats shows.
	f.clock.Advance(every)
	a, err := f.svc.actor(ids[4])
	if err != nil {
		t.Fatal(err)
	}
	release, held := make(chan struct{}), make(chan struct{})
	if err := a.enqueue(bg, func(*Actor) { close(held); <-release }); err != nil {
		t.Fatal(err)
	}
	<-held
	done := make(chan struct{}, 50)
	for range 50 {
		if err := f.svc.post(bg, ids[4], func(*Actor) { done <- struct{}{} }); err != nil {
			t.Fatal(err)
		}
	}
	busy(t, f, ids[10], 20)
	busy(t, f, ids[9], 30)
	busy(t, f, ids[11], 5)
	// Guild 11 calmed down: it leaves the top 3, and its series go.
	hot = []snowflake.ID{ids[4], ids[9], ids[10]}
	if got := top.Ranked(); !slices.Equal(got, hot) {
		t.Fatalf("ranked %v, want %v", got, hot)
	}
	compare(hot)
	if st, _ := f.svc.GuildStats(ids[4]); st.QueueLength != 50 {
		t.Fatalf("stuck guild's queue = %d, want 50", st.QueueLength)
	}
	close(release)
	for range 50 {
		<-done
	}

	// Within Every the set stays; past it, with every guild idle, no guild
	// has load and nothing is reported.
	if got := top.Ranked(); !slices.Equal(got, hot) {
		t.Fatalf("ranked within the interval %v, want %v", got, hot)
	}
	f.clock.Advance(every)
	top.Ranked() // counts guild 4's 50 queued operations, dispatched since
	f.clock.Advance(every)
	if got := top.Ranked(); len(got) != 0 {
		t.Fatalf("ranked with every guild idle: %v, want none", got)
	}
	if n := testutil.CollectAndCount(top); n != 0 {
		t.Fatalf("idle guilds collected %d series, want 0", n)
	}
}
