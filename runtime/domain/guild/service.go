// Package guild runs Concord's guild actors: one goroutine per loaded guild
// that owns the guild's state (channels, roles, overwrites, members,
// slowmode clocks, a permissions engine) and its subscribed gateway
// sessions, and applies every operation — authorising a send, changing a
// role, publishing a message — in one order.
//
// Changes are written through: the store first, then memory, then the
// event, so an acknowledged change survives a crash. Events are filtered
// per session (VIEW_CHANNEL, intents, MESSAGE_CONTENT) and handed to
// gateway nodes as one event.Batch per node, each payload variant
// serialised once.
//
// Private channels (DMs and group DMs) have no guild: the Service routes
// their events per user through one ordered private-channel mailbox.
package guild

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/concord-chat/concord/runtime/adapters/eventlog/outbox"
	"github.com/concord-chat/concord/runtime/adapters/store"
	"github.com/concord-chat/concord/runtime/base/clock"
	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/auth"
	"github.com/concord-chat/concord/runtime/domain/event"
	"github.com/concord-chat/concord/runtime/domain/permissions"
	"github.com/concord-chat/concord/runtime/domain/wire"
)

// IDSource mints snowflakes; *snowflake.Generator implements it.
type IDSource interface {
	Next() (snowflake.ID, error)
}

// Config configures a Service. Zero fields take the stated defaults.
type Config struct {
	// MailboxSize bounds each actor's mailbox (default 1024).
	MailboxSize int
	// IdleTimeout unloads an actor that has had no sessions and no work
	// for this long (default 10 minutes).
	IdleTimeout time.Duration
	// LargeThreshold is the member count above which GUILD_CREATE carries
	// only the session's own member and `large` is true (default 250).
	LargeThreshold int
	// Logger receives the service's log lines (default: discard).
	Logger *slog.Logger
	// Now returns the current time (default clock.Now, the fault-testable wall clock).
	Now func() time.Time
	// Registerer receives the concord_guild_* metrics (event age, mailbox
	// length, loaded actors, deliveries) and the shadow check's
	// concord_permissions_shadow_* counters; nil registers nothing.
	Registerer prometheus.Registerer
	// ShadowEvery samples one fan-out or read permission decision in
	// ShadowEvery and recomputes it from scratch from the actor's state,
	// counting disagreements with the cached engine (default
	// permissions.DefaultShadowEvery, 1000; negative disables).
	ShadowEvery int
	// Owns reports whether the placement ring gives this node a guild;
	// nil owns every guild (one process). An actor of a guild placed
	// elsewhere, loaded by a request that is not the guild's own (GET
	// /users/@me/guilds or POST /guilds, which any node serves), leaves
	// the service's map when the operation is done, before its caller
	// hears back, unless a session is attached: the next such request
	// loads the owner's writes afresh instead of answering from a copy
	// that stopped following them.
	Owns func(snowflake.ID) bool
	// SliceThreshold is the number of online sessions above which a
	// guild hands its sessions to relays (Deps.Slices), each relay owning
	// at most SliceSize of them (defaults 15,000 and 15,000; sliced.go).
	SliceThreshold int
	SliceSize      int
}

// Deps are the Service's collaborators.
type Deps struct {
	// Store holds guild state, users and messages. Required.
	Store store.Store
	// Messages writes message changes with their events for the durable
	// log (Messages.Create, Messages.Update, Messages.Delete); nil writes them
	// to Store without events (outbox.Unlogged).
	Messages outbox.Writer
	// Sink receives every dispatch for gateway nodes. Required.
	Sink event.Sink
	// IDs mints ids for guilds, channels and roles. Required.
	IDs IDSource
	// Auth verifies tokens for Identify. Required for the gateway backend.
	Auth *auth.Issuer
	// Relays, when set, carries the dispatches of guilds that have a
	// relay tier (RelayTier): one request per relay instead of one batch
	// per gateway node. Nil delivers every batch through Sink.
	Relays Relayer
	// Slices, when set, is the relay tier that owns session slices of
	// guilds above Config.SliceThreshold online sessions and filters
	// their events itself (sliced.go). Nil: the owner filters every
	// session.
	Slices Slicer
	// Sessions, when set, is the cluster's session directory: events
	// aimed at one user (DMs, group DMs, MESSAGE_ACK, a bot's
	// interactions) reach the user's sessions on every gateway node, not
	// only those subscribed to a guild of this process, and a guild the
	// user joins is subscribed through each session's gateway node, which
	// then follows it like the guilds it subscribed at IDENTIFY. Nil
	// (`concord dev`) uses this service's own index, which holds every
	// session of the process.
	Sessions SessionDirectory
}

// SessionDirectory finds users' sessions on every gateway node and
// subscribes a session to a guild through its gateway node.
type SessionDirectory interface {
	UserSessions(ctx context.Context, users []snowflake.ID) ([]event.Session, error)
	SubscribeGuild(ctx context.Context, s event.Session, guildID snowflake.ID) (found bool, err error)
}

