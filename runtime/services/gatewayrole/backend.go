package gatewayrole

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/concord-chat/concord/runtime/adapters/registry"
	"github.com/concord-chat/concord/runtime/adapters/store"
	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/event"
	"github.com/concord-chat/concord/runtime/domain/guild"
	"github.com/concord-chat/concord/runtime/edge/gateway"
	"github.com/concord-chat/concord/runtime/services/transport"
)

// ringBackend is the gateway.Backend of a gateway node of `concord
// serve`, whose guilds run on the guild nodes.
//
// Identify runs locally: the token is verified with the cluster's shared
// key and READY is read from the store (guild.Reader.Identify: no actor,
// no guild service); the admission in front (runtime/edge/admission) adds the
// read states and the bot checks. Subscribe attaches the session to each of its guilds
// on the guild node owning it (GuildClient.Subscribe); that node's actor
// sends GUILD_CREATE and then the guild's events back through
// GatewayNode.Deliver. The backend keeps guild → sessions; when the ring
// moves a guild (its node died, or a node joined), it subscribes the
// guild's sessions again on the new owner, flagged as moved
// (GuildClient.SubscribeMoved): the new owner's actor, which may have
// dispatched events since it loaded the guild, first delivers those the
// session would have received, so none falls between the two owners
// (guild.Service.AttachMovedSession).
// Subscriptions that fail because the owner is unreachable are retried
// at every ring change and every retry interval.
type ringBackend struct {
	identify *guild.Reader
	store    store.Guilds
	guilds   transport.GuildClient
	ring     *registry.LocalRing
	log      *slog.Logger
	timeout  time.Duration
	// resubscribed counts subscriptions sent again (follow).
	resubscribed prometheus.Counter

	mu      sync.Mutex
	byGuild map[snowflake.ID]map[event.SessionID]*subscription
	bySess  map[event.SessionID][]snowflake.ID
	// busy holds the guilds being resubscribed; again marks those whose
	// resubscription must run once more when the current one ends.
	busy  map[snowflake.ID]bool
	again map[snowflake.ID]bool
	// released are the sessions handed to a successor node
	// (ReleaseSession): a subscription of theirs that completes late is
	// not undone.
	released map[event.SessionID]bool
	// users indexes the node's sessions by user: the node's part of the
	// session directory (sessions.go).
	users userIndex
}

// subscription is one session's attachment to one guild.
type subscription struct {
	s event.Session
	// ok is false until a Subscribe on the current owner succeeded.
	ok bool
	// gen counts the ring moves of the guild; a Subscribe started before
	// the last one does not count.
	gen uint64
	// calling is gen+1 while a Subscribe for generation gen is in flight
	// (0: none). The retry loop leaves such a subscription to that call: a
	// second call would attach the session again and send it a second
	// GUILD_CREATE, which is what a slow first subscribe under load did.
	calling uint64
	// attached is set once a Subscribe succeeded on some owner: the
	// session has the guild's GUILD_CREATE, so a subscription after the
	// ring moved the guild is sent flagged as moved.
	attached bool
	// refresh is set when a ring move took the guild from an owner that
	// left the cluster (stopped or died) before a Subscribe on the new
	// owner succeeded: the moved subscription asks for GUILD_CREATE too,
	// since events the old owner had not delivered may be lost.
	refresh bool
}

// waiting reports whether the subscription needs a Subscribe on the
// current owner that nobody is making yet.
func (sub *subscription) waiting() bool { return !sub.ok && sub.calling != sub.gen+1 }

var _ gateway.Backend = (*ringBackend)(nil)

// newRingBackend returns the backend that identifies with identify,
// reads each session's guilds from st and subscribes them on their
// owners through guilds, following ring; resubscribed (nil: none) counts
// the subscriptions it sends again.
func newRingBackend(identify *guild.Reader, st store.Guilds, guilds transport.GuildClient, ring *registry.LocalRing, timeout time.Duration, resubscribed prometheus.Counter, log *slog.Logger) *ringBackend {
	if resubscribed == nil {
		resubscribed = prometheus.NewCounter(prometheus.CounterOpts{Name: "concord_cluster_resubscriptions_total"})
	}
	return &ringBackend{
		resubscribed: resubscribed,
		identify:     identify,
		store:        st,
		guilds:       guilds,
		ring:         ring,
		log:          log,
		timeout:      timeout,
		byGuild:      make(map[snowflake.ID]map[event.SessionID]*subscription),
		bySess:       make(map[event.SessionID][]snowflake.ID),
		busy:         make(map[snowflake.ID]bool),
		again:        make(map[snowflake.ID]bool),
		released:     make(map[event.SessionID]bool),
		users:        newUserIndex(),
	}
}

