package platform

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"path/filepath"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/concord-chat/concord/runtime/api/uploads"
	"github.com/concord-chat/concord/runtime/auth"
	"github.com/concord-chat/concord/runtime/bots"
	botscassandra "github.com/concord-chat/concord/runtime/bots/cassandra"
	botspebble "github.com/concord-chat/concord/runtime/bots/pebble"
	"github.com/concord-chat/concord/runtime/egress"
	"github.com/concord-chat/concord/runtime/entitlement"
	"github.com/concord-chat/concord/runtime/eventlog"
	"github.com/concord-chat/concord/runtime/eventlog/outbox"
	"github.com/concord-chat/concord/runtime/gateway"
	"github.com/concord-chat/concord/runtime/guild"
	"github.com/concord-chat/concord/runtime/mention"
	"github.com/concord-chat/concord/runtime/permissions"
	"github.com/concord-chat/concord/runtime/snowflake"
	"github.com/concord-chat/concord/runtime/store"
	"github.com/concord-chat/concord/runtime/store/cassandra"
	"github.com/concord-chat/concord/runtime/wire"
)

// purgeInterval is how often expired interactions are dropped.
const purgeInterval = 5 * time.Minute

// Bots is the bot platform's part of a process: the handler, its store,
// the revocation path and the purge loop. `concord dev` and the guild
// nodes of `concord serve` open it the same way (OpenBots) and mount its
// routes the same way (Routes).
type Bots struct {
	handler *bots.Handler
	store   bots.Store
	// leases revokes bots' entitlements on the gateway (ADR-08).
	leases *entitlements
	log    *slog.Logger
	cancel context.CancelFunc
	done   chan struct{}
}

// BotDeps are what OpenBots needs from the rest of the process.
type BotDeps struct {
	store    store.Store
	guilds   *guild.Service
	auth     *auth.Issuer
	ids      bots.IDSource
	events   MessageEvents
	registry prometheus.Registerer
	// bus carries revocations to every gateway; nil opens the one
	// --registry names (embedded etcd, or in memory with mem).
	bus entitlement.Bus
	// closeUser ends a user's gateway sessions for good (token reset).
	closeUser func(ctx context.Context, userID snowflake.ID) int
	// node returns the process's gateway node (nil until it exists).
	node func() *gateway.Node
}

// MessageEvents receives message events for the durable log; the outbox
// implements it. When it also relays the store's transactional outbox
// (outbox.Committer, as *outbox.Outbox does once the REST API bound it),
// the bot platform's message writes commit their events in the same
// atomic store write as the message, as the REST API's do.
type MessageEvents interface {
	Publish(ctx context.Context, ev eventlog.MessageEvent) error
}

// openBotStore opens the bot platform's store next to the guild store:
// the same Cassandra keyspace and session when the platform runs on
// Cassandra (so every process sharing it shares applications, commands,
// installations and interactions), else Pebble in <DataDir>/bots.
func openBotStore(ctx context.Context, cfg Config, guilds store.Store) (bots.Store, error) {
	for {
		u, ok := guilds.(interface{ Unwrap() store.Store })
		if !ok {
			break
		}
		guilds = u.Unwrap()
	}
	if cs, ok := guilds.(*cassandra.Store); ok {
		st, err := botscassandra.New(ctx, botscassandra.Config{Logger: cfg.Logger.With("component", "bots")}, cs)
		if err != nil {
			return nil, fmt.Errorf("platform: bots store on cassandra: %w", err)
		}
		return st, nil
	}
	st, err := botspebble.New(botspebble.Config{Dir: filepath.Join(cfg.DataDir, "bots"), Logger: cfg.Logger})
	if err != nil {
		return nil, fmt.Errorf("platform: bots store: %w", err)
	}
	return st, nil
}

// NewBotDeps names what the bot platform needs: the store, the guild
// service whose actors it changes (the owner's, in `concord serve`), the
// token issuer, the id source, the event log's outbox (nil: none), the
// metrics registry and the revocation bus (nil: the one --registry names).
func NewBotDeps(st store.Store, guilds *guild.Service, iss *auth.Issuer, ids bots.IDSource, events MessageEvents, reg prometheus.Registerer, bus entitlement.Bus) BotDeps {
	return BotDeps{store: st, guilds: guilds, auth: iss, ids: ids, events: events, registry: reg, bus: bus}
}

