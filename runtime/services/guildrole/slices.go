package guildrole

import (
	"context"
	"slices"

	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/fanout"
	"github.com/concord-chat/concord/runtime/domain/guild"
	"github.com/concord-chat/concord/runtime/services/transport"
)

// sliceRouter is a guild node's guild.Slicer in `concord serve`: a
// guild's relays are the ones its relay list names (relay.go, written by
// the RelayTier controller), reached over RelayNode.Slice.
type sliceRouter struct {
	lists  *relayRouter
	client *transport.SliceClient
}

var _ guild.Slicer = sliceRouter{}

// Relays implements guild.Slicer.
func (r sliceRouter) Relays(guildID snowflake.ID) []string {
	r.lists.mu.RLock()
	defer r.lists.mu.RUnlock()
	return slices.Clone(r.lists.relays[guildID])
}

// Send implements guild.Slicer.
func (r sliceRouter) Send(ctx context.Context, relay string, e *fanout.Entry) error {
	return r.client.Send(ctx, relay, e)
}