// Identify implements gateway.Backend.
func (b *ringBackend) Identify(ctx context.Context, token string, s event.Session) (event.Ready, error) {
	r, err := b.identify.Identify(ctx, token, s)
	return r, identifyError(err)
}

// Subscribe implements gateway.Backend: it records the session's guilds
// (those on its shard) and subscribes it on each owner. Guilds whose
// owner is unreachable are retried in the background.
func (b *ringBackend) Subscribe(ctx context.Context, s event.Session) error {
	b.Disconnect(ctx, s)
	ids, err := b.store.UserGuilds(ctx, s.UserID)
	if err != nil {
		return err
	}
	var mine []snowflake.ID
	for _, g := range ids {
		if onShard(s, g) {
			mine = append(mine, g)
		}
	}
	b.users.put(s)
	b.mu.Lock()
	b.bySess[s.ID] = mine
	for _, g := range mine {
		if b.byGuild[g] == nil {
			b.byGuild[g] = make(map[event.SessionID]*subscription)
		}
		// In flight from here: the calls below make it.
		b.byGuild[g][s.ID] = &subscription{s: s, calling: 1}
	}
	b.mu.Unlock()
	// Guilds live on different nodes: subscribe on a few at once.
	sem := make(chan struct{}, subscribeParallel)
	var wg sync.WaitGroup
	for _, g := range mine {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			b.subscribe(ctx, g, s)
		}()
	}
	wg.Wait()
	return nil
}

// subscribeParallel bounds the guild subscriptions one identify runs at
// once.
const subscribeParallel = 8

// subscribe attaches s to g on g's owner and records the outcome.
func (b *ringBackend) subscribe(ctx context.Context, g snowflake.ID, s event.Session) {
	b.mu.Lock()
	var gen uint64
	call := b.guilds.Subscribe
	if sub := b.byGuild[g][s.ID]; sub != nil {
		gen = sub.gen
		sub.calling = gen + 1
		if sub.attached {
			refresh := sub.refresh
			call = func(ctx context.Context, g snowflake.ID, s event.Session) error {
				return b.guilds.SubscribeMoved(ctx, g, s, refresh)
			}
		}
	}
	b.mu.Unlock()
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), b.timeout)
	err := call(cctx, g, s)
	cancel()
	b.mu.Lock()
	defer b.mu.Unlock()
	sub := b.byGuild[g][s.ID]
	if sub != nil && sub.calling == gen+1 {
		sub.calling = 0
	}
	switch {
	case sub == nil:
		// Disconnected meanwhile: undo on the guild node, unless the
		// session was handed to another node, which now owns it there.
		if err == nil && !b.released[s.ID] {
			go b.detach(g, s)
		}
	case sub.gen != gen:
		// The guild moved during the call: follow subscribes again,
		// flagged as moved if this call attached the session.
		sub.attached = sub.attached || err == nil
	case err == nil:
		sub.ok = true
		sub.attached = true
		sub.refresh = false
	case errors.Is(err, guild.ErrMissingAccess) || errors.Is(err, guild.ErrUnknownGuild):
		b.log.Debug("session not subscribed", "session_id", s.ID, "guild_id", g, "err", err)
		b.removeLocked(g, s.ID)
	default:
		sub.ok = false
		b.log.Info("subscribe failed, will retry", "session_id", s.ID, "guild_id", g, "err", err)
	}
}

