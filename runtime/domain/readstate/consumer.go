package readstate

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/concord-chat/concord/runtime/adapters/eventlog"
	"github.com/concord-chat/concord/runtime/base/snowflake"
)

// consumerState is what the mention consumer shares with Flush: the offsets
// applied per partition and the session to mark them on.
type consumerState struct {
	mu      sync.Mutex
	applied map[int32]int64 // next offset per partition of the topic
	sess    eventlog.Session
	topic   string
	claims  []int32
}

func (c *consumerState) snapshot() map[int32]int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[int32]int64, len(c.applied))
	for p, o := range c.applied {
		out[p] = o
	}
	return out
}

func (c *consumerState) advance(p int32, next int64) {
	c.mu.Lock()
	if next > c.applied[p] {
		c.applied[p] = next
	}
	c.mu.Unlock()
}

// mark marks applied offsets of partitions this member still owns.
func (c *consumerState) mark(applied map[int32]int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.sess == nil {
		return
	}
	for _, p := range c.claims {
		if o, ok := applied[p]; ok {
			c.sess.Mark(c.topic, p, o)
		}
	}
}

// Run consumes message events from l for mention counting and flushes
// every FlushInterval, until ctx is done; it then flushes a last time.
func (s *Service) Run(ctx context.Context, l eventlog.Log) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(s.cfg.FlushInterval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			case <-s.kick:
			}
			if err := s.Flush(ctx); err != nil {
				s.cfg.Logger.Warn("readstate flush failed", "err", err)
			}
		}
	}()
	err := l.Consume(ctx, s.cfg.Group, []string{s.cfg.Topic}, (*handler)(s))
	cancel()
	<-done
	if ferr := s.Flush(context.WithoutCancel(ctx)); ferr != nil && err == nil {
		err = ferr
	}
	return err
}

// Handler returns the eventlog.Handler of the mention consumer, for callers
// that run Consume themselves (tests, benchmarks). Run uses it.
func (s *Service) Handler() eventlog.Handler { return (*handler)(s) }

type handler Service

func (h *handler) Setup(ctx context.Context, sess eventlog.Session) error {
	s := (*Service)(h)
	claims := append([]int32(nil), sess.Claims()[s.cfg.Topic]...)
	slices.Sort(claims)
	s.cons.mu.Lock()
	changed := !slices.Equal(claims, s.cons.claims)
	s.cons.sess, s.cons.topic, s.cons.claims = sess, s.cfg.Topic, claims
	// Offsets of partitions this member no longer owns must not be marked.
	for p := range s.cons.applied {
		if !slices.Contains(claims, p) {
			delete(s.cons.applied, p)
		}
	}
	s.cons.mu.Unlock()
	if changed {
		// Another member may have changed records of channels that moved:
		// write ours (Cleanup did; acks may have come since), then forget
		// the cache so records are reloaded from the store. Not under the
		// generation's context: a rebalance during Setup would fail the
		// flush, and with it the member, as Cleanup's would.
		if err := s.Flush(context.WithoutCancel(ctx)); err != nil {
			return err
		}
		s.users.dropClean()
		s.channels.dropClean()
	}
	return nil
}

func (h *handler) Cleanup(ctx context.Context, sess eventlog.Session) error {
	s := (*Service)(h)
	err := s.Flush(context.WithoutCancel(ctx))
	s.cons.mu.Lock()
	s.cons.sess = nil
	s.cons.mu.Unlock()
	if err != nil {
		return err
	}
	return sess.Commit(context.WithoutCancel(ctx))
}

func (h *handler) ConsumeClaim(ctx context.Context, sess eventlog.Session, c eventlog.Claim) error {
	s := (*Service)(h)
	for r := range c.Records() {
		if err := s.Apply(ctx, r); err != nil {
			if ctx.Err() != nil {
				// The generation ended while r was applied: r stays
				// unapplied (its offset is not advanced, so not marked),
				// and whoever owns the partition next applies it again
				// from the committed offset. An error here would end the
				// member, not the generation.
				return nil
			}
			return err
		}
		s.cons.advance(r.Partition, r.Offset+1)
	}
	return nil
}