// Relayer sends a big guild's dispatches through its relay tier.
type Relayer interface {
	// Relay hands one dispatch for the sessions of several gateway nodes
	// (targets by node) to the guild's relays. It returns false, having
	// sent nothing, when the guild has no relays; nodes whose relay could
	// not take the dispatch are returned in failed for direct delivery.
	Relay(ctx context.Context, guildID snowflake.ID, typ string, payloads []json.RawMessage, byNode map[string][]event.Target) (relayed bool, failed []string)
}

// Service owns the process's guild actors, the per-user session index and
// the private-channel router. It is safe for concurrent use.
type Service struct {
	// Voice is the voice seam: Enable, voice moderation, the regions
	// (voicestate.go, voicemod.go).
	Voice *Voice
	// Threads is the threads seam: threads, their members, the thread
	// lists (threads.go).
	Threads *Threads
	// Members is the members seam: joins, kicks, member changes and
	// roles, bans, the member reads (members.go, bans.go, query.go).
	Members *Members
	// Roles is the roles seam: a guild's roles, their order, the role
	// list (roles.go, query.go).
	Roles *Roles
	// Channels is the channels seam: a guild's channels, their
	// overwrites, the channel list, webhooks' checks (channels.go,
	// webhooks.go, query.go).
	Channels *Channels
	// Messages is the messages seam: the write path (send, edit,
	// delete, pin), the send check, typing, channel content events
	// (messages.go, send.go, pins.go, channelevents.go).
	Messages *Messages
	// Bots is the bots seam: installing and uninstalling bots, the bot
	// platform's channel and permission reads, orphaned managed roles,
	// shard-aware dispatch to a user's sessions (bots.go).
	Bots *Bots
	// Private is the private-channels seam: DMs, group DMs and the
	// viewer's wire object of a channel (private.go); the router behind
	// it is private.
	Private *Private

	cfg     Config
	deps    Deps
	log     *slog.Logger
	metrics *metrics
	// shadow samples permission decisions for the shadow check; nil
	// when disabled.
	shadow *permissions.Shadow

	mu       sync.Mutex
	actors   map[snowflake.ID]*Actor
	sessions map[event.SessionID]*sessionEntry
	users    map[snowflake.ID]map[event.SessionID]*sessionEntry
	closed   bool

	// reader answers identify, channel → guild and users from the
	// store, with its caches; channelGuild is its channel → guild cache,
	// which the actors keep current as channels come and go.
	reader       *Reader
	channelGuild *sync.Map

	// messages is Deps.Messages, or the store without events.
	messages outbox.Writer
	// doubt holds the message writes in doubt (writebatch.go).
	doubt doubtTable

	private *privateRouter
	done    chan struct{}
	wg      sync.WaitGroup

	// presence is set by EnablePresence.
	presence atomic.Pointer[PresenceConfig]
	// threadSweep starts the idle-thread archiver once (threads.go).
	threadSweep sync.Once
	// voice is set by Voice.Enable.
	voice atomic.Pointer[voiceEnabled]
}

// sessionEntry is a subscribed session and the guilds it is attached to.
type sessionEntry struct {
	s      event.Session
	guilds map[snowflake.ID]bool
}

// NewService validates its arguments, fills defaults and returns a running
// Service. Close stops it.
func NewService(cfg Config, deps Deps) (*Service, error) {
	if deps.Store == nil || deps.Sink == nil || deps.IDs == nil {
		return nil, errors.New("guild: NewService needs Store, Sink and IDs")
	}
	if cfg.MailboxSize <= 0 {
		cfg.MailboxSize = 1024
	}
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = 10 * time.Minute
	}
	if cfg.LargeThreshold <= 0 {
		cfg.LargeThreshold = 250
	}
	if cfg.SliceThreshold <= 0 {
		cfg.SliceThreshold = DefaultSliceThreshold
	}
	if cfg.SliceSize <= 0 {
		cfg.SliceSize = DefaultSliceThreshold
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = clock.Now // timeouts and joins are read by other processes
	}
	m, err := newMetrics(cfg.Registerer)
	if err != nil {
		return nil, err
	}
	shadow, err := permissions.NewShadow(permissions.ShadowConfig{Every: cfg.ShadowEvery, Registerer: cfg.Registerer, Logger: cfg.Logger})
	if err != nil {
		return nil, fmt.Errorf("guild: %w", err)
	}
	s := &Service{
		metrics:  m,
		shadow:   shadow,
		cfg:      cfg,
		deps:     deps,
		log:      cfg.Logger,
		actors:   make(map[snowflake.ID]*Actor),
		sessions: make(map[event.SessionID]*sessionEntry),
		users:    make(map[snowflake.ID]map[event.SessionID]*sessionEntry),
		done:     make(chan struct{}),
		messages: deps.Messages,
		reader:   NewReader(deps.Store, deps.Auth),
	}
	s.channelGuild = &s.reader.channelGuild
	if s.messages == nil {
		s.messages = outbox.Unlogged(deps.Store)
	}
	s.Voice = &Voice{s: s}
	s.Threads = &Threads{s: s}
	s.Members = &Members{s: s}
	s.Roles = &Roles{s: s}
	s.Channels = &Channels{s: s}
	s.Messages = &Messages{s: s}
	s.Bots = &Bots{s: s}
	s.Private = &Private{s: s}
	s.private = newPrivateRouter(s)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.private.run()
	}()
	return s, nil
}

