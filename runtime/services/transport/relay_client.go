package transport

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"

	"google.golang.org/grpc"

	"github.com/concord-chat/concord/runtime/adapters/tracing"
	"github.com/concord-chat/concord/runtime/domain/event"
	"github.com/concord-chat/concord/runtime/services/transport/transportpb"
)

// RelayClient sends a guild's dispatches to relay nodes, one Relay stream
// per relay address, so requests to one relay arrive in call order.
type RelayClient interface {
	// Relay sends one dispatch for the sessions of several gateway nodes
	// (targets by node name) to the relay at addr. An error means the
	// relay did not take it; the caller may deliver directly instead.
	Relay(ctx context.Context, addr, typ string, payloads []json.RawMessage, byNode map[string][]event.Target) error
	// Close ends every stream and connection.
	Close() error
}

type relayClient struct {
	cfg     ClientConfig
	streams *clientStreams[transportpb.RelayRequest]
}

// NewRelayClient returns a RelayClient.
func NewRelayClient(cfg ClientConfig) RelayClient {
	cfg.fill()
	return &relayClient{cfg: cfg, streams: newClientStreams(cfg, func(ctx context.Context, conn *grpc.ClientConn) (transportpb.RelayNode_RelayClient, error) {
		return transportpb.NewRelayNodeClient(conn).Relay(ctx)
	})}
}

// Relay implements RelayClient. Nodes are encoded in name order.
func (c *relayClient) Relay(ctx context.Context, addr, typ string, payloads []json.RawMessage, byNode map[string][]event.Target) error {
	req := &transportpb.RelayRequest{Type: typ, Payloads: make([][]byte, len(payloads)), Traceparent: tracing.Traceparent(ctx)}
	for i, p := range payloads {
		req.Payloads[i] = p
	}
	nodes := make([]string, 0, len(byNode))
	for n := range byNode {
		nodes = append(nodes, n)
	}
	slices.Sort(nodes)
	for _, n := range nodes {
		d := &transportpb.DeliverRequest{}
		fillDeliver(d, n, event.Batch{Targets: byNode[n]})
		req.Nodes = append(req.Nodes, d)
	}
	err := c.streams.send(addr, req, func(err error) error {
		c.cfg.Logger.LogAttrs(ctx, slog.LevelWarn, "relay stream ended", slog.String("addr", addr), slog.String("err", fmt.Sprint(err)))
		return nil
	})
	if err != nil {
		relaySent.WithLabelValues("failed").Inc()
		return fmt.Errorf("transport: relay %s to %s: %w", typ, addr, err)
	}
	relaySent.WithLabelValues("sent").Inc()
	return nil
}

// Close implements RelayClient.
func (c *relayClient) Close() error {
	c.streams.close()
	return nil
}
