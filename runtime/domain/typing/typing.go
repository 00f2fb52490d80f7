// Package typing decides who sees typing indicators: TYPING_START goes only
// to sessions that have the channel open (gateways report focus), at most
// once per typer per Throttle, and only for a capped sample of typers when
// many type at once, since clients then show "several people are typing".
// Nothing is stored; everything here is lossy by design.
package typing

import (
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/event"
)

// DispatchType is the dispatch name of typing indicators.
const DispatchType = "TYPING_START"

// Config configures a Tracker.
type Config struct {
	// Throttle is the shortest interval between two deliveries for one
	// typer in one channel. Default 8s.
	Throttle time.Duration
	// SampleWindow and SampleMax cap how many distinct typers a channel
	// delivers within a window; further typers are dropped until one
	// ages out. Defaults 10s and 5.
	SampleWindow time.Duration
	SampleMax    int
	// Now is the clock. Default time.Now.
	Now func() time.Time
	// Registerer receives metrics. Nil registers nothing.
	Registerer prometheus.Registerer
}

// Outcome is what happened to one typing request.
type Outcome int

// Outcomes of Typing.
const (
	// Delivered: send TYPING_START to the returned sessions.
	Delivered Outcome = iota
	// Throttled: the typer was delivered less than Throttle ago.
	Throttled
	// Sampled: SampleMax other typers are already shown in the channel.
	Sampled
)

// String names the outcome, as in metrics.
func (o Outcome) String() string {
	switch o {
	case Delivered:
		return "delivered"
	case Throttled:
		return "throttled"
	case Sampled:
		return "sampled_out"
	}
	return "unknown"
}

type focus struct {
	s       event.Session
	guild   snowflake.ID
	channel snowflake.ID
}

// Tracker holds which channel each session is looking at and recent
// typers per channel. It is safe for concurrent use.
type Tracker struct {
	cfg      Config
	outcomes *prometheus.CounterVec

	mu      sync.Mutex
	focus   map[event.SessionID]focus
	viewers map[snowflake.ID]map[event.SessionID]event.Session
	typers  map[snowflake.ID]map[snowflake.ID]time.Time // channel → typer → last delivery
}

// New returns an empty tracker.
func New(cfg Config) (*Tracker, error) {
	if cfg.Throttle <= 0 {
		cfg.Throttle = 8 * time.Second
	}
	if cfg.SampleWindow <= 0 {
		cfg.SampleWindow = 10 * time.Second
	}
	if cfg.SampleMax <= 0 {
		cfg.SampleMax = 5
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	t := &Tracker{
		cfg: cfg,
		outcomes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "concord_typing_requests_total",
			Help: "Typing requests by outcome (delivered, throttled, sampled_out).",
		}, []string{"outcome"}),
		focus:   make(map[event.SessionID]focus),
		viewers: make(map[snowflake.ID]map[event.SessionID]event.Session),
		typers:  make(map[snowflake.ID]map[snowflake.ID]time.Time),
	}
	if cfg.Registerer != nil {
		if err := cfg.Registerer.Register(t.outcomes); err != nil {
			return nil, fmt.Errorf("typing: register metrics: %w", err)
		}
	}
	return t, nil
}

// Focus records that a session now has a channel of a guild open
// (channelID 0: no channel, e.g. the client is in the DM list or
// backgrounded). It replaces the session's previous focus.
func (t *Tracker) Focus(s event.Session, guildID, channelID snowflake.ID) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.unfocus(s.ID)
	if channelID == 0 {
		return
	}
	t.focus[s.ID] = focus{s: s, guild: guildID, channel: channelID}
	m := t.viewers[channelID]
	if m == nil {
		m = make(map[event.SessionID]event.Session)
		t.viewers[channelID] = m
	}
	m[s.ID] = s
}

// Disconnect forgets a session's focus.
func (t *Tracker) Disconnect(id event.SessionID) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.unfocus(id)
}

func (t *Tracker) unfocus(id event.SessionID) {
	f, ok := t.focus[id]
	if !ok {
		return
	}
	delete(t.focus, id)
	if m := t.viewers[f.channel]; m != nil {
		delete(m, id)
		if len(m) == 0 {
			delete(t.viewers, f.channel)
		}
	}
}

// Focused returns the guild and channel a session has open.
func (t *Tracker) Focused(id event.SessionID) (guildID, channelID snowflake.ID, ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	f, ok := t.focus[id]
	return f.guild, f.channel, ok
}

// Viewers returns the sessions with a channel open.
func (t *Tracker) Viewers(channelID snowflake.ID) []event.Session {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]event.Session, 0, len(t.viewers[channelID]))
	for _, s := range t.viewers[channelID] {
		out = append(out, s)
	}
	return out
}

// Typing decides one POST /channels/{id}/typing by userID. When the
// outcome is Delivered it returns the sessions viewing the channel other
// than the typer's own. The caller filters them by VIEW_CHANNEL (focus
// can outlive a permission change) and adds bots holding the typing
// intents, which do not focus channels.
func (t *Tracker) Typing(userID, channelID snowflake.ID) (Outcome, []event.Session) {
	now := t.cfg.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	recent := t.typers[channelID]
	shown := 0
	for u, at := range recent {
		age := now.Sub(at)
		if age >= t.cfg.Throttle && age >= t.cfg.SampleWindow {
			delete(recent, u)
			continue
		}
		if u != userID && age < t.cfg.SampleWindow {
			shown++
		}
	}
	if recent != nil && len(recent) == 0 {
		delete(t.typers, channelID)
		recent = nil
	}
	o := Delivered
	switch at, ok := recent[userID]; {
	case ok && now.Sub(at) < t.cfg.Throttle:
		o = Throttled
	case !ok && shown >= t.cfg.SampleMax:
		o = Sampled
	}
	t.outcomes.WithLabelValues(o.String()).Inc()
	if o != Delivered {
		return o, nil
	}
	if recent == nil {
		recent = make(map[snowflake.ID]time.Time)
		t.typers[channelID] = recent
	}
	recent[userID] = now
	out := make([]event.Session, 0, len(t.viewers[channelID]))
	for _, s := range t.viewers[channelID] {
		if s.UserID != userID {
			out = append(out, s)
		}
	}
	return o, out
}

// Event encodes TYPING_START (guildID 0 omits guild_id; member, if not
// nil, is the typer's member object).
func Event(channelID, guildID, userID snowflake.ID, at time.Time, member json.RawMessage) json.RawMessage {
	b := make([]byte, 0, 128+len(member))
	b = append(b, `{"channel_id":"`...)
	b = strconv.AppendUint(b, uint64(channelID), 10)
	b = append(b, '"')
	if guildID != 0 {
		b = append(b, `,"guild_id":"`...)
		b = strconv.AppendUint(b, uint64(guildID), 10)
		b = append(b, '"')
	}
	b = append(b, `,"user_id":"`...)
	b = strconv.AppendUint(b, uint64(userID), 10)
	b = append(b, `","timestamp":`...)
	b = strconv.AppendInt(b, at.Unix(), 10)
	if member != nil {
		b = append(b, `,"member":`...)
		b = append(b, member...)
	}
	return append(b, '}')
}
