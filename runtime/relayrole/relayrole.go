// Package relayrole is the relay role, built by the same Build in
// `concord dev` and in `concord serve --roles=relay`: the fan-out tier of
// big guilds. A relay node receives a guild's event batches once from
// the guild's owner (RelayNode) and delivers them to every gateway node
// (GatewayNode.Deliver); the RelayTier controller publishes the relays
// of a guild under relays/<guild id> in the registry.
//
// In `concord dev` the guild actors deliver to the process's one gateway
// directly, so there is no tier to relay through and the role adds
// nothing.
package relayrole

import (
	"context"

	"github.com/concord-chat/concord/runtime/lifecycle"
	"github.com/concord-chat/concord/runtime/registry"
	"github.com/concord-chat/concord/runtime/role"
	"github.com/concord-chat/concord/runtime/transport"
)

// Name is the role's --roles name.
const Name = "relay"

// Role is the relay role.
var Role = role.Role{Name: Name, Build: build}

func build(ctx context.Context, b *role.Builder) error {
	if b.Dev() {
		return nil
	}
	ring, err := role.Ring(ctx, b.Seams, b.Registry, registry.RoleGateway, registry.LocalRingConfig{Logger: b.Logger.With("component", "ring")})
	if err != nil {
		return err
	}
	gateways := transport.NewGatewayClient(b.ClientConfig, ring)
	if b.GRPC != nil {
		b.GRPC.Relay = gateways
	}
	return b.Add(lifecycle.Part{Name: "gateways", Close: gateways.Close})
}
