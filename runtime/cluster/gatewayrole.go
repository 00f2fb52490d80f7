package cluster

import (
	"context"
	"fmt"

	"github.com/concord-chat/concord/runtime/admission"
	"github.com/concord-chat/concord/runtime/entitlement"
	"github.com/concord-chat/concord/runtime/gatewayrole"
	"github.com/concord-chat/concord/runtime/platform"
	"github.com/concord-chat/concord/runtime/role"
	"github.com/concord-chat/concord/runtime/store"
)

// provideGatewaySeams provides what the gateway role (runtime/gatewayrole)
// consumes from the parts of the node that are not roles yet: the bot
// store (applications, and the grants of bots' entitlement leases), the
// registry's revocation bus, read states, the bots' identify counters
// (--redis) and the admin token a hand-off calls the successor with.
func (n *Node) provideGatewaySeams(ctx context.Context, st store.Store) error {
	cfg := n.cfg
	apps := n.botApps()
	role.Provide[admission.Applications](&n.seams, gatewayrole.Apps, apps)
	role.Provide(&n.seams, gatewayrole.Grants, platform.NewInstallSource(apps, st))
	bus, err := entitlement.NewRegistryBus(n.reg, entitlement.DefaultPrefix)
	if err != nil {
		return fmt.Errorf("cluster: revocation bus: %w", err)
	}
	role.Provide[entitlement.Bus](&n.seams, gatewayrole.Revocations, bus)
	if n.readStates != nil {
		role.Provide[admission.ReadStates](&n.seams, gatewayrole.ReadStates, n.readStates)
	}
	if r := cfg.Redis; r != "" && r != "mem" {
		if n.gwCounters, err = platform.OpenCounters(ctx, cfg); err != nil {
			return fmt.Errorf("cluster: identify counters: %w", err)
		}
		role.Provide(&n.seams, gatewayrole.Counters, n.gwCounters)
	}
	role.Provide(&n.seams, gatewayrole.AdminToken, n.adminToken)
	return nil
}
