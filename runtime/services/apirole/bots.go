package apirole

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

	"github.com/concord-chat/concord/runtime/adapters/egress"
	"github.com/concord-chat/concord/runtime/adapters/store"
	"github.com/concord-chat/concord/runtime/adapters/store/cassandra"
	"github.com/concord-chat/concord/runtime/base/lifecycle"
	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/config"
	"github.com/concord-chat/concord/runtime/domain/auth"
	"github.com/concord-chat/concord/runtime/domain/bots"
	botscassandra "github.com/concord-chat/concord/runtime/domain/bots/cassandra"
	botspebble "github.com/concord-chat/concord/runtime/domain/bots/pebble"
	"github.com/concord-chat/concord/runtime/domain/entitlement"
	"github.com/concord-chat/concord/runtime/domain/guild"
	"github.com/concord-chat/concord/runtime/domain/permissions"
	"github.com/concord-chat/concord/runtime/domain/wire"
	"github.com/concord-chat/concord/runtime/edge/api/uploads"
	"github.com/concord-chat/concord/runtime/edge/gateway"
	"github.com/concord-chat/concord/runtime/services/wiring"
)

// purgeInterval is how often expired interactions are dropped.
const purgeInterval = 5 * time.Minute

// Bots is the bot platform's part of a process: the handler, the
// revocation path and the purge loop, over the process's bot store
// (BotStore). The guild's REST surface opens it the same way in `concord
// dev` and on the guild nodes of `concord serve` and mounts its routes
// in front of the REST API (Routes).
type Bots struct {
	handler *bots.Handler
	store   bots.Store
	// revocations pushes the revocation of bots' entitlements to the
	// gateways (the process's revocation path).
	revocations *Revocations
	log         *slog.Logger
	cancel      context.CancelFunc
	done        chan struct{}
}

// botDeps are what openBots needs from the rest of the process.
type botDeps struct {
	store    store.Store
	apps     bots.Store
	guilds   *guild.Service
	auth     *auth.Issuer
	ids      bots.IDSource
	registry prometheus.Registerer
	// revocations is the process's revocation path.
	revocations *Revocations
	// node returns the process's gateway node (nil until it exists, and
	// always in `concord serve`, where gateways are other processes).
	node func() *gateway.Node
}

// BotStore returns the process's bot store (applications, commands,
// installations, interactions), opened once per process next to its
// store and closed with its seams: the guild's REST surface runs the bot
// platform on it, the gateway reads applications from it (privileged
// intents, READY's application, entitlement grants) and the api role
// routes interactions by it.
func BotStore(ctx context.Context, p wiring.Parts) (bots.Store, error) {
	return wiring.Shared(p.Seams, botStoreKey, func() (bots.Store, func() error, error) {
		st, err := openBotStore(ctx, p.Config, p.Logger, p.Store)
		if err != nil {
			return nil, nil, err
		}
		return st, st.Close, nil
	})
}

// openBotStore opens the bot platform's store next to the guild store:
// the same Cassandra keyspace and session when the platform runs on
// Cassandra (so every process sharing it shares applications, commands,
// installations and interactions), else Pebble in <DataDir>/bots.
func openBotStore(ctx context.Context, cfg config.Config, log *slog.Logger, guilds store.Store) (bots.Store, error) {
	for {
		u, ok := guilds.(interface{ Unwrap() store.Store })
		if !ok {
			break
		}
		guilds = u.Unwrap()
	}
	if cs, ok := guilds.(*cassandra.Store); ok {
		st, err := botscassandra.New(ctx, botscassandra.Config{Logger: log.With("component", "bots")}, cs)
		if err != nil {
			return nil, fmt.Errorf("bots store on cassandra: %w", err)
		}
		return st, nil
	}
	st, err := botspebble.New(botspebble.Config{Dir: filepath.Join(cfg.DataDir, "bots"), Logger: log})
	if err != nil {
		return nil, fmt.Errorf("bots store: %w", err)
	}
	return st, nil
}