// OpenBots opens the bot store (openBotStore) and builds the handler
// with the guild-tier adapters, the egress client (no private addresses)
// and the purge loop.
func OpenBots(ctx context.Context, cfg Config, key []byte, d BotDeps) (*Bots, error) {
	log := cfg.Logger.With("component", "bots")
	st, err := openBotStore(ctx, cfg, d.store)
	if err != nil {
		return nil, err
	}
	egCfg := egress.Config{Logger: cfg.Logger.With("component", "egress"), Registerer: d.registry}
	if cfg.EgressProxy != "" {
		if egCfg.Proxy, err = url.Parse(cfg.EgressProxy); err != nil {
			_ = st.Close()
			return nil, fmt.Errorf("platform: egress proxy: %w", err)
		}
	}
	eg, err := egress.New(egCfg)
	if err != nil {
		_ = st.Close()
		return nil, fmt.Errorf("platform: egress: %w", err)
	}
	node := d.node
	if node == nil {
		node = func() *gateway.Node { return nil }
	}
	leases, err := openEntitlements(cfg, entitlementDeps{apps: st, users: d.store, guilds: d.guilds, node: node, registry: d.registry, bus: d.bus})
	if err != nil {
		_ = st.Close()
		return nil, err
	}
	objs, err := OpenObjects(ctx, cfg)
	if err != nil {
		leases.close()
		_ = st.Close()
		return nil, err
	}
	ups := uploads.New(uploads.Config{Objects: objs, Key: AttachmentKey(key), IDs: d.ids, MaxFileBytes: cfg.MaxFileBytes})
	bp := &Bots{store: st, leases: leases, log: log, done: make(chan struct{})}
	users := guildBotFlags(d.guilds)
	h, err := bots.NewHandler(bots.Config{Key: key, Registerer: d.registry, Logger: cfg.Logger}, bots.Deps{
		Store:       st,
		Users:       d.store,
		Tokens:      d.auth,
		IDs:         d.ids,
		Guilds:      botGuilds{g: d.guilds},
		Dispatcher:  botDispatcher{g: d.guilds},
		Messages:    &botMessages{store: d.store, guilds: d.guilds, ids: d.ids, events: d.events, log: log, uploads: ups},
		Uploads:     botUploads{ups},
		Egress:      eg,
		Revocations: leases,
		Authenticate: func(r *http.Request) (snowflake.ID, bool, error) {
			return users.authenticate(r.Context(), d.auth, r.Header.Get("Authorization"))
		},
		TokenReset: func(ctx context.Context, botUserID snowflake.ID) {
			// The old token no longer verifies: end the bot's sessions
			// (close 4004, not resumable) so nothing more reaches them.
			for _, s := range d.guilds.UserSessions(botUserID) {
				d.guilds.Disconnect(ctx, s)
			}
			closed := 0
			if d.closeUser != nil {
				closed = d.closeUser(ctx, botUserID)
			}
			log.Info("bot token reset: sessions ended", "bot_id", botUserID, "sessions", closed)
		},
	})
	if err != nil {
		leases.close()
		_ = st.Close()
		return nil, fmt.Errorf("platform: bots handler: %w", err)
	}
	bp.handler = h
	ctx, cancel := context.WithCancel(context.Background())
	bp.cancel = cancel
	go bp.purge(ctx)
	return bp, nil
}

// purge drops expired interactions every purgeInterval until ctx ends.
func (b *Bots) purge(ctx context.Context) {
	defer close(b.done)
	t := time.NewTicker(purgeInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if n, err := b.handler.PurgeInteractions(ctx); err != nil {
				b.log.Warn("interaction purge failed", "err", err)
			} else if n > 0 {
				b.log.Debug("interactions purged", "count", n)
			}
		}
	}
}

// close stops the purge loop and the handler's timers and closes the store.
func (b *Bots) close() error {
	if b == nil {
		return nil
	}
	b.cancel()
	<-b.done
	b.handler.Close()
	b.leases.close()
	if err := b.store.Close(); err != nil {
		return fmt.Errorf("platform: close bots store: %w", err)
	}
	return nil
}

