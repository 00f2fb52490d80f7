package guild

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are a Service's Prometheus collectors. Services sharing a
// registerer share them.
type metrics struct {
	eventAge      prometheus.Histogram
	mailboxLength prometheus.Gauge
	actorsLoaded  prometheus.Gauge
	deliveries    prometheus.Counter
	// passiveSkipped and passiveUpdates count passive sessions (passive.go).
	passiveSkipped prometheus.Counter
	passiveUpdates prometheus.Counter
	// sliceEntries, sliceEvents and sliceRehomed count sliced guilds'
	// streams to relays (sliced.go).
	sliceEntries prometheus.Counter
	sliceEvents  prometheus.Counter
	sliceRehomed prometheus.Counter
	// moveAttaches and moveReplayedEvents count sessions resubscribed
	// after a guild move (backlog.go).
	moveAttaches       *prometheus.CounterVec
	moveReplayedEvents prometheus.Counter
	// idsBehindChannel counts message ids refused for being behind
	// their channel's last message (mintAfter).
	idsBehindChannel prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		eventAge: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "concord_guild_event_age_seconds",
			Help:    "Time from enqueueing an operation in a guild actor's mailbox to the actor running it.",
			Buckets: []float64{0.0001, 0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5},
		}),
		mailboxLength: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "concord_guild_mailbox_length_messages",
			Help: "Operations waiting in guild actor mailboxes, summed over the process's actors.",
		}),
		actorsLoaded: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "concord_guild_actors_loaded_actors",
			Help: "Guild actors loaded in this process.",
		}),
		deliveries: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "concord_guild_deliveries_total",
			Help: "Session deliveries handed to gateway sinks by guild actors.",
		}),
		passiveSkipped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "concord_guild_passive_skipped_total",
			Help: "Message, reaction and typing deliveries withheld from sessions passive in their channel.",
		}),
		passiveUpdates: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "concord_guild_passive_updates_total",
			Help: "PASSIVE_UPDATE_V1 dispatches sent to passive sessions.",
		}),
		sliceEntries: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "concord_guild_slice_entries_total",
			Help: "Entries (events, state changes, session changes) sliced guilds sent to relays, one per relay.",
		}),
		sliceEvents: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "concord_guild_slice_events_total",
			Help: "Events of sliced guilds handed to their relays to filter (each sent once per relay).",
		}),
		sliceRehomed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "concord_guild_slice_rehomed_sessions_total",
			Help: "Sessions of sliced guilds moved to another relay after theirs failed.",
		}),
		moveAttaches: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "concord_guild_move_attaches_total",
			Help: "Sessions resubscribed after a guild move, by outcome: replayed (the move backlog's events), refreshed (GUILD_CREATE, then the backlog's events), expired (the backlog had ended: GUILD_CREATE only, events may be missing), attached (already a subscriber).",
		}, []string{"outcome"}),
		moveReplayedEvents: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "concord_guild_move_replayed_events_total",
			Help: "Events delivered from guild actors' move backlogs to sessions resubscribed after a guild move.",
		}),
		idsBehindChannel: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "concord_guild_ids_behind_channel_total",
			Help: "Messages refused because the id this node's clock minted was more than 2 s behind the channel's last message (a clock behind the node that wrote it).",
		}),
	}
	if reg == nil {
		return m, nil
	}
	var err error
	m.eventAge = register(reg, m.eventAge, &err)
	m.mailboxLength = register(reg, m.mailboxLength, &err)
	m.actorsLoaded = register(reg, m.actorsLoaded, &err)
	m.deliveries = register(reg, m.deliveries, &err)
	m.passiveSkipped = register(reg, m.passiveSkipped, &err)
	m.passiveUpdates = register(reg, m.passiveUpdates, &err)
	m.sliceEntries = register(reg, m.sliceEntries, &err)
	m.sliceEvents = register(reg, m.sliceEvents, &err)
	m.sliceRehomed = register(reg, m.sliceRehomed, &err)
	m.moveAttaches = register(reg, m.moveAttaches, &err)
	m.moveReplayedEvents = register(reg, m.moveReplayedEvents, &err)
	m.idsBehindChannel = register(reg, m.idsBehindChannel, &err)
	if err != nil {
		return nil, fmt.Errorf("guild: register metrics: %w", err)
	}
	return m, nil
}

// register registers c, or returns the collector already registered under
// its name.
func register[T prometheus.Collector](reg prometheus.Registerer, c T, errp *error) T {
	err := reg.Register(c)
	if err == nil {
		return c
	}
	var are prometheus.AlreadyRegisteredError
	if errors.As(err, &are) {
		if existing, ok := are.ExistingCollector.(T); ok {
			return existing
		}
	}
	*errp = errors.Join(*errp, err)
	return c
}
