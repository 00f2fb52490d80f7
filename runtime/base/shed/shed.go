// Package shed decides what a guild drops under pressure, in a fixed
// order: presence updates for members nobody displays first, then typing,
// then member-list updates, and messages last. Everything shed is lossy
// by design (history is the source of truth for messages), and every
// drop is counted in concord_guild_shed_total{kind}.
package shed

import (
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Kind is a class of event, in shedding order.
type Kind int

// Kinds, from first shed to last.
const (
	// Presence is a PRESENCE_UPDATE outside any subscribed list range
	// (bots with GUILD_PRESENCES, all members of a small guild).
	Presence Kind = iota
	// Typing is TYPING_START.
	Typing
	// MemberList is GUILD_MEMBER_LIST_UPDATE (and presence shown in a
	// subscribed range).
	MemberList
	// Message is every other dispatch (messages, state changes).
	Message
	numKinds
)

// String returns the kind's metric label.
func (k Kind) String() string {
	switch k {
	case Presence:
		return "presence"
	case Typing:
		return "typing"
	case MemberList:
		return "member_list"
	case Message:
		return "message"
	}
	return "unknown"
}

// Pressure is how loaded the guild is now: the age of the event at the
// head of its queue and the queue's length.
type Pressure struct {
	Age   time.Duration
	Queue int
}

// Config sets the bounds. Pressure is the larger of Age/MaxAge and
// Queue/MaxQueue; a kind is shed when pressure reaches its level.
type Config struct {
	// MaxAge is the event age that counts as pressure 1. Default 250ms.
	MaxAge time.Duration
	// MaxQueue is the queue length that counts as pressure 1. Default
	// 10,000.
	MaxQueue int
	// Levels are the pressures at which Presence, Typing, MemberList and
	// Message are shed, non-decreasing. Default {1, 2, 4, 8}: at twice
	// the bounds typing goes, at eight times even messages (which clients
	// recover from history).
	Levels [4]float64
	// Registerer receives concord_guild_shed_total. Nil registers nothing.
	Registerer prometheus.Registerer
}

// Shedder applies the shedding order. It is safe for concurrent use.
type Shedder struct {
	cfg  Config
	shed [numKinds]prometheus.Counter
	vec  *prometheus.CounterVec
}

// New validates cfg and returns a Shedder.
func New(cfg Config) (*Shedder, error) {
	if cfg.MaxAge <= 0 {
		cfg.MaxAge = 250 * time.Millisecond
	}
	if cfg.MaxQueue <= 0 {
		cfg.MaxQueue = 10000
	}
	if cfg.Levels == ([4]float64{}) {
		cfg.Levels = [4]float64{1, 2, 4, 8}
	}
	for i := 1; i < len(cfg.Levels); i++ {
		if cfg.Levels[i] < cfg.Levels[i-1] || cfg.Levels[i-1] <= 0 {
			return nil, fmt.Errorf("shed: levels %v must be positive and non-decreasing", cfg.Levels)
		}
	}
	s := &Shedder{cfg: cfg, vec: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "concord_guild_shed_total",
		Help: "Events a guild dropped under pressure, by kind (presence, typing, member_list, message).",
	}, []string{"kind"})}
	for k := range numKinds {
		s.shed[k] = s.vec.WithLabelValues(k.String())
	}
	if cfg.Registerer != nil {
		if err := cfg.Registerer.Register(s.vec); err != nil {
			return nil, fmt.Errorf("shed: register metrics: %w", err)
		}
	}
	return s, nil
}

// Level returns the pressure as a multiple of the bounds.
func (s *Shedder) Level(p Pressure) float64 {
	return max(float64(p.Age)/float64(s.cfg.MaxAge), float64(p.Queue)/float64(s.cfg.MaxQueue))
}

// Admit reports whether an event of kind k should be delivered under
// pressure p. A false answer is counted as n shed deliveries (n < 1
// counts one).
func (s *Shedder) Admit(k Kind, p Pressure, n int) bool {
	if k < 0 || k >= numKinds {
		k = Message
	}
	if s.Level(p) < s.cfg.Levels[k] {
		return true
	}
	s.shed[k].Add(float64(max(n, 1)))
	return false
}

// Shed returns the counter of a kind, for tests and dashboards.
func (s *Shedder) Shed(k Kind) prometheus.Counter { return s.shed[k] }