// BotFlags remembers which users are bots (the flag never changes for a
// user), asking lookup once per user; it also authenticates tokens for
// the bot routes. It is safe for concurrent use.
type BotFlags struct {
	lookup func(ctx context.Context, userID snowflake.ID) (bool, error)
	mu     sync.Mutex
	bot    map[snowflake.ID]bool
}

// NewBotFlags returns a BotFlags asking lookup whether a user is a bot.
func NewBotFlags(lookup func(ctx context.Context, userID snowflake.ID) (bool, error)) *BotFlags {
	return &BotFlags{lookup: lookup, bot: make(map[snowflake.ID]bool)}
}

// guildBotFlags reads the flag through the guild service's user records.
func guildBotFlags(guilds *guild.Service) *BotFlags {
	return NewBotFlags(func(ctx context.Context, id snowflake.ID) (bool, error) {
		u, err := guilds.User(ctx, id)
		return u.Bot, err
	})
}

// IsBot reports whether userID is a bot user.
func (f *BotFlags) IsBot(ctx context.Context, userID snowflake.ID) (bool, error) {
	f.mu.Lock()
	b, ok := f.bot[userID]
	f.mu.Unlock()
	if ok {
		return b, nil
	}
	b, err := f.lookup(ctx, userID)
	if err != nil {
		return false, fmt.Errorf("bot flag of %d: %w", userID, err)
	}
	f.mu.Lock()
	if len(f.bot) > 1<<16 {
		clear(f.bot)
	}
	f.bot[userID] = b
	f.mu.Unlock()
	return b, nil
}

// authenticate verifies an Authorization header ("Bot x", "Bearer x" or a
// bare token) and returns its user and bot flag. Store outages wrap
// bots.ErrUnavailable.
func (f *BotFlags) authenticate(ctx context.Context, iss *auth.Issuer, header string) (snowflake.ID, bool, error) {
	token := auth.StripPrefix(header)
	if token == "" {
		return 0, false, errors.New("no token")
	}
	id, err := iss.Verify(ctx, token)
	if errors.Is(err, auth.ErrInvalidToken) {
		return 0, false, fmt.Errorf("verify token: %w", err)
	}
	if err != nil {
		return 0, false, fmt.Errorf("%w: verify token: %w", bots.ErrUnavailable, err)
	}
	bot, err := f.IsBot(ctx, id)
	if err != nil {
		return 0, false, fmt.Errorf("%w: %w", bots.ErrUnavailable, err)
	}
	return id, bot, nil
}

// botErr maps a guild-tier error to the bot platform's sentinels.
func botErr(err error) error {
	for _, m := range []struct{ from, to error }{
		{guild.ErrUnknownGuild, bots.ErrUnknownGuild},
		{guild.ErrUnknownChannel, bots.ErrUnknownChannel},
		{guild.ErrUnknownMember, bots.ErrUnknownMember},
		{guild.ErrUnknownUser, bots.ErrUnknownMember},
		{guild.ErrMissingAccess, bots.ErrMissingAccess},
		{guild.ErrMissingPermissions, bots.ErrMissingPermissions},
		{store.ErrNotFound, bots.ErrUnknownMessage},
		{guild.ErrThreadArchived, bots.ErrThreadArchived},
	} {
		if errors.Is(err, m.from) {
			return fmt.Errorf("%w: %w", m.to, err)
		}
	}
	if err != nil {
		return fmt.Errorf("%w: %w", bots.ErrUnavailable, err)
	}
	return nil
}

// botGuilds adapts the guild service to bots.Guilds.
type botGuilds struct{ g *guild.Service }

var _ bots.Guilds = botGuilds{}

// AuthorizeGuild implements bots.Guilds.
func (b botGuilds) AuthorizeGuild(ctx context.Context, userID, guildID snowflake.ID, need permissions.Bits) error {
	return botErr(b.g.AuthorizeGuild(ctx, userID, guildID, need))
}

// InstallBot implements bots.Guilds.
func (b botGuilds) InstallBot(ctx context.Context, installerID, guildID, botUserID snowflake.ID, name string, perms permissions.Bits) (snowflake.ID, error) {
	id, err := b.g.InstallBot(ctx, installerID, guildID, botUserID, name, perms)
	return id, botErr(err)
}

// UninstallBot implements bots.Guilds.
func (b botGuilds) UninstallBot(ctx context.Context, guildID, botUserID snowflake.ID) error {
	return botErr(b.g.UninstallBot(ctx, guildID, botUserID))
}