// openBots builds the bot platform's handler on the bot store with the
// guild-tier adapters, the egress client (no private addresses), the
// entitlement leases and the purge loop.
func openBots(ctx context.Context, cfg config.Config, logger *slog.Logger, key []byte, d botDeps) (*Bots, error) {
	log := logger.With("component", "bots")
	egCfg := egress.Config{Logger: logger.With("component", "egress"), Registerer: d.registry}
	var err error
	if cfg.EgressProxy != "" {
		if egCfg.Proxy, err = url.Parse(cfg.EgressProxy); err != nil {
			return nil, fmt.Errorf("egress proxy: %w", err)
		}
	}
	eg, err := egress.New(egCfg)
	if err != nil {
		return nil, fmt.Errorf("egress: %w", err)
	}
	node := d.node
	if node == nil {
		node = func() *gateway.Node { return nil }
	}
	objs, err := OpenObjects(ctx, cfg)
	if err != nil {
		return nil, err
	}
	ups := uploads.New(uploads.Config{Objects: objs, Key: AttachmentKey(key), IDs: d.ids, MaxFileBytes: cfg.MaxFileBytes})
	bp := &Bots{store: d.apps, revocations: d.revocations, log: log, done: make(chan struct{})}
	users := guildBotFlags(d.guilds)
	h, err := bots.NewHandler(bots.Config{Key: key, Registerer: d.registry, Logger: logger}, bots.Deps{
		Store:       d.apps,
		Users:       d.store,
		Tokens:      d.auth,
		IDs:         d.ids,
		Guilds:      botGuilds{g: d.guilds},
		Dispatcher:  botDispatcher{g: d.guilds.Bots},
		Messages:    &botMessages{store: d.store, guilds: d.guilds, ids: d.ids, log: log, uploads: ups},
		Uploads:     botUploads{ups},
		Egress:      eg,
		Revocations: d.revocations,
		Authenticate: func(r *http.Request) (snowflake.ID, bool, error) {
			return users.authenticate(r.Context(), d.auth, r.Header.Get("Authorization"))
		},
		TokenReset: func(ctx context.Context, botUserID snowflake.ID) {
			// The old token no longer verifies: end the bot's sessions
			// (close 4004, not resumable) so nothing more reaches them.
			for _, s := range d.guilds.Bots.UserSessions(botUserID) {
				d.guilds.Disconnect(ctx, s)
			}
			closed := 0
			if n := node(); n != nil {
				closed = n.CloseUser(ctx, botUserID, gateway.CloseAuthenticationFailed, "token reset")
			}
			log.Info("bot token reset: sessions ended", "bot_id", botUserID, "sessions", closed)
		},
	})
	if err != nil {
		return nil, fmt.Errorf("bots handler: %w", err)
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
	lifecycle.Every(ctx, purgeInterval, func(ctx context.Context) {
		if n, err := b.handler.PurgeInteractions(ctx); err != nil {
			b.log.Warn("interaction purge failed", "err", err)
		} else if n > 0 {
			b.log.Debug("interactions purged", "count", n)
		}
	})
}

// Close stops the purge loop and the handler's timers; the bot store and
// the revocation path stay open (they are the process's, closed with its
// seams).
func (b *Bots) Close() error {
	if b == nil {
		return nil
	}
	b.cancel()
	<-b.done
	b.handler.Close()
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
	id, err := b.g.Bots.Install(ctx, installerID, guildID, botUserID, name, perms)
	return id, botErr(err)
}

// UninstallBot implements bots.Guilds.
func (b botGuilds) UninstallBot(ctx context.Context, guildID, botUserID snowflake.ID) error {
	return botErr(b.g.Bots.Uninstall(ctx, guildID, botUserID))
}

// Channel implements bots.Guilds.
func (b botGuilds) Channel(ctx context.Context, channelID snowflake.ID) (wire.Channel, error) {
	c, err := b.g.Bots.GuildChannel(ctx, channelID)
	return c, botErr(err)
}

// ChannelPermissions implements bots.Guilds.
func (b botGuilds) ChannelPermissions(ctx context.Context, userID, channelID snowflake.ID) (permissions.Bits, error) {
	p, err := b.g.Bots.ChannelPermissions(ctx, userID, channelID)
	return p, botErr(err)
}

// Member implements bots.Guilds.
func (b botGuilds) Member(ctx context.Context, guildID, userID snowflake.ID) (wire.Member, error) {
	m, err := b.g.Members.Get(ctx, userID, guildID, userID)
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
	rs, err := b.g.Roles.List(ctx, userID, guildID)
	if err != nil {
		return nil, botErr(err)
	}
	out := make([]wire.Role, 0, len(rs))
	for _, r := range rs {
		out = append(out, wire.RoleFrom(r))
	}
	return out, nil
}

// botDispatcher adapts the guild service's bots seam (its shard-aware
// dispatch to a user's sessions) to bots.Dispatcher.
type botDispatcher struct{ g *guild.Bots }

// DeliverToUser implements bots.Dispatcher.
func (b botDispatcher) DeliverToUser(ctx context.Context, userID, guildID snowflake.ID, eventType string, payload json.RawMessage) int {
	return b.g.DispatchToUserShard(ctx, userID, guildID, eventType, payload)
}

// Routes mounts the bot platform's routes in front of the core API on mux
// (their patterns are more specific than "/", where core goes). A bot's
// removal from a guild reaches the platform through the core API's
// api.Deps.MemberRemoved (memberRemoved).
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

// Leases is the process's entitlement lease manager, which the gateway
// role runs and the bot platform publishes through: nil in a process
// without the gateway role.
func (b *Bots) Leases() *entitlement.Manager {
	m, _ := b.revocations.leases.Get()
	return m
}

// Revoked pushes a revocation to every gateway node, as the bot platform
// does when an installation, token or permission is taken away.
func (b *Bots) Revoked(ctx context.Context, r bots.Revocation) error {
	return b.revocations.Revoked(ctx, r)
}

// memberRemoved returns the REST API's api.Deps.MemberRemoved for a
// process running the bot platform: when the member that left or was
// removed is a bot, its installation and guild commands are dropped
// (Handler.Uninstalled) and so is its managed role. flags tells bots from
// users.
func (b *Bots) memberRemoved(guildBots *guild.Bots, flags *BotFlags) func(ctx context.Context, guildID, memberID snowflake.ID) {
	return func(ctx context.Context, guildID, memberID snowflake.ID) {
		if bot, err := flags.IsBot(ctx, memberID); err != nil || !bot {
			return
		}
		if err := b.handler.Uninstalled(ctx, guildID, memberID); err != nil {
			b.log.Warn("bot uninstall not recorded", "guild_id", guildID, "bot_id", memberID, "err", err)
		}
		if err := guildBots.DeleteOrphanManagedRoles(ctx, guildID); err != nil {
			b.log.Warn("bot role not deleted", "guild_id", guildID, "bot_id", memberID, "err", err)
		}
	}
}
