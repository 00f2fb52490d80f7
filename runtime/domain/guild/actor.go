package guild

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/concord-chat/concord/runtime/adapters/store"
	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/event"
	"github.com/concord-chat/concord/runtime/domain/permissions"
)

// op is one unit of work in an actor's mailbox.
type op struct {
	fn  func(a *Actor)
	enq time.Time
	// write, when set, is a message write the actor may commit together
	// with the writes queued right behind it (writebatch.go); fn runs it
	// alone.
	write *batchedWrite
}

// Actor is one guild's state and subscribers, owned by one goroutine.
// Every field below mailbox is touched only by that goroutine.
type Actor struct {
	id       snowflake.ID
	svc      *Service
	mailbox  chan op
	inflight atomic.Int64
	// stats is what GuildStats reads from other goroutines (stats.go).
	stats actorStats

	// failed is set when the guild could not be loaded or was deleted;
	// queued operations then fail with it.
	failed error
	// detached is set when the actor left the service's map because its
	// guild is placed on another node (detachIfPlacedElsewhere).
	detached bool

	guild    store.Guild
	channels map[snowflake.ID]*store.Channel
	roles    map[snowflake.ID]*store.Role
	members  map[snowflake.ID]*store.Member
	engine   *permissions.Engine
	// slow holds, per (channel, user), when the user may send again.
	slow map[slowKey]time.Time
	subs map[event.SessionID]*subscriber
	// subsSorted caches subs in session id order (nil when stale).
	subsSorted []*subscriber
	// pres is the presence and member-list state, built on first use
	// when presence is enabled (presence.go).
	pres *actorPresence
	// voice is the guild's voice states, built on first use (voicestate.go).
	voice *actorVoice
	// passive is the passive-session state, built on first use (passive.go).
	passive *actorPassive
	// sliced is set while relays own the guild's sessions (sliced.go).
	sliced *actorSliced
	// sampler picks the decisions the shadow check recomputes (grant.go).
	sampler permissions.Sampler
	// threadMembers holds, per thread, its members (threads.go).
	threadMembers map[snowflake.ID]map[snowflake.ID]store.ThreadMember
	// newThread is the thread being created while its THREAD_CREATE goes
	// out (newly_created), else 0.
	newThread snowflake.ID
	// backlog records what the actor fanned out since load, for the
	// sessions resubscribed after a move (backlog.go); nil once its
	// bounds passed.
	backlog *moveBacklog
}

type slowKey struct{ channel, user snowflake.ID }

// subscriber is a session attached to the guild and the channels it was
// last told it can see.
type subscriber struct {
	s       event.Session
	visible map[snowflake.ID]bool
}

func newActor(s *Service, id snowflake.ID) *Actor {
	return &Actor{
		id:      id,
		svc:     s,
		mailbox: make(chan op, s.cfg.MailboxSize),
		sampler: s.shadow.Sampler(),
	}
}

// enqueue adds fn to the mailbox, blocking while it is full until ctx ends.
// The caller reserved one in-flight slot (Service.actor); a failed enqueue
// releases it.
func (a *Actor) enqueue(ctx context.Context, fn func(a *Actor)) error {
	return a.enqueueOp(ctx, op{fn: fn})
}

// enqueueOp is enqueue of a prepared op.
func (a *Actor) enqueueOp(ctx context.Context, o op) error {
	o.enq = time.Now()
	select {
	case a.mailbox <- o:
		a.svc.metrics.mailboxLength.Inc()
		return nil
	default:
	}
	select {
	case a.mailbox <- o:
		a.svc.metrics.mailboxLength.Inc()
		return nil
	case <-ctx.Done():
		a.inflight.Add(-1)
		return fmt.Errorf("guild %d mailbox full: %w: %w", a.id, ErrUnavailable, ctx.Err())
	case <-a.svc.done:
		a.inflight.Add(-1)
		return fmt.Errorf("guild %d: %w: service closed", a.id, ErrUnavailable)
	}
}

func (a *Actor) hasSessions() bool { return len(a.subs) > 0 }

// detachIfPlacedElsewhere takes the actor of a guild the ring places on
// another node out of the service's map once an operation is done and
// before its caller hears back (Config.Owns): a request that follows can
// only load the guild afresh, with the owner's writes since. Operations
// reserved meanwhile still run on this copy (drain); they were
// concurrent with this one. An actor with sessions stays: the sweep
// unloads it, telling its sessions.
func (a *Actor) detachIfPlacedElsewhere() {
	own := a.svc.cfg.Owns
	if own == nil || a.detached || a.hasSessions() || own(a.id) {
		return
	}
	a.svc.retire(a, true)
	a.detached = true
}

