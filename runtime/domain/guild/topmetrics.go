package guild

import (
	"cmp"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/concord-chat/concord/runtime/base/snowflake"
)

// The per-guild series of the busiest guilds. The unlabelled
// concord_guild_event_age_seconds histogram and
// concord_guild_mailbox_length_messages gauge say that some actor of the
// process falls behind; these say which one, for the few guilds that
// matter (the ones a GuildPlacement or a relay tier is about), without a
// series per loaded guild: a node runs thousands of small guilds, and a
// guild label over all of them would grow the time-series database with
// every guild that was ever loaded.
//
// The collector ranks at scrape time, so a guild that leaves the top K
// simply is not collected at the next scrape (Prometheus marks its series
// stale); there are no per-guild vectors to clean up, and what a scrape
// shows is exactly the current top K.

// DefaultTopGuilds is the number of guilds given labelled series when
// TopGuildsConfig.K is zero.
const DefaultTopGuilds = 20

// DefaultTopGuildsEvery is how often the ranking is recomputed when
// TopGuildsConfig.Every is zero.
const DefaultTopGuildsEvery = 5 * time.Second

// The names and help of the per-guild series.
const (
	topAgeName = "concord_guild_top_event_age_seconds"
	topAgeHelp = "Event age (an operation's entry into a guild actor's mailbox to its dispatch) of the busiest guilds, " +
		"quantile 0.5 or 0.99 over the latest events of the last minute, as GET /admin/guilds reports it."
	topQueueName = "concord_guild_top_mailbox_length_messages"
	topQueueHelp = "Operations waiting in the mailbox of each of the busiest guilds' actors."
)

// TopGuildsConfig configures the per-guild metrics of the busiest guilds.
type TopGuildsConfig struct {
	// K is the number of guilds ranked; zero takes DefaultTopGuilds.
	K int
	// Every is the shortest time between two rankings: scrapes within it
	// report the same guilds (with fresh values), so two Prometheus
	// replicas scraping a second apart see one set. Zero takes
	// DefaultTopGuildsEvery.
	Every time.Duration
	// Now is the clock of the ranking (tests); nil is time.Now.
	Now func() time.Time
}

// TopGuilds is a prometheus.Collector of the event age and mailbox length
// of the K busiest guilds of a Service, labelled by guild id.
//
// A guild's load is the number of operations its actor dispatched since
// the previous ranking plus those waiting in its mailbox now: work done
// and work pending over the same interval, so a guild whose actor is
// stuck ranks by its queue and a fast one by its throughput. Ties go to
// the guild with more online sessions (the bigger fan-out), then to the
// lower guild id. A guild with no load in the interval is not ranked,
// however few guilds are busy: an idle guild has nothing to report.
type TopGuilds struct {
	svc   *Service
	k     int
	every time.Duration
	now   func() time.Time

	age   *prometheus.Desc
	queue *prometheus.Desc

	mu sync.Mutex
	// ranked is the current top K, busiest first.
	ranked []snowflake.ID
	// rankedAt is when ranked was computed; zero before the first scrape.
	rankedAt time.Time
	// seen is each loaded guild's dispatched count at the last ranking.
	seen map[snowflake.ID]seenCount
}

// seenCount is an actor's cumulative dispatched count at a ranking; the
// actor pointer tells a reloaded guild (a new actor counting from zero)
// from the same one.
type seenCount struct {
	actor      *Actor
	dispatched uint64
}

var _ prometheus.Collector = (*TopGuilds)(nil)

// NewTopGuilds returns the collector of svc's busiest guilds; register it
// with the process's registry.
func NewTopGuilds(svc *Service, cfg TopGuildsConfig) *TopGuilds {
	t := &TopGuilds{
		svc:   svc,
		k:     cmp.Or(cfg.K, DefaultTopGuilds),
		every: cmp.Or(cfg.Every, DefaultTopGuildsEvery),
		now:   cfg.Now,
		age:   prometheus.NewDesc(topAgeName, topAgeHelp, []string{"guild", "quantile"}, nil),
		queue: prometheus.NewDesc(topQueueName, topQueueHelp, []string{"guild"}, nil),
		seen:  make(map[snowflake.ID]seenCount),
	}
	if t.now == nil {
		t.now = time.Now
	}
	return t
}

// Describe implements prometheus.Collector.
func (t *TopGuilds) Describe(ch chan<- *prometheus.Desc) {
	ch <- t.age
	ch <- t.queue
}

// Collect implements prometheus.Collector: the current top K with the
// values GuildStats gives at the time of the scrape.
func (t *TopGuilds) Collect(ch chan<- prometheus.Metric) {
	for _, id := range t.Ranked() {
		st, ok := t.svc.GuildStats(id)
		if !ok {
			continue // unloaded since the ranking
		}
		guild := strconv.FormatUint(uint64(id), 10)
		ch <- prometheus.MustNewConstMetric(t.age, prometheus.GaugeValue, st.EventAgeP50.Seconds(), guild, "0.5")
		ch <- prometheus.MustNewConstMetric(t.age, prometheus.GaugeValue, st.EventAgeP99.Seconds(), guild, "0.99")
		ch <- prometheus.MustNewConstMetric(t.queue, prometheus.GaugeValue, float64(st.QueueLength), guild)
	}
}

// Ranked returns the guilds the collector reports, busiest first,
// ranking them anew when the last ranking is older than Every.
func (t *TopGuilds) Ranked() []snowflake.ID {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	if !t.rankedAt.IsZero() && now.Sub(t.rankedAt) < t.every {
		return slices.Clone(t.ranked)
	}
	t.rankedAt = now
	t.ranked = t.rank()
	return slices.Clone(t.ranked)
}

// guildLoad is one guild's place in a ranking.
type guildLoad struct {
	id     snowflake.ID
	load   uint64
	online int64
}

// rank computes the top K from every loaded actor's counters, cheap
// reads that take no quantiles, and remembers the dispatched counts for
// the next ranking. t.mu is held.
func (t *TopGuilds) rank() []snowflake.ID {
	t.svc.mu.Lock()
	actors := make([]*Actor, 0, len(t.svc.actors))
	for _, a := range t.svc.actors {
		actors = append(actors, a)
	}
	t.svc.mu.Unlock()

	seen := make(map[snowflake.ID]seenCount, len(actors))
	loads := make([]guildLoad, 0, len(actors))
	for _, a := range actors {
		a.stats.mu.Lock()
		dispatched := a.stats.next
		a.stats.mu.Unlock()
		seen[a.id] = seenCount{actor: a, dispatched: dispatched}
		done := dispatched
		if prev, ok := t.seen[a.id]; ok && prev.actor == a {
			done -= prev.dispatched
		}
		load := done + uint64(len(a.mailbox))
		if load == 0 {
			continue
		}
		loads = append(loads, guildLoad{id: a.id, load: load, online: a.stats.online.Load()})
	}
	t.seen = seen
	slices.SortFunc(loads, func(x, y guildLoad) int {
		return cmp.Or(cmp.Compare(y.load, x.load), cmp.Compare(y.online, x.online), cmp.Compare(x.id, y.id))
	})
	out := make([]snowflake.ID, 0, min(len(loads), t.k))
	for _, l := range loads[:min(len(loads), t.k)] {
		out = append(out, l.id)
	}
	return out
}
