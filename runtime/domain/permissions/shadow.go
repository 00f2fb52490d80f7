package permissions

import (
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/concord-chat/concord/runtime/base/snowflake"
)

// The shadow check. A permission bug is a privacy incident, so besides the
// property tests the engine is checked in production: a sample of the
// decisions the guild actor takes from the cached engine (fan-out: may
// this session receive this event; read: may this REST call see this
// channel) is recomputed from scratch with Compute, from the guild's own
// state rather than from anything the engine holds, and every
// disagreement is counted and logged. Compute and the engine share only
// the documented algorithm, so a bad invalidation, a corrupted cache entry
// or an engine input the guild forgot to update all show up as
// disagreements.

// Decision names the kind of decision a shadow check sampled.
type Decision string

// Decisions the guild actor samples.
const (
	// DecisionFanout is a per-recipient VIEW_CHANNEL check at fan-out.
	DecisionFanout Decision = "fanout"
	// DecisionRead is a REST authorisation in a channel: history reads,
	// message fetches, sends and management calls.
	DecisionRead Decision = "read"
)

// DefaultShadowEvery is the default sampling rate: one decision in 1000.
const DefaultShadowEvery = 1000

// ShadowConfig configures a Shadow.
type ShadowConfig struct {
	// Every samples one decision in Every on average; 0 takes
	// DefaultShadowEvery, a negative value disables the check.
	Every int
	// Registerer receives concord_permissions_shadow_checks_total and
	// concord_permissions_shadow_disagreements_total; nil registers
	// nothing. Shadows sharing a registerer share the counters.
	Registerer prometheus.Registerer
	// Logger receives one error line per disagreement (default: discard).
	Logger *slog.Logger
}

// Shadow samples decisions and records how their recomputation compares.
// A nil *Shadow samples nothing. It is safe for concurrent use.
type Shadow struct {
	every         uint64
	checks        *prometheus.CounterVec
	disagreements *prometheus.CounterVec
	log           *slog.Logger
}

// NewShadow returns a Shadow, or nil (no sampling) when cfg.Every < 0.
func NewShadow(cfg ShadowConfig) (*Shadow, error) {
	if cfg.Every < 0 {
		return nil, nil
	}
	if cfg.Every == 0 {
		cfg.Every = DefaultShadowEvery
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Shadow{
		every: uint64(cfg.Every),
		checks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "concord_permissions_shadow_checks_total",
			Help: "Sampled permission decisions recomputed from scratch by the shadow check, by decision (fanout, read).",
		}, []string{"decision"}),
		disagreements: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "concord_permissions_shadow_disagreements_total",
			Help: "Sampled permission decisions whose from-scratch recomputation disagreed with the cached engine, by decision. Any is a bug.",
		}, []string{"decision"}),
		log: cfg.Logger,
	}
	if cfg.Registerer != nil {
		var err error
		s.checks = register(cfg.Registerer, s.checks, &err)
		s.disagreements = register(cfg.Registerer, s.disagreements, &err)
		if err != nil {
			return nil, fmt.Errorf("permissions: register shadow metrics: %w", err)
		}
	}
	// Every series exists from the start at 0, so /metrics shows the
	// check is live and an alert on increase() sees the first one.
	for _, d := range []Decision{DecisionFanout, DecisionRead} {
		s.checks.WithLabelValues(string(d))
		s.disagreements.WithLabelValues(string(d))
	}
	return s, nil
}

// Sample reports whether the caller should check the decision it is
// taking; each call is sampled with probability 1/Every.
func (s *Shadow) Sample() bool {
	if s == nil {
		return false
	}
	return s.every == 1 || rand.Uint64N(s.every) == 0
}

// Sampler is a countdown to the next sampled decision for one goroutine
// (a guild actor): a decrement per decision and one random draw per
// sample, instead of a draw per decision. Gaps are uniform in
// [1, 2·Every-1], so one decision in Every is sampled on average and no
// fixed stride lines up with a loop over the same recipients. Not safe for
// concurrent use; a Sampler of a nil Shadow never samples.
type Sampler struct {
	s    *Shadow
	left uint64
}

// Sampler returns a new countdown.
func (s *Shadow) Sampler() Sampler {
	sm := Sampler{s: s}
	sm.left = sm.gap()
	return sm
}

// Sample reports whether this decision is to be checked.
func (sm *Sampler) Sample() bool {
	if sm.s == nil {
		return false
	}
	sm.left--
	if sm.left > 0 {
		return false
	}
	sm.left = sm.gap()
	return true
}

func (sm *Sampler) gap() uint64 {
	if sm.s == nil || sm.s.every == 1 {
		return 1
	}
	return 1 + rand.Uint64N(2*sm.s.every-1)
}

// Record counts one check of a decision: cached is what the engine
// answered, fresh what Compute answered. It reports whether they agreed;
// a disagreement is counted and logged.
func (s *Shadow) Record(d Decision, guildID, userID, channelID snowflake.ID, cached, fresh Bits) bool {
	if s == nil {
		return true
	}
	s.checks.WithLabelValues(string(d)).Inc()
	if cached == fresh {
		return true
	}
	s.disagreements.WithLabelValues(string(d)).Inc()
	s.log.Error("permission shadow check disagrees with the cached engine",
		"decision", string(d), "guild_id", guildID, "user_id", userID, "channel_id", channelID,
		"cached", cached, "recomputed", fresh, "differing", cached^fresh)
	return false
}

// Inputs are one member's permission inputs in one channel, taken from the
// guild's own state.
type Inputs struct {
	GuildID snowflake.ID
	OwnerID snowflake.ID
	Member  Member
	// Role returns a role's bits and whether it exists; the guild id is
	// @everyone.
	Role func(id snowflake.ID) (Bits, bool)
	// Overwrites are the channel's overwrites; when several name the same
	// target, the last one counts.
	Overwrites []Overwrite
	Now        time.Time
}

// Compute returns the member's permissions in the channel by the
// documented algorithm, from in alone. It caches nothing and shares no
// state with an Engine; Engine.Channel must always agree with it.
func Compute(in Inputs) Bits {
	if in.Member.UserID == in.OwnerID {
		return All
	}
	p, _ := in.Role(in.GuildID)
	var roles []snowflake.ID
	for _, r := range in.Member.Roles {
		if r == in.GuildID {
			continue
		}
		if bits, ok := in.Role(r); ok {
			p |= bits
			roles = append(roles, r)
		}
	}
	if p&Administrator != 0 {
		return All
	}
	everyone, roleOws, own := allowDeny{}, map[snowflake.ID]allowDeny{}, allowDeny{}
	for _, o := range in.Overwrites {
		ad := allowDeny{allow: o.Allow, deny: o.Deny}
		switch {
		case o.Member:
			if o.ID == in.Member.UserID {
				own = ad
			}
		case o.ID == in.GuildID:
			everyone = ad
		default:
			roleOws[o.ID] = ad
		}
	}
	p = p&^everyone.deny | everyone.allow
	var allow, deny Bits
	for _, r := range roles {
		allow |= roleOws[r].allow
		deny |= roleOws[r].deny
	}
	p = p&^deny | allow
	p = p&^own.deny | own.allow
	p = implicit(p)
	if !in.Member.TimeoutUntil.IsZero() && in.Member.TimeoutUntil.After(in.Now) {
		p &= TimeoutAllowed
	}
	return p
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
