package transport

import (
	"context"
	"sync"

	"google.golang.org/grpc"

	"github.com/concord-chat/concord/runtime/services/transport/transportpb"
)

// clientStreams holds one client stream of a RelayNode method per
// address, each used under its own lock, so what is sent to one address
// arrives in call order while sends to different addresses go in
// parallel. The relay client (Relay streams) and the slice client (Slice
// streams) are each one of these with their own request type.
type clientStreams[Req any] struct {
	pool   *pool
	ctx    context.Context
	cancel context.CancelFunc
	// open opens a stream on conn, living as long as ctx.
	open func(ctx context.Context, conn *grpc.ClientConn) (grpc.ClientStreamingClient[Req, transportpb.RelayResponse], error)

	mu sync.Mutex
	by map[string]*addrStream[Req]
}

// addrStream is the stream to one address; nil stream until opened, and
// again after it ended.
type addrStream[Req any] struct {
	mu     sync.Mutex
	stream grpc.ClientStreamingClient[Req, transportpb.RelayResponse]
	cancel context.CancelFunc
}

// newClientStreams returns the streams opened by open over a connection
// pool of cfg.
func newClientStreams[Req any](cfg ClientConfig, open func(context.Context, *grpc.ClientConn) (grpc.ClientStreamingClient[Req, transportpb.RelayResponse], error)) *clientStreams[Req] {
	ctx, cancel := context.WithCancel(context.Background())
	return &clientStreams[Req]{pool: newPool(cfg.MaxMsgSize), ctx: ctx, cancel: cancel, open: open, by: make(map[string]*addrStream[Req])}
}

// send sends req on the stream to addr, opening one when there is none,
// and tries once more on a fresh stream when the send fails. ended is
// told why a stream ended (what CloseAndRecv returned) once it is
// closed; a non-nil return stops the attempts and is send's result.
// Otherwise send returns nil when req was sent, or the last error.
func (c *clientStreams[Req]) send(addr string, req *Req, ended func(error) error) error {
	c.mu.Lock()
	s := c.by[addr]
	if s == nil {
		s = &addrStream[Req]{}
		c.by[addr] = s
	}
	c.mu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	var err error
	for range 2 {
		if s.stream == nil {
			if err = c.openAt(s, addr); err != nil {
				continue
			}
		}
		if err = s.stream.Send(req); err == nil {
			return nil
		}
		_, err = s.stream.CloseAndRecv()
		s.close()
		if stop := ended(err); stop != nil {
			return stop
		}
	}
	return err
}

// openAt opens s's stream to addr (s.mu held).
func (c *clientStreams[Req]) openAt(s *addrStream[Req], addr string) error {
	s.close()
	conn, err := c.pool.get(addr)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(c.ctx)
	st, err := c.open(ctx, conn)
	if err != nil {
		cancel()
		return err
	}
	s.stream, s.cancel = st, cancel
	return nil
}

// close ends the stream (s.mu held).
func (s *addrStream[Req]) close() {
	if s.cancel != nil {
		s.cancel()
	}
	s.stream, s.cancel = nil, nil
}

// close ends every stream and connection.
func (c *clientStreams[Req]) close() {
	c.cancel()
	c.mu.Lock()
	streams := c.by
	c.by = make(map[string]*addrStream[Req])
	c.mu.Unlock()
	for _, s := range streams {
		s.mu.Lock()
		s.close()
		s.mu.Unlock()
	}
	c.pool.close()
}