// Channel implements bots.Guilds.
func (b botGuilds) Channel(ctx context.Context, channelID snowflake.ID) (wire.Channel, error) {
	c, err := b.g.GuildChannel(ctx, channelID)
	return c, botErr(err)
}

// ChannelPermissions implements bots.Guilds.
func (b botGuilds) ChannelPermissions(ctx context.Context, userID, channelID snowflake.ID) (permissions.Bits, error) {
	p, err := b.g.ChannelPermissions(ctx, userID, channelID)
	return p, botErr(err)
}

// Member implements bots.Guilds.
func (b botGuilds) Member(ctx context.Context, guildID, userID snowflake.ID) (wire.Member, error) {
	m, err := b.g.Member(ctx, userID, guildID, userID)
	if err != nil {
		return wire.Member{}, botErr(err)
	}
	u, err := b.g.User(ctx, userID)
	if err != nil {
		return wire.Member{}, botErr(err)
	}
	return wire.MemberFrom(m, &u, time.Now()), nil
}

// User implements bots.Guilds.
func (b botGuilds) User(ctx context.Context, userID snowflake.ID) (wire.User, error) {
	u, err := b.g.User(ctx, userID)
	return u, botErr(err)
}

// Roles implements bots.Guilds.
func (b botGuilds) Roles(ctx context.Context, userID, guildID snowflake.ID) ([]wire.Role, error) {
	rs, err := b.g.Roles(ctx, userID, guildID)
	if err != nil {
		return nil, botErr(err)
	}
	out := make([]wire.Role, 0, len(rs))
	for _, r := range rs {
		out = append(out, wire.RoleFrom(r))
	}
	return out, nil
}

// botDispatcher adapts the guild service's session index to
// bots.Dispatcher, shard-aware for bots.
type botDispatcher struct{ g *guild.Service }

// DeliverToUser implements bots.Dispatcher.
func (b botDispatcher) DeliverToUser(ctx context.Context, userID, guildID snowflake.ID, eventType string, payload json.RawMessage) int {
	return b.g.DispatchToUserShard(ctx, userID, guildID, eventType, payload)
}

// botMessages posts interaction responses through the REST API's path:
// mentions resolved as for a send, the store write with its event in the
// same atomic write (outbox.PutMessage: a crash between the write and a
// separate publish cannot lose the event mention counting needs), then
// guild fan-out. Ephemeral messages are not stored, have no event and go
// to their recipient's sessions only. Embeds and
// components are stored with the message (the bot platform validated
// them), so a later component interaction can be checked against them.
type botMessages struct {
	store  store.Store
	guilds *guild.Service
	ids    bots.IDSource
	events MessageEvents
	log    *slog.Logger
	// uploads signs the attachment URLs of answers.
	uploads *uploads.Store
}

var _ bots.Messages = (*botMessages)(nil)

// botUploads gives the bot platform the REST API's attachment store.
type botUploads struct{ s *uploads.Store }

// ReadPayload implements bots.Uploads.
func (u botUploads) ReadPayload(w http.ResponseWriter, r *http.Request) ([]byte, bots.PendingFiles, error) {
	body, files, err := u.s.ReadPayload(w, r)
	if err != nil || len(files) == 0 {
		return body, nil, err
	}
	return body, u.s.Pending(files), nil
}

// render converts a stored message with its author and mentioned users.
func (b *botMessages) render(ctx context.Context, m store.Message) wire.Message {
	author, err := b.guilds.User(ctx, m.AuthorID)
	if err != nil {
		author = wire.User{ID: m.AuthorID, Username: "Deleted User", Discriminator: "0"}
	}
	mentions := make([]wire.User, 0, len(m.Mentions))
	for _, id := range m.Mentions {
		if u, err := b.guilds.User(ctx, id); err == nil {
			mentions = append(mentions, u)
		}
	}
	out := wire.MessageFrom(m, author, nil, mentions, nil)
	if b.uploads != nil {
		b.uploads.Sign(ctx, out.Attachments)
	}
	return out
}

// eventsOrNil is the publisher as an untyped value, nil when there is
// none (a nil MessageEvents must not look like a relay).
func (b *botMessages) eventsOrNil() any {
	if b.events == nil {
		return nil
	}
	return b.events
}

