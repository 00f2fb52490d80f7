package gatewayrole

import (
	"context"

	"github.com/concord-chat/concord/runtime/event"
	"github.com/concord-chat/concord/runtime/gateway"
	"github.com/concord-chat/concord/runtime/role"
)

// LocalSink is the event sink of the process's gateway for the roles
// built before it: the guild role of `concord dev` delivers its events
// here (guildrole.LocalSink), and they reach the node this role builds
// once it is built. Before then no session exists, so there is nothing
// to deliver.
func LocalSink(s *role.Seams) event.Sink { return lateSink{role.LateOf(s, NodeKey)} }

// lateSink delivers to the gateway node once it is set.
type lateSink struct{ node *role.Late[*gateway.Node] }

// Deliver implements event.Sink.
func (s lateSink) Deliver(ctx context.Context, node string, b event.Batch) {
	if n, ok := s.node.Get(); ok {
		n.Deliver(ctx, node, b)
	}
}

// discardSink is the sink of the identify-only guild service of a
// `concord serve` gateway node, which loads no actor and so never
// delivers.
type discardSink struct{}

// Deliver implements event.Sink.
func (discardSink) Deliver(context.Context, string, event.Batch) {}