// Close stops every actor after the operations already queued. It does
// not close the store.
func (s *Service) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	close(s.done)
	s.mu.Unlock()
	s.wg.Wait()
	return nil
}

// actor returns the guild's actor, starting it when needed, with one
// in-flight operation reserved: the caller must enqueue exactly one op.
func (s *Service) actor(guildID snowflake.ID) (*Actor, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, fmt.Errorf("%w: service closed", ErrUnavailable)
	}
	a := s.actors[guildID]
	if a == nil {
		a = newActor(s, guildID)
		s.actors[guildID] = a
		s.metrics.actorsLoaded.Inc()
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			a.run()
		}()
	}
	a.inflight.Add(1)
	return a, nil
}

// retire removes a from the actor map if it may stop: when force is set
// (failed load, deleted guild) or when it is idle with no sessions and no
// operation reserved. After retire returns true no new operation reaches a.
func (s *Service) retire(a *Actor, force bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !force && (a.inflight.Load() > 0 || a.hasSessions()) {
		return false
	}
	if s.actors[a.id] == a {
		delete(s.actors, a.id)
		s.metrics.actorsLoaded.Dec()
	}
	return true
}

// do runs fn in the guild's actor and waits for its result.
func (s *Service) do(ctx context.Context, guildID snowflake.ID, fn func(a *Actor) error) error {
	return s.run(ctx, guildID, fn, false)
}

// run runs fn in the guild's actor and waits for its result, until ctx
// ends; with outlive (write), once the actor started fn, until fn ends.
func (s *Service) run(ctx context.Context, guildID snowflake.ID, fn func(a *Actor) error, outlive bool) error {
	a, err := s.actor(guildID)
	if err != nil {
		return err
	}
	res := make(chan error, 1)
	if err := a.enqueue(ctx, func(a *Actor) {
		switch {
		case a.failed != nil:
			res <- a.failed
			return
		case outlive && ctx.Err() != nil:
			// The caller left before its turn: nothing is written.
			res <- fmt.Errorf("%w: %w", ErrUnavailable, ctx.Err())
			return
		}
		err := fn(a)
		a.detachIfPlacedElsewhere()
		// The counts the caller's change moved are readable (admin stats,
		// the autoscaler's signal) once it returns, not only after the
		// actor's end of the op.
		a.publishStats()
		res <- err
	}); err != nil {
		return err
	}
	wait := ctx.Done()
	if outlive {
		wait = nil
	}
	select {
	case err := <-res:
		return err
	case <-wait:
		return fmt.Errorf("%w: %w", ErrUnavailable, ctx.Err())
	case <-s.done:
		return fmt.Errorf("%w: service closed", ErrUnavailable)
	}
}

// post runs fn in the guild's actor without waiting for it.
func (s *Service) post(ctx context.Context, guildID snowflake.ID, fn func(a *Actor)) error {
	a, err := s.actor(guildID)
	if err != nil {
		return err
	}
	return a.enqueue(ctx, func(a *Actor) {
		if a.failed == nil {
			fn(a)
		}
	})
}

// LoadedGuilds returns the ids of the guilds with a loaded actor.
func (s *Service) LoadedGuilds() []snowflake.ID {
	s.mu.Lock()
	defer s.mu.Unlock()
	ids := make([]snowflake.ID, 0, len(s.actors))
	for id := range s.actors {
		ids = append(ids, id)
	}
	return ids
}

// ChannelGuild returns the guild of a channel, 0 for a private channel,
// from a cache filled by actors with a store read on a miss (the
// service's Reader).
func (s *Service) ChannelGuild(ctx context.Context, channelID snowflake.ID) (snowflake.ID, error) {
	return s.reader.ChannelGuild(ctx, channelID)
}

// User returns a user's object from the cache or the store (the
// service's Reader).
func (s *Service) User(ctx context.Context, id snowflake.ID) (wire.User, error) {
	return s.reader.User(ctx, id)
}

// storeErr wraps a store failure as ErrUnavailable, keeping ErrNotFound
// distinguishable.
func storeErr(what string, err error) error {
	if errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("%s: %w", what, err)
	}
	return fmt.Errorf("%s: %w: %w", what, ErrUnavailable, err)
}