// mentions resolves the mentions of content, written by authorID in
// channelID, into m: parsed under allowed_mentions, then kept only as the
// guild allows them (guild.ResolveAppMentions), so the event carries the
// users, roles and @everyone the read-state consumer counts.
func (b *botMessages) mentions(ctx context.Context, m *store.Message, authorID snowflake.ID, content string, am *mention.Allowed) error {
	p := mention.Parse(content, am)
	got, err := b.guilds.ResolveAppMentions(ctx, authorID, m.ChannelID, p.Everyone, p.Users, p.Roles)
	if err != nil {
		return botErr(err)
	}
	m.Mentions, m.MentionRoles, m.MentionEveryone = got.Users, got.Roles, got.Everyone
	return nil
}

// put writes m with its typ event in one atomic write when the store's
// outbox is relayed, else alone followed by a separate publish.
func (b *botMessages) put(ctx context.Context, typ string, m store.Message) error {
	logged, err := outbox.PutMessage(ctx, b.store, b.eventsOrNil(), typ, m)
	if err != nil {
		return fmt.Errorf("%w: store message: %w", bots.ErrUnavailable, err)
	}
	if !logged && b.events != nil {
		if err := b.events.Publish(ctx, outbox.StoredEvent(typ, m)); err != nil {
			b.log.Warn("bot message event not logged", "message_id", m.ID, "err", err)
		}
	}
	return nil
}

// CreateMessage implements bots.Messages.
func (b *botMessages) CreateMessage(ctx context.Context, nm bots.NewMessage) (wire.Message, error) {
	id, err := b.ids.Next()
	if err != nil {
		return wire.Message{}, fmt.Errorf("%w: message id: %w", bots.ErrUnavailable, err)
	}
	m := store.Message{ID: id, ChannelID: nm.ChannelID, GuildID: nm.GuildID, AuthorID: nm.AuthorID,
		Content: nm.Content, Type: nm.Type, Flags: nm.Flags, TTS: nm.TTS,
		Embeds: wire.JoinRaw(nm.Embeds), Components: wire.JoinRaw(nm.Components), Attachments: nm.Attachments}
	if nm.EphemeralTo != 0 {
		m.Flags |= bots.MessageFlagEphemeral
		out := b.withExtras(b.render(ctx, m), nm.Embeds, nm.Components)
		b.guilds.DispatchToUserShard(ctx, nm.EphemeralTo, 0, "MESSAGE_CREATE", mustJSON(out))
		return out, nil
	}
	if err := b.mentions(ctx, &m, nm.AuthorID, nm.Content, nm.AllowedMentions); err != nil {
		return wire.Message{}, err
	}
	if err := b.put(ctx, eventlog.MessageCreate, m); err != nil {
		return wire.Message{}, err
	}
	out := b.withExtras(b.render(ctx, m), nm.Embeds, nm.Components)
	if err := b.guilds.PublishMessage(ctx, "MESSAGE_CREATE", out); err != nil {
		b.log.Warn("bot message not published", "message_id", id, "err", err)
	}
	return out, nil
}

// withExtras sets embeds and components on an answer.
func (b *botMessages) withExtras(m wire.Message, embeds, components []json.RawMessage) wire.Message {
	if embeds != nil {
		m.Embeds = embeds
	}
	if components != nil {
		m.Components = components
	}
	return m
}

// EditMessage implements bots.Messages.
func (b *botMessages) EditMessage(ctx context.Context, e bots.MessageEdit) (wire.Message, error) {
	if e.EphemeralTo != 0 {
		guildID, err := b.guilds.ChannelGuild(ctx, e.ChannelID)
		if err != nil {
			return wire.Message{}, botErr(err)
		}
		m := store.Message{ID: e.MessageID, ChannelID: e.ChannelID, GuildID: guildID, Flags: bots.MessageFlagEphemeral, EditedAt: time.Now()}
		applyEdit(&m, e)
		m.Flags |= bots.MessageFlagEphemeral
		out := b.render(ctx, m)
		out = b.editExtras(out, e)
		b.guilds.DispatchToUserShard(ctx, e.EphemeralTo, 0, "MESSAGE_UPDATE", mustJSON(out))
		return out, nil
	}
	m, err := b.store.GetMessage(ctx, e.ChannelID, e.MessageID)
	if err != nil {
		return wire.Message{}, botErr(err)
	}
	if err := b.frozen(ctx, e.ChannelID); err != nil {
		return wire.Message{}, err
	}
	applyEdit(&m, e)
	if e.Content != nil {
		// New content, new mentions, as a REST edit resolves them.
		if err := b.mentions(ctx, &m, m.AuthorID, m.Content, e.AllowedMentions); err != nil {
			return wire.Message{}, err
		}
	}
	m.EditedAt = time.Now()
	if err := b.put(ctx, eventlog.MessageUpdate, m); err != nil {
		return wire.Message{}, err
	}
	out := b.editExtras(b.render(ctx, m), e)
	if err := b.guilds.PublishMessage(ctx, "MESSAGE_UPDATE", out); err != nil {
		b.log.Warn("bot message edit not published", "message_id", m.ID, "err", err)
	}
	return out, nil
}

