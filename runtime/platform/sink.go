package platform

import (
	"context"
	"sync/atomic"

	"github.com/concord-chat/concord/runtime/event"
	"github.com/concord-chat/concord/runtime/gateway"
)

// sinkRef breaks the construction cycle between the guild service (which
// needs a Sink) and the gateway node (which needs the guild service as its
// Backend): it forwards to the node once the node exists.
type sinkRef struct {
	node atomic.Pointer[gateway.Node]
}

// Deliver forwards to the gateway node; before the node exists no session
// can be subscribed, so there is nothing to deliver.
func (s *sinkRef) Deliver(ctx context.Context, node string, b event.Batch) {
	if n := s.node.Load(); n != nil {
		n.Deliver(ctx, node, b)
	}
}
