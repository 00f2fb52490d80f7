package gatewayrole

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/concord-chat/concord/runtime/adapters/store"
	"github.com/concord-chat/concord/runtime/base/lifecycle"
	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/entitlement"
	"github.com/concord-chat/concord/runtime/domain/event"
	"github.com/concord-chat/concord/runtime/domain/wire"
	"github.com/concord-chat/concord/runtime/edge/gateway"
	"github.com/concord-chat/concord/runtime/services/wiring"
)

// Bots' entitlement leases on the gateway: one lease manager
// (runtime/domain/entitlement) in front of identify (a bot whose grant cannot be
// read is not admitted) holding a lease per bot with sessions on this
// node. Revocations come two ways: pushed on the bus by the node that
// applied them (an uninstall, a token reset, a permission change), and
// found at the latest at the next renewal when a push was lost. The
// enforcer acts on the node's own sessions, which in both modes are the
// gateway's sessions on its backend.

// openLeases builds the process's one lease manager on its revocation
// path (wiring.Revocations: the bot store's grants, the registry's
// pushes), with the part that runs it: ready once the revocation watch
// started, so the node admits no bot before it can hear revocations.
func openLeases(ctx context.Context, b *wiring.Builder, enf enforcer) (*entitlement.Manager, lifecycle.Part, error) {
	rev, ok := wiring.Lookup(b.Seams, wiring.Revocations)
	if !ok {
		return nil, lifecycle.Part{}, errors.New("entitlements: no revocation path in the process")
	}
	ec := b.Config.Entitlements
	mgr, err := entitlement.New(entitlement.Config{TTL: ec.TTL, RetryEvery: ec.RetryEvery, Grace: ec.Grace,
		Registerer: b.Metrics, Logger: enf.log}, rev.Source(), enf, rev.Bus())
	if err != nil {
		return nil, lifecycle.Part{}, fmt.Errorf("entitlements: %w", err)
	}
	part := lifecycle.Part{
		Name: "entitlements",
		Run: func(ctx context.Context) error {
			mgr.Run(ctx)
			return nil
		},
		Ready: func() error {
			select {
			case <-mgr.Connected():
				return nil
			default:
				return errors.New("revocation watch not started")
			}
		},
	}
	return mgr, part, nil
}

// enforcer is the gateway's entitlement.Enforcer: it acts on the node's
// sessions through the node and its backend.
type enforcer struct {
	node    *wiring.Late[*gateway.Node]
	backend guildSessions
	members store.Guilds
	log     *slog.Logger
}

var _ entitlement.Enforcer = enforcer{}

// RevokeGuild implements entitlement.Enforcer: the session is detached
// from the guild, so no later event of the guild reaches it. When the bot
// is no longer a member the guild already sent GUILD_DELETE with the
// removal; otherwise (the guild tier has not applied the uninstall)
// GUILD_DELETE is sent here, last.
func (e enforcer) RevokeGuild(ctx context.Context, s event.Session, guildID snowflake.ID) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	e.backend.dropGuild(ctx, s, guildID)
	if guilds, err := e.members.UserGuilds(ctx, s.UserID); err == nil && !slices.Contains(guilds, guildID) {
		return
	}
	n, ok := e.node.Get()
	if !ok {
		return
	}
	d, err := json.Marshal(wire.UnavailableGuild{ID: guildID})
	if err != nil {
		return
	}
	if err := n.SendTo(s.ID, "GUILD_DELETE", d); err != nil && !errors.Is(err, gateway.ErrUnknownSession) {
		e.log.Warn("GUILD_DELETE not sent", "session_id", s.ID, "guild_id", guildID, "err", err)
	}
}

// CloseBot implements entitlement.Enforcer: 4004 (not resumable) when the
// token or the application is gone, 4000 when the lease could not be
// renewed within the grace period. Ending the sessions detaches them from
// their guilds (the backend's Disconnect).
func (e enforcer) CloseBot(ctx context.Context, bot snowflake.ID, reason entitlement.Reason) int {
	code, text := gateway.CloseUnknownError, "entitlements unavailable"
	switch reason {
	case entitlement.ReasonTokenReset:
		code, text = gateway.CloseAuthenticationFailed, "token reset"
	case entitlement.ReasonApplicationGone:
		code, text = gateway.CloseAuthenticationFailed, "application removed"
	}
	n, ok := e.node.Get()
	if !ok {
		return 0
	}
	return n.CloseUser(ctx, bot, code, text)
}

// dropGuild forgets one guild of a session and detaches it on the owner.
func (b *ringBackend) dropGuild(ctx context.Context, s event.Session, g snowflake.ID) {
	b.forgetGuild(s.ID, g)
	b.detach(g, s)
}

// localBackend is the gateway.Backend of `concord dev`: the process's
// guild service, which runs every guild.
type localBackend struct {
	GuildBackend
	log *slog.Logger
}

// dropGuild detaches the session from the guild's actor and returns once
// the actor dropped it (guild.Service.DetachSession waits), so the
// GUILD_DELETE RevokeGuild sends next follows the guild's last event.
func (b localBackend) dropGuild(ctx context.Context, s event.Session, g snowflake.ID) {
	if err := b.Service.DetachSession(ctx, g, s); err != nil {
		b.log.Warn("revoked guild not detached", "session_id", s.ID, "guild_id", g, "err", err)
	}
}

// resubscriptions is the counter of subscriptions a gateway node sends
// again, registered on reg (or the one registered there already).
func resubscriptions(reg prometheus.Registerer) (prometheus.Counter, error) {
	c := prometheus.NewCounter(prometheus.CounterOpts{
		Name: "concord_cluster_resubscriptions_total",
		Help: "Session subscriptions a gateway node sent again after a guild moved or a failed attempt.",
	})
	if reg == nil {
		return c, nil
	}
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(prometheus.Counter); ok {
				return existing, nil
			}
		}
		return nil, fmt.Errorf("resubscription metric: %w", err)
	}
	return c, nil
}