// Disconnect implements gateway.Backend.
func (b *ringBackend) Disconnect(ctx context.Context, s event.Session) {
	b.users.remove(s.ID)
	b.mu.Lock()
	ids := b.bySess[s.ID]
	delete(b.bySess, s.ID)
	for _, g := range ids {
		b.removeLocked(g, s.ID)
	}
	b.mu.Unlock()
	for _, g := range ids {
		b.detach(g, s)
	}
}

func (b *ringBackend) detach(g snowflake.ID, s event.Session) {
	ctx, cancel := context.WithTimeout(context.Background(), b.timeout)
	defer cancel()
	if err := b.guilds.Disconnect(ctx, g, s); err != nil {
		b.log.Debug("disconnect from guild", "session_id", s.ID, "guild_id", g, "err", err)
	}
}

func (b *ringBackend) removeLocked(g snowflake.ID, id event.SessionID) {
	if m := b.byGuild[g]; m != nil {
		delete(m, id)
		if len(m) == 0 {
			delete(b.byGuild, g)
		}
	}
}

// follow resubscribes the sessions of every guild the ring moves, and
// retries failed subscriptions at every change and every interval, until
// ctx ends.
func (b *ringBackend) follow(ctx context.Context, interval time.Duration) {
	changes := b.ring.Changes(ctx)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		var moved []snowflake.ID
		// gone holds the moved guilds whose old owner left the cluster.
		gone := make(map[snowflake.ID]bool)
		select {
		case c, ok := <-changes:
			if !ok {
				return
			}
			b.mu.Lock()
			for g := range b.byGuild {
				if c.Moved(g) {
					moved = append(moved, g)
					gone[g] = ownerLeft(c, g)
				}
			}
			b.mu.Unlock()
			if len(moved) > 0 {
				b.log.Info("guilds moved, resubscribing their sessions", "guilds", len(moved), "revision", c.New.Revision)
			}
		case <-t.C:
		case <-ctx.Done():
			return
		}
		b.mu.Lock()
		for _, g := range moved {
			for _, sub := range b.byGuild[g] {
				sub.ok = false
				sub.gen++
				sub.refresh = sub.refresh || gone[g]
			}
		}
		var todo []snowflake.ID
		for g, subs := range b.byGuild {
			for _, sub := range subs {
				if sub.waiting() {
					todo = append(todo, g)
					break
				}
			}
		}
		b.mu.Unlock()
		for _, g := range todo {
			b.resubscribe(ctx, g)
		}
	}
}

// ownerLeft reports whether the node that owned g before change c is no
// longer registered: it stopped or died, rather than handing the guild to
// a node that joined or a placement.
func ownerLeft(c registry.Change, g snowflake.ID) bool {
	o, ok := c.Old.Owner(g)
	if !ok {
		return false
	}
	_, live := c.New.Node(o.Name)
	return !live
}

// resubscribe subscribes the guild's sessions that are not subscribed on
// the current owner, one guild at a time per guild (a second request
// while one runs makes it run again afterwards).
func (b *ringBackend) resubscribe(ctx context.Context, g snowflake.ID) {
	b.mu.Lock()
	if b.busy[g] {
		b.again[g] = true
		b.mu.Unlock()
		return
	}
	b.busy[g] = true
	b.mu.Unlock()
	go func() {
		for {
			b.mu.Lock()
			var list []event.Session
			for _, sub := range b.byGuild[g] {
				if sub.waiting() {
					sub.calling = sub.gen + 1 // in flight from here: the loop below makes it
					list = append(list, sub.s)
				}
			}
			b.mu.Unlock()
			for _, s := range list {
				if ctx.Err() != nil {
					break
				}
				b.resubscribed.Inc()
				b.subscribe(ctx, g, s)
			}
			b.mu.Lock()
			if !b.again[g] || ctx.Err() != nil {
				delete(b.busy, g)
				delete(b.again, g)
				b.mu.Unlock()
				return
			}
			delete(b.again, g)
			b.mu.Unlock()
		}
	}()
}

// onShard reports whether a session's shard carries a guild, by Discord's
// rule shard_id = (guild_id >> 22) % num_shards.
func onShard(s event.Session, g snowflake.ID) bool {
	if s.ShardCount <= 1 {
		return true
	}
	return int((uint64(g)>>22)%uint64(s.ShardCount)) == s.ShardID
}
