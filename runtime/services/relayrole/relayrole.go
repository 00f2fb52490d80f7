// Package relayrole is the relay role, built by the same Build in
// `concord dev` and in `concord serve --roles=relay`: the fan-out tier of
// big guilds. A relay node receives a guild's event batches once from
// the guild's owner (RelayNode) and delivers them to every gateway node
// (GatewayNode.Deliver); the RelayTier controller publishes the relays
// of a guild under relays/<guild id> in the registry.
//
// A process without node-to-node services (every role in one process,
// `concord dev`) delivers to its one gateway directly, so there is no
// tier to relay through and the role adds nothing there. It delivers
// with the process's GatewayNode client (wiring.Gateways).
//
// The slices a guild owner hands a relay live as long as the owner's
// process keeps a stream open to it, plus one registry lease
// (--lease-ttl): a guild node killed with SIGKILL sends no Drop, so its
// slices expire; the guild's next owner registers its sessions anew.
package relayrole

import (
	"context"
	"errors"

	"github.com/concord-chat/concord/runtime/services/wiring"
)

// Name is the role's --roles name.
const Name = "relay"

// Role is the relay role.
var Role = wiring.Role{Name: Name, Build: build, Uses: []string{wiring.Gateways.Name}}

func build(ctx context.Context, b *wiring.Builder) error {
	if b.GRPC == nil {
		return nil // no node-to-node services: no one relays through here
	}
	gateways, ok := wiring.Lookup(b.Seams, wiring.Gateways)
	if !ok {
		return errors.New("no gateway client in the process to relay to")
	}
	b.GRPC.Relay = gateways
	// A guild node killed outright sends its relays no Drop: they keep
	// its slices one registry lease after its last stream ended, as long
	// as the ring takes to hand its guilds to another node.
	b.GRPC.SliceLease = b.Config.LeaseTTL
	return nil
}
