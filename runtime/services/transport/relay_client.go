package transport

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"sync"

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
	cfg    ClientConfig
	pool   *pool
	ctx    context.Context
	cancel context.CancelFunc

	mu      sync.Mutex
	streams map[string]*relayStream
}

// relayStream is the stream to one relay.
type relayStream struct {
	mu     sync.Mutex
	stream transportpb.RelayNode_RelayClient
	cancel context.CancelFunc
}

// NewRelayClient returns a RelayClient.
func NewRelayClient(cfg ClientConfig) RelayClient {
	cfg.fill()
	ctx, cancel := context.WithCancel(context.Background())
	return &relayClient{cfg: cfg, pool: newPool(cfg.MaxMsgSize), ctx: ctx, cancel: cancel, streams: make(map[string]*relayStream)}
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
	c.mu.Lock()
	s := c.streams[addr]
	if s == nil {
		s = &relayStream{}
		c.streams[addr] = s
	}
	c.mu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	var err error
	for range 2 {
		if s.stream == nil {
			if err = c.open(s, addr); err != nil {
				continue
			}
		}
		if err = s.stream.Send(req); err == nil {
			relaySent.WithLabelValues("sent").Inc()
			return nil
		}
		_, err = s.stream.CloseAndRecv()
		s.close()
		c.cfg.Logger.LogAttrs(ctx, slog.LevelWarn, "relay stream ended", slog.String("addr", addr), slog.String("err", fmt.Sprint(err)))
	}
	relaySent.WithLabelValues("failed").Inc()
	return fmt.Errorf("transport: relay %s to %s: %w", typ, addr, err)
}

func (c *relayClient) open(s *relayStream, addr string) error {
	s.close()
	conn, err := c.pool.get(addr)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(c.ctx)
	st, err := transportpb.NewRelayNodeClient(conn).Relay(ctx)
	if err != nil {
		cancel()
		return err
	}
	s.stream, s.cancel = st, cancel
	return nil
}

func (s *relayStream) close() {
	if s.cancel != nil {
		s.cancel()
	}
	s.stream, s.cancel = nil, nil
}

// Close implements RelayClient.
func (c *relayClient) Close() error {
	c.cancel()
	c.mu.Lock()
	streams := c.streams
	c.streams = make(map[string]*relayStream)
	c.mu.Unlock()
	for _, s := range streams {
		s.mu.Lock()
		s.close()
		s.mu.Unlock()
	}
	c.pool.close()
	return nil
}
