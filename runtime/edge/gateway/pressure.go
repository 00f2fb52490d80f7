package gateway

import (
	"sync"

	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/event"
)

// Send-queue pressure (a buffer at 80 % emits a degraded metric, so a bot's
// developer sees a slow consumer before its session is cut). A connection whose send queue
// (the frames counted against Config.SendQueue) reaches
// PressureHighPercent of the bound counts one crossing in
// concord_gateway_buffer_pressure_total and one session in
// concord_gateway_buffer_pressure_sessions, both labelled with the
// session's application, and logs once at Info. The crossing is
// edge-triggered: it re-arms only once the queue is back at or below
// PressureLowPercent of the bound (the writer took it), so a queue that
// hovers around 80 % counts once, not once per frame. The gauge is
// released when the queue re-arms or the connection closes, including the
// slow-consumer close at the bound.
//
// Labels. application_id is the bot user id of a bot session: Concord
// gives every application exactly one bot user, so it names the
// application one-to-one (in Discord the two ids are equal; in Concord
// they differ and the dashboard maps the bot user to its application).
// Sessions of people share the value "user". The label's cardinality is
// bounded per node: the first MaxPressureApplications distinct bots to
// cross get a value of their own, every later one shares "other". Values
// are never evicted, so a series, once created, keeps counting the same
// bot for the node's life.
const (
	// PressureHighPercent is the share of Config.SendQueue at which a
	// connection counts as under pressure.
	PressureHighPercent = 80
	// PressureLowPercent is the share at or below which a connection
	// under pressure counts as relieved and the crossing re-arms.
	PressureLowPercent = 50
	// MaxPressureApplications bounds the distinct application_id values
	// a node's pressure metrics carry; later bots share "other".
	MaxPressureApplications = 10000
	// PressureUserLabel is application_id for sessions of people.
	PressureUserLabel = "user"
	// PressureOtherLabel is application_id once MaxPressureApplications
	// bots have a value of their own.
	PressureOtherLabel = "other"
)

// pressureState is a connection's send-queue pressure. c.qmu guards it.
type pressureState struct {
	// who is the session the connection carries, set by bindSession.
	who event.Session
	// high is set from a crossing until the queue re-arms or the
	// connection closes; label is the application_id it was counted
	// under.
	high  bool
	label string
}

// bindSession tells c which session it carries, so pressure is counted
// under the session's application. The session calls it when it attaches
// c (identify and RESUME), with its own lock held and before any dispatch
// is queued to c.
func (c *conn) bindSession(info event.Session) {
	c.qmu.Lock()
	c.pressure.who = info
	c.qmu.Unlock()
}

// notePressureLocked records the send queue's depth after it changed: a
// crossing of PressureHighPercent counts and logs once, a fall to
// PressureLowPercent re-arms. c.qmu must be held.
func (c *conn) notePressureLocked(depth int) {
	p := &c.pressure
	bound := c.node.cfg.SendQueue
	// The fuller of the two bounds, in frames of the frame bound.
	if byBytes := c.qbytes * bound / max(c.node.cfg.SendQueueBytes, 1); byBytes > depth {
		depth = byBytes
	}
	switch {
	case !p.high && depth*100 >= bound*PressureHighPercent:
		m := c.node.metrics
		p.high = true
		p.label = m.pressureApps.label(p.who)
		m.bufferPressure.WithLabelValues(p.label).Inc()
		m.bufferPressureSessions.WithLabelValues(p.label).Inc()
		c.node.cfg.Logger.Info("send queue under pressure", "session_id", p.who.ID, "application_id", p.label,
			"user_id", p.who.UserID, "queued", depth, "bound", bound)
	case p.high && depth*100 <= bound*PressureLowPercent:
		c.releasePressureLocked()
	}
}

// releasePressureLocked takes c out of the pressure gauge if it is in it.
// c.qmu must be held.
func (c *conn) releasePressureLocked() {
	p := &c.pressure
	if !p.high {
		return
	}
	p.high = false
	c.node.metrics.bufferPressureSessions.WithLabelValues(p.label).Dec()
}

// appLabels hands out application_id label values, bounded by max
// distinct bots; it is safe for concurrent use.
type appLabels struct {
	max  int
	mu   sync.Mutex
	seen map[snowflake.ID]string
}

func newAppLabels(max int) *appLabels {
	return &appLabels{max: max, seen: make(map[snowflake.ID]string)}
}

// label returns the application_id value for a session: its bot user id
// while fewer than max bots have one, PressureOtherLabel after that, and
// PressureUserLabel for sessions of people.
func (a *appLabels) label(s event.Session) string {
	if !s.Bot || s.UserID == 0 {
		return PressureUserLabel
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if v, ok := a.seen[s.UserID]; ok {
		return v
	}
	if len(a.seen) >= a.max {
		return PressureOtherLabel
	}
	v := s.UserID.String()
	a.seen[s.UserID] = v
	return v
}