// frozen refuses a change to a message of an archived thread, as the
// REST API does: nobody, moderators included, edits or deletes the
// messages of an archived thread. A channel the store does not hold as a
// thread (a DM, a guild channel) is never frozen.
func (b *botMessages) frozen(ctx context.Context, channelID snowflake.ID) error {
	c, err := b.store.GetChannel(ctx, channelID)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return nil
	case err != nil:
		return fmt.Errorf("%w: channel %d: %w", bots.ErrUnavailable, channelID, err)
	case c.Thread != nil && c.Thread.Archived:
		return fmt.Errorf("%w: channel %d", bots.ErrThreadArchived, channelID)
	}
	return nil
}

// applyEdit applies the stored fields of an edit.
func applyEdit(m *store.Message, e bots.MessageEdit) {
	if e.Content != nil {
		m.Content = *e.Content
	}
	if e.Flags != nil {
		m.Flags = *e.Flags
	}
	if e.Embeds != nil {
		m.Embeds = wire.JoinRaw(*e.Embeds)
	}
	if e.Components != nil {
		m.Components = wire.JoinRaw(*e.Components)
	}
	if e.Attachments != nil {
		m.Attachments = *e.Attachments
	}
}

// editExtras sets the edit's embeds and components on an answer.
func (b *botMessages) editExtras(m wire.Message, e bots.MessageEdit) wire.Message {
	if e.Embeds != nil {
		m.Embeds = *e.Embeds
	}
	if e.Components != nil {
		m.Components = *e.Components
	}
	return m
}

// GetMessage implements bots.Messages.
func (b *botMessages) GetMessage(ctx context.Context, channelID, messageID snowflake.ID) (wire.Message, error) {
	m, err := b.store.GetMessage(ctx, channelID, messageID)
	if err != nil {
		return wire.Message{}, botErr(err)
	}
	return b.render(ctx, m), nil
}

// DeleteMessage implements bots.Messages.
func (b *botMessages) DeleteMessage(ctx context.Context, channelID, messageID, ephemeralTo snowflake.ID) error {
	guildID, err := b.guilds.ChannelGuild(ctx, channelID)
	if err != nil {
		return botErr(err)
	}
	if ephemeralTo != 0 {
		b.guilds.DispatchToUserShard(ctx, ephemeralTo, 0, "MESSAGE_DELETE",
			mustJSON(wire.MessageDelete{ID: messageID, ChannelID: channelID, GuildID: guildID}))
		return nil
	}
	m, err := b.store.GetMessage(ctx, channelID, messageID)
	if err != nil {
		return botErr(err)
	}
	if err := b.frozen(ctx, channelID); err != nil {
		return err
	}
	// With the store's outbox the delete and its MESSAGE_DELETE are one
	// write (a concurrent delete that got there first makes a duplicate
	// event, which consumers dedupe).
	logged, err := outbox.DeleteMessage(ctx, b.store, b.eventsOrNil(), guildID, m)
	if err != nil {
		return fmt.Errorf("%w: delete message: %w", bots.ErrUnavailable, err)
	}
	if !logged && b.events != nil {
		ev := eventlog.MessageEvent{Type: eventlog.MessageDelete, GuildID: guildID, ChannelID: channelID, MessageID: messageID}
		if err := b.events.Publish(ctx, ev); err != nil {
			b.log.Warn("bot message delete not logged", "message_id", messageID, "err", err)
		}
	}
	if err := b.guilds.PublishDelete(ctx, guildID, channelID, []snowflake.ID{messageID}); err != nil {
		b.log.Warn("bot message delete not published", "message_id", messageID, "err", err)
	}
	return nil
}

