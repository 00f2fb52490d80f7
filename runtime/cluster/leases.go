package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/concord-chat/concord/runtime/entitlement"
	"github.com/concord-chat/concord/runtime/event"
	"github.com/concord-chat/concord/runtime/gateway"
	"github.com/concord-chat/concord/runtime/lifecycle"
	"github.com/concord-chat/concord/runtime/platform"
	"github.com/concord-chat/concord/runtime/snowflake"
	"github.com/concord-chat/concord/runtime/store"
	"github.com/concord-chat/concord/runtime/wire"
)

// Bots' entitlement leases on a gateway node: the same lease manager as
// `concord dev` (runtime/entitlement), in front of identify (a bot whose
// grant cannot be read is not admitted) and holding a lease per bot with
// sessions here. Revocations come two ways, as in dev: pushed through the
// registry by the guild node that applied them (an uninstall, a token
// reset, a permission change), and found at the latest at the next lease
// renewal if a push was lost. The enforcer acts on this node's sessions.

// openGatewayLeases builds the manager of a gateway node and the part
// that runs it; the part is ready once the revocation watch started, so
// the node admits no bot before it can hear revocations.
func openGatewayLeases(n *Node, st store.Store, enf entitlement.Enforcer, reg prometheus.Registerer, log *slog.Logger) (*entitlement.Manager, lifecycle.Part, error) {
	bus, err := entitlement.NewRegistryBus(n.reg, entitlement.DefaultPrefix)
	if err != nil {
		return nil, lifecycle.Part{}, fmt.Errorf("cluster: revocation bus: %w", err)
	}
	ec := n.cfg.Entitlements
	mgr, err := entitlement.New(entitlement.Config{TTL: ec.TTL, RetryEvery: ec.RetryEvery, Grace: ec.Grace, Registerer: reg, Logger: log},
		platform.NewInstallSource(n.botApps(), st), enf, bus)
	if err != nil {
		return nil, lifecycle.Part{}, fmt.Errorf("cluster: entitlements: %w", err)
	}
	part := lifecycle.Part{
		Name: "gateway/entitlements",
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

// gatewayEnforcer is a gateway node's entitlement.Enforcer.
type gatewayEnforcer struct {
	node    func() *gateway.Node
	backend *gatewayBackend
	members store.Guilds
	log     *slog.Logger
}

var _ entitlement.Enforcer = gatewayEnforcer{}

// RevokeGuild implements entitlement.Enforcer: the session stops
// following the guild and is detached on its owner, so no later event of
// the guild reaches it. When the bot is no longer a member the owner
// already sent GUILD_DELETE with the removal; otherwise (the guild tier
// has not applied the uninstall) GUILD_DELETE is sent here, last.
func (e gatewayEnforcer) RevokeGuild(ctx context.Context, s event.Session, guildID snowflake.ID) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	e.backend.dropGuild(ctx, s, guildID)
	if guilds, err := e.members.UserGuilds(ctx, s.UserID); err == nil && !slices.Contains(guilds, guildID) {
		return
	}
	n := e.node()
	if n == nil {
		return
	}
	d, err := json.Marshal(wire.UnavailableGuild{ID: guildID})
	if err != nil {
		return
	}
	if err := n.SendTo(s.ID, "GUILD_DELETE", d); err != nil &&
		!errors.Is(err, gateway.ErrUnknownSession) {
		e.log.Warn("GUILD_DELETE not sent", "session_id", s.ID, "guild_id", guildID, "err", err)
	}
}

// CloseBot implements entitlement.Enforcer: 4004 (not resumable) when the
// token or the application is gone, 4000 when the lease could not be
// renewed within the grace period. Ending the sessions detaches them on
// their guilds' owners.
func (e gatewayEnforcer) CloseBot(ctx context.Context, bot snowflake.ID, reason entitlement.Reason) int {
	code, text := gateway.CloseUnknownError, "entitlements unavailable"
	switch reason {
	case entitlement.ReasonTokenReset:
		code, text = gateway.CloseAuthenticationFailed, "token reset"
	case entitlement.ReasonApplicationGone:
		code, text = gateway.CloseAuthenticationFailed, "application removed"
	}
	n := e.node()
	if n == nil {
		return 0
	}
	return n.CloseUser(ctx, bot, code, text)
}

// dropGuild forgets one guild of a session and detaches it there.
func (b *gatewayBackend) dropGuild(ctx context.Context, s event.Session, g snowflake.ID) {
	b.forgetGuild(s.ID, g)
	b.detach(g, s)
}