// run is the actor goroutine: load, then process the mailbox until the
// actor retires or the service closes.
func (a *Actor) run() {
	ctx := context.Background()
	if err := a.load(ctx); err != nil {
		a.failed = err
		a.svc.log.Warn("guild load failed", "guild_id", a.id, "err", err)
		a.svc.retire(a, true)
		a.drain()
		return
	}
	a.publishStats()
	a.svc.log.Debug("guild loaded", "guild_id", a.id, "members", len(a.members), "channels", len(a.channels))
	idle := time.NewTimer(a.svc.cfg.IdleTimeout)
	defer idle.Stop()
	for {
		select {
		case o := <-a.mailbox:
			if o.write != nil {
				a.processWrites(o)
			} else {
				a.process(o)
			}
			if a.failed != nil {
				// Moved to another node or deleted: its relays drop
				// the guild's slices.
				a.releaseSlices(ctx)
				a.svc.retire(a, true)
				a.drain()
				return
			}
			if a.detached {
				a.drain()
				a.svc.log.Debug("guild unloaded: placed on another node", "guild_id", a.id)
				return
			}
			if !idle.Stop() {
				select {
				case <-idle.C:
				default:
				}
			}
			idle.Reset(a.svc.cfg.IdleTimeout)
		case <-idle.C:
			if a.svc.retire(a, false) {
				a.svc.log.Debug("guild unloaded", "guild_id", a.id)
				return
			}
			idle.Reset(a.svc.cfg.IdleTimeout)
		case <-a.svc.done:
			for {
				select {
				case o := <-a.mailbox:
					a.process(o)
				default:
					// The node is stopping: its relays drop the
					// guild's slices (a new owner that hands its
					// sessions to relays replaces them anyway; one
					// that does not would leave them behind). The
					// wait is bounded: shutdown must not hang on a
					// relay.
					rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
					a.releaseSlices(rctx)
					cancel()
					return
				}
			}
		}
	}
}

func (a *Actor) process(o op) {
	a.begin(o)
	o.fn(a)
	a.end()
}

// begin counts an op taken from the mailbox.
func (a *Actor) begin(o op) {
	a.svc.metrics.mailboxLength.Dec()
	now := time.Now()
	age := now.Sub(o.enq)
	a.svc.metrics.eventAge.Observe(age.Seconds())
	a.stats.observe(now, age)
}

// end counts an op done.
func (a *Actor) end() {
	a.publishStats()
	a.inflight.Add(-1)
}

// drain runs the operations reserved before the actor retired; they see
// a.failed. No new reservation can happen once retired.
func (a *Actor) drain() {
	for a.inflight.Load() > 0 {
		a.process(<-a.mailbox)
	}
}

// load reads the guild's state from the store and builds the engine.
func (a *Actor) load(ctx context.Context) error {
	gs, err := a.svc.deps.Store.LoadGuild(ctx, a.id)
	if errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("load guild %d: %w", a.id, ErrUnknownGuild)
	}
	if err != nil {
		return fmt.Errorf("load guild %d: %w: %w", a.id, ErrUnavailable, err)
	}
	a.guild = gs.Guild
	a.channels = make(map[snowflake.ID]*store.Channel, len(gs.Channels))
	a.roles = make(map[snowflake.ID]*store.Role, len(gs.Roles))
	a.members = make(map[snowflake.ID]*store.Member, len(gs.Members))
	a.slow = make(map[slowKey]time.Time)
	a.subs = make(map[event.SessionID]*subscriber)
	a.startBacklog()
	a.engine = permissions.NewEngine(a.id, gs.Guild.OwnerID)
	for i := range gs.Roles {
		a.setRole(gs.Roles[i])
	}
	for i := range gs.Channels {
		c := gs.Channels[i]
		// last_message_id is kept in memory on every message and
		// recovered here from history, so a send costs one write.
		if c.Type == store.ChannelText || c.Type == store.ChannelVoice || c.Thread != nil {
			if ms, err := a.svc.deps.Store.ListMessages(ctx, c.ID, store.HistoryQuery{Limit: 1}); err == nil && len(ms) > 0 && ms[0].ID > c.LastMessageID {
				c.LastMessageID = ms[0].ID
			}
		}
		a.channels[c.ID] = &c
		a.engine.SetOverwrites(c.ID, engineOverwrites(c.Overwrites))
		a.svc.channelGuild.Store(c.ID, a.id)
	}
	for i := range gs.Members {
		m := gs.Members[i]
		a.members[m.UserID] = &m
		a.engine.SetMember(engineMember(m))
	}
	return a.loadThreads(ctx)
}

func engineOverwrites(ows []store.Overwrite) []permissions.Overwrite {
	out := make([]permissions.Overwrite, 0, len(ows))
	for _, o := range ows {
		out = append(out, permissions.Overwrite{ID: o.ID, Member: o.Type == store.OverwriteMember, Allow: permissions.Bits(o.Allow), Deny: permissions.Bits(o.Deny)})
	}
	return out
}

func engineMember(m store.Member) permissions.Member {
	return permissions.Member{UserID: m.UserID, Roles: m.Roles, TimeoutUntil: m.CommunicationDisabledUntil}
}
