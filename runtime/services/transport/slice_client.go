package transport

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/concord-chat/concord/runtime/domain/fanout"
	"github.com/concord-chat/concord/runtime/services/transport/transportpb"
)

// SliceClient carries sliced guilds' entries (runtime/domain/fanout) from their
// owner to relay nodes: one Slice stream per relay address, so a relay
// receives each guild's entries in the order its actor sent them. It
// implements the guild service's Slicer send side.
type SliceClient struct {
	cfg     ClientConfig
	streams *clientStreams[transportpb.SliceRequest]

	mu sync.Mutex
	// last caches the encoding of the entry sent last: an event goes to
	// every relay of its guild, encoded once.
	last    *fanout.Entry
	lastRaw []byte
}

// NewSliceClient returns a SliceClient.
func NewSliceClient(cfg ClientConfig) *SliceClient {
	cfg.fill()
	// One name for every stream of this client, so a relay tells a
	// reconnect of a live owner from the death of one.
	id := strconv.FormatUint(rand.Uint64(), 36)
	return &SliceClient{cfg: cfg, streams: newClientStreams(cfg, func(ctx context.Context, conn *grpc.ClientConn) (transportpb.RelayNode_SliceClient, error) {
		return transportpb.NewRelayNodeClient(conn).Slice(metadata.AppendToOutgoingContext(ctx, sliceClientKey, id))
	})}
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
	req := &transportpb.SliceRequest{Entry: raw}
	err = c.streams.send(addr, req, func(err error) error {
		if status.Code(err) == codes.FailedPrecondition {
			sliceSent.WithLabelValues("behind").Inc()
			if e.Reset {
				return nil // a snapshot starts the new stream
			}
			return fmt.Errorf("transport: relay %s: %w", addr, fanout.ErrBehind)
		}
		c.cfg.Logger.LogAttrs(ctx, slog.LevelWarn, "slice stream ended", slog.String("addr", addr), slog.String("err", fmt.Sprint(err)))
		return nil
	})
	switch {
	case err == nil:
		sliceSent.WithLabelValues("sent").Inc()
		return nil
	case errors.Is(err, fanout.ErrBehind):
		return err
	}
	sliceSent.WithLabelValues("failed").Inc()
	return fmt.Errorf("transport: slice entry to %s: %w", addr, err)
}

// Close ends every stream and connection.
func (c *SliceClient) Close() error {
	c.streams.close()
	return nil
}
