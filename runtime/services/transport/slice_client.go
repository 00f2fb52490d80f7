package transport

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/concord-chat/concord/runtime/domain/fanout"
	"github.com/concord-chat/concord/runtime/services/transport/transportpb"
)

// SliceClient carries sliced guilds' entries (runtime/domain/fanout) from their
// owner to relay nodes: one Slice stream per relay address, so a relay
// receives each guild's entries in the order its actor sent them. It
// implements the guild service's Slicer send side.
type SliceClient struct {
	cfg    ClientConfig
	pool   *pool
	ctx    context.Context
	cancel context.CancelFunc

	mu      sync.Mutex
	streams map[string]*sliceStream
	// last caches the encoding of the entry sent last: an event goes to
	// every relay of its guild, encoded once.
	last    *fanout.Entry
	lastRaw []byte
}

type sliceStream struct {
	mu     sync.Mutex
	stream transportpb.RelayNode_SliceClient
	cancel context.CancelFunc
}

// NewSliceClient returns a SliceClient.
func NewSliceClient(cfg ClientConfig) *SliceClient {
	cfg.fill()
	ctx, cancel := context.WithCancel(context.Background())
	return &SliceClient{cfg: cfg, pool: newPool(cfg.MaxMsgSize), ctx: ctx, cancel: cancel, streams: make(map[string]*sliceStream)}
}

func (c *SliceClient) encode(e *fanout.Entry) ([]byte, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.last == e {
		return c.lastRaw, nil
	}
	raw, err := json.Marshal(e)
	if err != nil {
		return nil, fmt.Errorf("transport: encode slice entry: %w", err)
	}
	c.last, c.lastRaw = e, raw
	return raw, nil
}

// Send appends e to the stream to the relay at addr. It returns
// fanout.ErrBehind when the relay ended the stream because it was behind
// (the caller sends a snapshot, which opens a new stream), and another
// error when the relay could not be reached on a fresh stream either.
func (c *SliceClient) Send(ctx context.Context, addr string, e *fanout.Entry) error {
	raw, err := c.encode(e)
	if err != nil {
		return err
	}
	c.mu.Lock()
	s := c.streams[addr]
	if s == nil {
		s = &sliceStream{}
		c.streams[addr] = s
	}
	c.mu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	req := &transportpb.SliceRequest{Entry: raw}
	for range 2 {
		if s.stream == nil {
			if err = c.open(s, addr); err != nil {
				continue
			}
		}
		if err = s.stream.Send(req); err == nil {
			sliceSent.WithLabelValues("sent").Inc()
			return nil
		}
		_, err = s.stream.CloseAndRecv()
		s.close()
		if status.Code(err) == codes.FailedPrecondition {
			sliceSent.WithLabelValues("behind").Inc()
			if e.Reset {
				continue // a snapshot starts the new stream
			}
			return fmt.Errorf("transport: relay %s: %w", addr, fanout.ErrBehind)
		}
		c.cfg.Logger.LogAttrs(ctx, slog.LevelWarn, "slice stream ended", slog.String("addr", addr), slog.String("err", fmt.Sprint(err)))
	}
	sliceSent.WithLabelValues("failed").Inc()
	return fmt.Errorf("transport: slice entry to %s: %w", addr, err)
}

func (c *SliceClient) open(s *sliceStream, addr string) error {
	s.close()
	conn, err := c.pool.get(addr)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(c.ctx)
	st, err := transportpb.NewRelayNodeClient(conn).Slice(ctx)
	if err != nil {
		cancel()
		return err
	}
	s.stream, s.cancel = st, cancel
	return nil
}

func (s *sliceStream) close() {
	if s.cancel != nil {
		s.cancel()
	}
	s.stream, s.cancel = nil, nil
}

// Close ends every stream and connection.
func (c *SliceClient) Close() error {
	c.cancel()
	c.mu.Lock()
	streams := c.streams
	c.streams = make(map[string]*sliceStream)
	c.mu.Unlock()
	for _, s := range streams {
		s.mu.Lock()
		s.close()
		s.mu.Unlock()
	}
	c.pool.close()
	return nil
}
