package guild

import (
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/concord-chat/concord/runtime/base/snowflake"
)

// StatsWindow is how far back GuildStats looks for event ages: events
// dispatched longer ago than this do not count, so an idle guild reports
// zero ages rather than those of its last burst.
const StatsWindow = time.Minute

// statsSamples is the number of recent event ages an actor keeps: the
// quantiles are over at most this many of the latest events in the window.
const statsSamples = 128

// Stats is one loaded guild's load, read without entering its actor (a
// busy actor answers at once): what the operator's autoscaler and
// kubectl-concord show per guild.
type Stats struct {
	// GuildID is the guild.
	GuildID snowflake.ID
	// EventAgeP50 and EventAgeP99 are quantiles of the time from an
	// operation's entry into the actor's mailbox to the actor running it
	// (the measurement behind concord_guild_event_age_seconds), over the
	// latest events of the last StatsWindow; zero without any.
	EventAgeP50, EventAgeP99 time.Duration
	// Events is the number of events the quantiles are over.
	Events int
	// QueueLength is the number of operations waiting in the mailbox.
	QueueLength int
	// Online is the number of gateway sessions subscribed to the guild.
	Online int
	// Members is the guild's member count (0 while the guild loads).
	Members int
	// VoiceCalls is the number of the guild's voice channels with a call
	// placed on a voice server (someone is in the channel).
	VoiceCalls int
}

// actorStats is what an actor publishes for Stats. The actor goroutine
// writes it after each operation; readers take mu or load the atomics.
type actorStats struct {
	online     atomic.Int64
	members    atomic.Int64
	voiceCalls atomic.Int64

	mu sync.Mutex
	// ring holds the latest event ages; next is the number written so far.
	ring [statsSamples]ageSample
	next uint64
}

// ageSample is one event's age and when it was dispatched.
type ageSample struct {
	at  int64 // unix nanoseconds of the dispatch
	age time.Duration
}

// observe records one event's age at its dispatch time now.
func (st *actorStats) observe(now time.Time, age time.Duration) {
	st.mu.Lock()
	st.ring[st.next%statsSamples] = ageSample{at: now.UnixNano(), age: age}
	st.next++
	st.mu.Unlock()
}

// publishStats records the actor's counts after an operation; only the actor
// goroutine calls it.
func (a *Actor) publishStats() {
	a.stats.online.Store(int64(len(a.subs)))
	a.stats.members.Store(int64(len(a.members)))
	if a.voice != nil {
		a.stats.voiceCalls.Store(int64(len(a.voice.calls)))
	}
}

// quantiles returns the p50 and p99 of the ages dispatched after
// now-window, and how many there were.
func (st *actorStats) quantiles(now time.Time, window time.Duration) (p50, p99 time.Duration, n int) {
	var ages [statsSamples]time.Duration
	since := now.Add(-window).UnixNano()
	st.mu.Lock()
	filled := min(st.next, statsSamples)
	for i := range filled {
		if s := st.ring[i]; s.at >= since {
			ages[n] = s.age
			n++
		}
	}
	st.mu.Unlock()
	if n == 0 {
		return 0, 0, 0
	}
	sorted := ages[:n]
	slices.Sort(sorted)
	return nearestRank(sorted, 50), nearestRank(sorted, 99), n
}

// nearestRank is the p-th percentile of sorted by the nearest-rank method.
func nearestRank(sorted []time.Duration, p int) time.Duration {
	rank := (p*len(sorted) + 99) / 100 // ceil(p/100 * n)
	return sorted[max(rank, 1)-1]
}

// snapshot reads the actor's stats as of now.
func (a *Actor) snapshot(now time.Time) Stats {
	p50, p99, n := a.stats.quantiles(now, StatsWindow)
	return Stats{
		GuildID:     a.id,
		EventAgeP50: p50,
		EventAgeP99: p99,
		Events:      n,
		QueueLength: len(a.mailbox),
		Online:      int(a.stats.online.Load()),
		Members:     int(a.stats.members.Load()),
		VoiceCalls:  int(a.stats.voiceCalls.Load()),
	}
}

// GuildStats returns the stats of one loaded guild; ok is false when the
// guild has no actor in this process.
func (s *Service) GuildStats(guildID snowflake.ID) (st Stats, ok bool) {
	s.mu.Lock()
	a := s.actors[guildID]
	s.mu.Unlock()
	if a == nil {
		return Stats{}, false
	}
	return a.snapshot(time.Now()), true
}

// AllGuildStats returns the stats of every loaded guild, in guild id
// order.
func (s *Service) AllGuildStats() []Stats {
	s.mu.Lock()
	actors := make([]*Actor, 0, len(s.actors))
	for _, a := range s.actors {
		actors = append(actors, a)
	}
	s.mu.Unlock()
	now := time.Now()
	out := make([]Stats, 0, len(actors))
	for _, a := range actors {
		out = append(out, a.snapshot(now))
	}
	slices.SortFunc(out, func(x, y Stats) int {
		switch {
		case x.GuildID < y.GuildID:
			return -1
		case x.GuildID > y.GuildID:
			return 1
		}
		return 0
	})
	return out
}