// Apply counts the mentions of one record of the messages topic. It is
// idempotent: a record already applied (by offset) or a message already
// counted (by id) changes nothing. A record that does not decode is logged
// and skipped.
func (s *Service) Apply(ctx context.Context, r eventlog.Record) error {
	ev, err := eventlog.DecodeMessageEvent(r.Value)
	if err != nil {
		s.cfg.Logger.Warn("readstate: skipping undecodable event", "partition", r.Partition, "offset", r.Offset, "err", err)
		return nil
	}
	s.m.events.Inc()
	s.m.nEvents.Add(1)
	if !r.Time.IsZero() {
		s.m.lag.Observe(time.Since(r.Time).Seconds())
	}
	off := r.Offset

	// Channel level: dedupe by message id, @everyone entries.
	dup, everyone := false, false
	err = s.channels.do(ctx, ev.ChannelID, s.loadChannel(ev.ChannelID), func(c *channelEntry) {
		if ev.Type == eventlog.MessageCreate {
			if at, ok := c.seenAt(ev.MessageID); ok && at != off {
				dup = true // the same message published again
				return
			}
		}
		if ev.Type == eventlog.MessageDelete {
			c.markDeleted(ev.MessageID, off)
		}
		if off < c.rec.NextOffset {
			return // replay: channel-level effects are already in
		}
		c.rec.NextOffset = off + 1
		c.dirty = true
		switch ev.Type {
		case eventlog.MessageCreate:
			c.rec.Seen = append(c.rec.Seen, SeenMessage{MessageID: ev.MessageID, Offset: off})
			if n := len(c.rec.Seen) - s.cfg.SeenPerChannel; n > 0 {
				c.rec.Seen = append(c.rec.Seen[:0], c.rec.Seen[n:]...)
			}
			if ev.MentionEveryone {
				addEveryone(&c.rec, ChannelMention{MessageID: ev.MessageID, AuthorID: ev.AuthorID}, s.cfg.ChannelMentions)
				everyone = true
			}
		case eventlog.MessageDelete:
			c.rec.Everyone = slices.DeleteFunc(c.rec.Everyone, func(m ChannelMention) bool { return m.MessageID == ev.MessageID })
		}
	})
	if err != nil {
		return err
	}
	if everyone {
		// Other read-state nodes read the channel's record from the
		// store: write it soon rather than at the next interval.
		select {
		case s.kick <- struct{}{}:
		default:
		}
	}
	if dup {
		s.m.duplicates.Inc()
		s.m.nDuplicates.Add(1)
		return nil
	}
	if ev.Type != eventlog.MessageCreate && ev.Type != eventlog.MessageDelete {
		return nil
	}

	// User level: one increment per mentioned user (directly or by role),
	// or a removal when a message is deleted (its delete event carries the
	// mentions it was stored with). Whether a removal lowers a count is
	// the owner's to decide: only a record that counts the message has it
	// in its Mentions, however old the message, and takes it out once, so
	// a delete published twice or replayed lowers nothing again.
	targets, err := s.targets(ctx, ev)
	if err != nil {
		return err
	}
	if len(targets) == 0 {
		return nil
	}
	ms := make([]Mention, len(targets))
	for i, u := range targets {
		ms[i] = Mention{User: u, Channel: ev.ChannelID, Message: ev.MessageID, Offset: off, Removed: ev.Type == eventlog.MessageDelete}
	}
	if err := s.cfg.Mentions.AddMentions(ctx, ms); err != nil {
		return fmt.Errorf("readstate: hand mentions of message %d to their owners: %w", ev.MessageID, err)
	}
	return nil
}

// targets lists the users a message mentions, directly or through a role,
// without its author and without users who cannot see the channel.
func (s *Service) targets(ctx context.Context, ev eventlog.MessageEvent) ([]snowflake.ID, error) {
	set := map[snowflake.ID]bool{}
	for _, u := range ev.Mentions {
		set[u] = true
	}
	if s.roles != nil {
		for _, role := range ev.MentionRoles {
			members, err := s.roles.RoleMembers(ctx, ev.GuildID, role)
			if err != nil {
				if errors.Is(err, context.Canceled) {
					return nil, err
				}
				return nil, fmt.Errorf("readstate: expand role %d: %w", role, err)
			}
			for _, u := range members {
				set[u] = true
			}
		}
	}
	delete(set, ev.AuthorID)
	out := make([]snowflake.ID, 0, len(set))
	for u := range set {
		if s.vis.CanView(ctx, u, ev.ChannelID) {
			out = append(out, u)
		}
	}
	// "Cannot see" answered under a cancelled context is no decision:
	// the check gave up (a guild owner asked over the network, say).
	// Counting without the user would lose the mention for good.
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("readstate: visibility of the users message %d mentions: %w", ev.MessageID, err)
	}
	slices.Sort(out)
	return out, nil
}

// addEveryone inserts m keeping the list ascending and at most keep long.
func addEveryone(r *ChannelRecord, m ChannelMention, keep int) {
	i, found := slices.BinarySearchFunc(r.Everyone, m.MessageID, func(x ChannelMention, id snowflake.ID) int {
		switch {
		case x.MessageID < id:
			return -1
		case x.MessageID > id:
			return 1
		}
		return 0
	})
	if found {
		return
	}
	r.Everyone = slices.Insert(r.Everyone, i, m)
	if n := len(r.Everyone) - keep; n > 0 {
		r.Everyone = append(r.Everyone[:0], r.Everyone[n:]...)
	}
}
