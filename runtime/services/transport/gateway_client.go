package transport

import (
	"context"
	"log/slog"
	"sync"

	"github.com/concord-chat/concord/runtime/adapters/tracing"
	"github.com/concord-chat/concord/runtime/domain/event"
	"github.com/concord-chat/concord/runtime/services/transport/transportpb"
)

// GatewayClient is an event.Sink that delivers batches to remote gateway
// nodes.
//
// Each gateway node gets one Deliver stream on a pooled connection, so
// batches for a node arrive in the order Deliver was called (calls for
// one node are serialised). Deliver blocks only on gRPC flow control,
// never on a round trip. Delivery is at most once: a batch for a node
// that is not in the directory, or that cannot be sent on a fresh stream
// after one failure, is dropped and counted; batches sent just before a
// node dies may be lost with it. History is the source of truth.
type GatewayClient interface {
	event.Sink
	// Close ends every stream and connection.
	Close() error
}

type gatewayClient struct {
	cfg    ClientConfig
	dir    Directory
	pool   *pool
	log    *slog.Logger
	ctx    context.Context
	cancel context.CancelFunc

	mu      sync.Mutex
	senders map[string]*sender
}

// sender is the stream to one gateway node.
type sender struct {
	mu     sync.Mutex
	addr   string
	stream transportpb.GatewayNode_DeliverClient
	cancel context.CancelFunc
	req    transportpb.DeliverRequest
}

// NewGatewayClient returns a GatewayClient resolving node names in dir
// (a LocalRing over the gateway role).
func NewGatewayClient(cfg ClientConfig, dir Directory) GatewayClient {
	cfg.fill()
	ctx, cancel := context.WithCancel(context.Background())
	return &gatewayClient{
		cfg:     cfg,
		dir:     dir,
		pool:    newPool(cfg.MaxMsgSize),
		log:     cfg.Logger,
		ctx:     ctx,
		cancel:  cancel,
		senders: make(map[string]*sender),
	}
}

// Deliver implements event.Sink.
func (c *gatewayClient) Deliver(ctx context.Context, node string, b event.Batch) {
	n, ok := c.dir.Node(node)
	if !ok {
		c.forget(node)
		c.drop(ctx, node, b, "unknown node", nil)
		return
	}
	s := c.sender(node)
	s.mu.Lock()
	defer s.mu.Unlock()
	fillDeliver(&s.req, node, b)
	s.req.Traceparent = tracing.Traceparent(ctx)
	var err error
	for range 2 {
		if s.stream == nil || s.addr != n.Addr {
			if err = c.open(s, n.Addr); err != nil {
				continue
			}
		}
		if err = s.stream.Send(&s.req); err == nil {
			deliverBatches.WithLabelValues("sent").Inc()
			clear(s.req.Payloads)
			return
		}
		// Send reports io.EOF for a stream the server ended; the real
		// reason is in the final status.
		_, err = s.stream.CloseAndRecv()
		s.close()
		c.log.LogAttrs(ctx, slog.LevelWarn, "deliver stream ended", slog.String("node", node),
			slog.String("addr", n.Addr), slog.String("err", err.Error()))
	}
	clear(s.req.Payloads)
	c.drop(ctx, node, b, "send failed", err)
}

// open starts a Deliver stream to addr, replacing s's old one.
func (c *gatewayClient) open(s *sender, addr string) error {
	s.close()
	conn, err := c.pool.get(addr)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(c.ctx)
	st, err := transportpb.NewGatewayNodeClient(conn).Deliver(ctx)
	if err != nil {
		cancel()
		return err
	}
	s.addr, s.stream, s.cancel = addr, st, cancel
	return nil
}

func (s *sender) close() {
	if s.cancel != nil {
		s.cancel()
	}
	s.stream, s.cancel = nil, nil
}

func (c *gatewayClient) sender(node string) *sender {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.senders[node]
	if s == nil {
		s = &sender{}
		c.senders[node] = s
	}
	return s
}

// forget ends the stream to a node that left the directory.
func (c *gatewayClient) forget(node string) {
	c.mu.Lock()
	s := c.senders[node]
	delete(c.senders, node)
	c.mu.Unlock()
	if s == nil {
		return
	}
	s.mu.Lock()
	addr := s.addr
	s.close()
	s.mu.Unlock()
	if addr != "" {
		c.pool.retain(func(a string) bool { return a != addr })
	}
}

func (c *gatewayClient) drop(ctx context.Context, node string, b event.Batch, why string, err error) {
	deliverBatches.WithLabelValues("dropped").Inc()
	attrs := []slog.Attr{slog.String("node", node), slog.String("type", b.Type),
		slog.Int("targets", len(b.Targets)), slog.String("reason", why)}
	if err != nil {
		attrs = append(attrs, slog.String("err", err.Error()))
	}
	c.log.LogAttrs(ctx, slog.LevelWarn, "batch dropped", attrs...)
}

// Close implements GatewayClient.
func (c *gatewayClient) Close() error {
	c.cancel()
	c.mu.Lock()
	senders := c.senders
	c.senders = make(map[string]*sender)
	c.mu.Unlock()
	for _, s := range senders {
		s.mu.Lock()
		s.close()
		s.mu.Unlock()
	}
	c.pool.close()
	return nil
}