// mustJSON marshals a value the wire package defines.
func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("platform: marshal %T: %v", v, err))
	}
	return b
}

// restHandler composes dev's REST surface: the bot routes (Routes) and
// GET /gateway/bot in front of the core API, all behind the rate limiter.
func (p *Platform) restHandler(restAPI http.Handler, flags *BotFlags) (http.Handler, error) {
	mux := http.NewServeMux()
	gb := GatewayBot{Auth: p.auth, Store: p.store, Counters: p.counters, Concurrency: p.cfg.Identify.Concurrency,
		PublicURL: p.cfg.PublicURL, Logger: p.log.With("component", "gateway-bot")}
	for _, v := range []string{"/api/v9", "/api/v10"} {
		mux.Handle("GET "+v+"/gateway/bot", gb)
	}
	p.bots.Routes(mux, restAPI)
	return rateLimited(p.cfg, p.counters, p.registry, p.auth, flags, mux)
}

// Routes mounts the bot platform's routes in front of the core API on mux
// (their patterns are more specific than "/", where core goes). A bot's
// removal from a guild reaches the platform through the core API's
// api.Deps.MemberRemoved (MemberRemoved).
//
// /webhooks/{id}/{token} is both an interaction's followup webhook (the
// bot platform's) and a channel webhook (the core API's): the token
// tells them apart, so requests whose token is not an interaction's go
// to core.
func (b *Bots) Routes(mux *http.ServeMux, core http.Handler) {
	mx := http.NewServeMux()
	b.handler.Register(mx, "")
	mx.Handle("/", core)
	// Answers render attachment URLs on the request's origin.
	inner := uploads.WithBase(mx)
	for _, v := range []string{"/api/v9", "/api/v10"} {
		channelWebhook := func(w http.ResponseWriter, r *http.Request) {
			if _, ok := bots.InteractionOfToken(r.PathValue("token")); ok {
				inner.ServeHTTP(w, r)
				return
			}
			core.ServeHTTP(w, r)
		}
		mux.HandleFunc(v+"/webhooks/{id}/{token}", channelWebhook)
		mux.HandleFunc(v+"/webhooks/{id}/{token}/messages/{msg}", channelWebhook)
	}
	mux.Handle("/", inner)
}

// Store is the bot store (applications, commands, installations,
// interactions).
func (b *Bots) Store() bots.Store { return b.store }

// Close stops the bot platform and closes its store.
func (b *Bots) Close() error { return b.close() }

// OpenBotStore opens the bot store next to the store st, as OpenBots does:
// for processes that only read it (the api nodes of `concord serve` route
// an interaction's requests by its guild).
func OpenBotStore(ctx context.Context, cfg Config, st store.Store) (bots.Store, error) {
	cfg, err := withDefaults(cfg)
	if err != nil {
		return nil, err
	}
	return openBotStore(ctx, cfg, st)
}

// GuildBotFlags remembers bot flags through the guild service's user
// records.
func GuildBotFlags(guilds *guild.Service) *BotFlags { return guildBotFlags(guilds) }

// MemberRemoved returns the REST API's api.Deps.MemberRemoved for a
// process running the bot platform: when the member that left or was
// removed is a bot, its installation and guild commands are dropped
// (Handler.Uninstalled) and so is its managed role. flags tells bots from
// users.
func (b *Bots) MemberRemoved(guilds *guild.Service, flags *BotFlags) func(ctx context.Context, guildID, memberID snowflake.ID) {
	return func(ctx context.Context, guildID, memberID snowflake.ID) {
		if bot, err := flags.IsBot(ctx, memberID); err != nil || !bot {
			return
		}
		if err := b.handler.Uninstalled(ctx, guildID, memberID); err != nil {
			b.log.Warn("bot uninstall not recorded", "guild_id", guildID, "bot_id", memberID, "err", err)
		}
		if err := guilds.DeleteOrphanManagedRoles(ctx, guildID); err != nil {
			b.log.Warn("bot role not deleted", "guild_id", guildID, "bot_id", memberID, "err", err)
		}
	}
}
