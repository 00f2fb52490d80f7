package liverole

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"

	"github.com/concord-chat/concord/runtime/adapters/eventlog"
	"github.com/concord-chat/concord/runtime/domain/live"
)

// caughtUp is the event log as the live-router and live-archiver roles of
// `concord serve` consume it: it watches one consumer group and tells the
// process's /readyz whether this member is serving its share. A member is
// ready once it is in a generation of the group, owns at least one
// partition of the topic, has started every partition it owns, and has
// marked each of them up to where the partition ended when its claim
// began — the router has republished and the archiver has stored what was
// waiting. Every rebalance starts the count again: a member is unready
// between generations, when it owns nothing, and while it catches up on
// partitions it was just given.
type caughtUp struct {
	live.Consumer
	in    eventlog.Inspector
	role  string
	group string
	topic string

	mu      sync.Mutex
	inGen   bool
	claims  int             // partitions of topic claimed in the generation
	started int             // of them, claims whose end has been read
	pending map[int32]int64 // partition -> end at claim, until marked past
}

// newCaughtUp wraps c for group's consumption of topic. The topic is
// created if it does not exist yet, with the partitions the API pins
// streams to, so a first start on a fresh Kafka has partitions to claim.
func newCaughtUp(ctx context.Context, c live.Consumer, role, group, topic string) (*caughtUp, error) {
	in, ok := c.(eventlog.Inspector)
	if !ok {
		return nil, fmt.Errorf("%s: the event log %T cannot report partition ends", role, c)
	}
	if pinned, ok := c.(eventlog.Pinned); ok {
		if _, err := pinned.Partitions(ctx, topic); err != nil {
			return nil, fmt.Errorf("%s: partitions of %s: %w", role, topic, err)
		}
	}
	return &caughtUp{Consumer: c, in: in, role: role, group: group, topic: topic, pending: map[int32]int64{}}, nil
}

// Ready is the role's readiness (lifecycle.Part.Ready).
func (c *caughtUp) Ready() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case !c.inGen:
		return fmt.Errorf("%s: not in a generation of consumer group %s yet", c.role, c.group)
	case c.claims == 0:
		return fmt.Errorf("%s: owns no partition of %s", c.role, c.topic)
	case c.started < c.claims:
		return fmt.Errorf("%s: starting %d of %d partitions", c.role, c.claims-c.started, c.claims)
	case len(c.pending) > 0:
		return fmt.Errorf("%s: catching up on %d of %d partitions", c.role, len(c.pending), c.claims)
	}
	return nil
}

// Consume implements live.Consumer, watching c.group's sessions.
func (c *caughtUp) Consume(ctx context.Context, group string, topics []string, h eventlog.Handler) error {
	if group == c.group {
		h = watchedHandler{Handler: h, c: c}
	}
	return c.Consumer.Consume(ctx, group, topics, h)
}

// watchedHandler reports a generation's claims and marks to c.
type watchedHandler struct {
	eventlog.Handler
	c *caughtUp
}

func (w watchedHandler) Setup(ctx context.Context, s eventlog.Session) error {
	c := w.c
	c.mu.Lock()
	c.inGen, c.claims, c.started = true, len(s.Claims()[c.topic]), 0
	clear(c.pending)
	c.mu.Unlock()
	return w.Handler.Setup(ctx, watchedSession{Session: s, c: c})
}

func (w watchedHandler) ConsumeClaim(ctx context.Context, s eventlog.Session, cl eventlog.Claim) error {
	c := w.c
	if cl.Topic() == c.topic {
		end, err := c.end(ctx, cl.Partition())
		c.mu.Lock()
		c.started++
		switch {
		case err != nil:
			// Not knowing where the partition ends, the member cannot say
			// it caught up: unready until the next generation.
			c.pending[cl.Partition()] = math.MaxInt64
		case cl.InitialOffset() < 0:
			// A group without a commit starts at the log's oldest record
			// (Kafka reports the sentinel, not the offset): behind if the
			// partition holds any record. A partition whose every record
			// expired would keep the member unready; that needs a group
			// with no commit and a partition quiet for the retention.
			if end > 0 {
				c.pending[cl.Partition()] = end
			}
		case end > cl.InitialOffset():
			c.pending[cl.Partition()] = end
		}
		c.mu.Unlock()
	}
	return w.Handler.ConsumeClaim(ctx, watchedSession{Session: s, c: c}, cl)
}

func (w watchedHandler) Cleanup(ctx context.Context, s eventlog.Session) error {
	c := w.c
	c.mu.Lock()
	c.inGen = false
	c.mu.Unlock()
	return w.Handler.Cleanup(ctx, watchedSession{Session: s, c: c})
}

// end reads where partition p of the topic ends now.
func (c *caughtUp) end(ctx context.Context, p int32) (int64, error) {
	ends, err := c.in.End(ctx, c.topic)
	if err != nil {
		return 0, err
	}
	if int(p) >= len(ends) {
		return 0, errors.New("partition beyond the topic's end offsets")
	}
	return ends[p], nil
}

// watchedSession passes marks on and counts them.
type watchedSession struct {
	eventlog.Session
	c *caughtUp
}

func (w watchedSession) Mark(topic string, partition int32, next int64) {
	if topic == w.c.topic {
		w.c.mu.Lock()
		if end, ok := w.c.pending[partition]; ok && next >= end {
			delete(w.c.pending, partition)
		}
		w.c.mu.Unlock()
	}
	w.Session.Mark(topic, partition, next)
}
