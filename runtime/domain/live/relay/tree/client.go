package tree

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/live"
)

// Client is the live.Relay of the router and the gateways over a relay
// tree: it publishes to a stream's owner and subscribes through it
// (following its redirects down the tree). A node it cannot reach is
// skipped for DownFor, by publishers and subscribers alike, so a dead
// owner's streams move to the next node by rendezvous. When the node set
// changes a subscribed stream's owner (a relay node joins or leaves),
// the subscription ends and re-forms through the new owner: publishers
// follow the same node set, so the old owner gets nothing more.
type Client struct {
	hc  *http.Client
	log *slog.Logger

	mu    sync.Mutex
	nodes []string
	down  map[string]time.Time
	subs  map[*subscription]struct{}
}

// subscription is one Subscribe: the owner its current read goes
// through, and how to end that read when the owner changes.
type subscription struct {
	stream snowflake.ID

	mu     sync.Mutex
	owner  string
	cancel context.CancelFunc // ends the current read; nil between reads
}

// reading records the owner of the read that starts now.
func (s *subscription) reading(owner string, cancel context.CancelFunc) {
	s.mu.Lock()
	s.owner, s.cancel = owner, cancel
	s.mu.Unlock()
}

// moveTo ends the current read when it goes through another node than
// owner, and reports whether it did.
func (s *subscription) moveTo(owner string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cancel == nil || s.owner == owner {
		return false
	}
	s.cancel()
	return true
}

// DownFor is how long a node that could not be reached is skipped.
const DownFor = 5 * time.Second

var (
	_ live.Relay         = (*Client)(nil)
	_ live.CountingRelay = (*Client)(nil)
)

// NewClient returns a client of the relay nodes (base URLs).
func NewClient(nodes []string, log *slog.Logger) *Client {
	if log == nil {
		log = slog.Default()
	}
	return &Client{hc: &http.Client{}, log: log.With("component", "live-relay-client"), nodes: slices.Clone(nodes),
		down: map[string]time.Time{}, subs: map[*subscription]struct{}{}}
}

// SetNodes replaces the relay nodes. Subscriptions whose stream now has
// another owner resubscribe through it.
func (c *Client) SetNodes(nodes []string) {
	c.mu.Lock()
	c.nodes = slices.Clone(nodes)
	subs := make([]*subscription, 0, len(c.subs))
	for s := range c.subs {
		subs = append(subs, s)
	}
	c.mu.Unlock()
	moved := 0
	for _, s := range subs {
		if o := c.owner(s.stream); o != "" && s.moveTo(o) {
			moved++
		}
	}
	if moved > 0 {
		c.log.Info("relay nodes changed; resubscribing streams through their new owners", "streams", moved, "nodes", len(nodes))
	}
}

func (c *Client) owner(stream snowflake.ID) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	down := map[string]bool{}
	for n, until := range c.down {
		if time.Now().Before(until) {
			down[n] = true
		} else {
			delete(c.down, n)
		}
	}
	return Owner(stream, c.nodes, down)
}

func (c *Client) markDown(node string) {
	c.mu.Lock()
	c.down[node] = time.Now().Add(DownFor)
	c.mu.Unlock()
}

// Publish implements live.Relay.
func (c *Client) Publish(ctx context.Context, stream snowflake.ID, msg []byte) error {
	_, err := c.PublishCount(ctx, stream, msg)
	return err
}

// PublishCount implements live.CountingRelay: the copies are the owner's
// direct ones (gateways and second-tier relays).
func (c *Client) PublishCount(ctx context.Context, stream snowflake.ID, msg []byte) (int, error) {
	for range 3 {
		o := c.owner(stream)
		if o == "" {
			return 0, fmt.Errorf("relay tree: no relay node: %w", live.ErrUnavailable)
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, o+"/v1/relay/"+stream.String(), bytes.NewReader(msg))
		if err != nil {
			return 0, err
		}
		resp, err := c.hc.Do(req)
		if err != nil {
			if ctx.Err() != nil {
				return 0, ctx.Err()
			}
			c.markDown(o)
			continue
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return 0, fmt.Errorf("relay tree: publish to %s: status %d: %w", o, resp.StatusCode, live.ErrUnavailable)
		}
		n, _ := strconv.Atoi(resp.Header.Get("X-Relay-Copies"))
		return n, nil
	}
	return 0, fmt.Errorf("relay tree: publish: no relay reachable: %w", live.ErrUnavailable)
}

// Subscribe implements live.Relay: deliver is called from one goroutine,
// in order, for as long as the subscription lasts; a lost relay is
// replaced by subscribing again through the stream's owner. It returns
// once a relay answered the subscription (it then receives what is
// published), or fails when ctx ends first: a gateway reads the recent
// cache after Subscribe, and a comment published between that read and a
// relay's answer would otherwise reach no one there, with no later batch
// to show the gap.
func (c *Client) Subscribe(ctx context.Context, stream snowflake.ID, deliver func([]byte)) (func(), error) {
	sctx, stop := context.WithCancel(context.Background())
	// A read may hold a message already received when the subscription is
	// cancelled: the gate keeps it from being delivered after cancel.
	gate := live.NewGated(deliver)
	deliver = gate.Deliver
	cancel := func() {
		stop()
		gate.Stop()
	}
	sub := &subscription{stream: stream}
	established := make(chan struct{})
	var once sync.Once
	opened := func() { once.Do(func() { close(established) }) }
	c.mu.Lock()
	c.subs[sub] = struct{}{}
	c.mu.Unlock()
	go func() {
		defer func() {
			c.mu.Lock()
			delete(c.subs, sub)
			c.mu.Unlock()
		}()
		wait := 50 * time.Millisecond
		for sctx.Err() == nil {
			o := c.owner(stream)
			if o == "" {
				select {
				case <-sctx.Done():
					return
				case <-time.After(wait):
				}
				continue
			}
			started := time.Now()
			rctx, rcancel := context.WithCancel(sctx)
			sub.reading(o, rcancel)
			// SetNodes may have changed the owner between c.owner and
			// reading: it then saw the previous owner and left this read
			// alone, so look again.
			if c.owner(stream) != o {
				rcancel()
			}
			err := read(rctx, c.hc, o+"/v1/relay/"+stream.String(), opened, deliver)
			sub.reading("", nil)
			moved := rctx.Err() != nil // asked before rcancel, which sets it
			rcancel()
			if sctx.Err() != nil {
				return
			}
			if moved {
				// The node set gave the stream another owner: go there
				// at once (what was published meanwhile is the gateway's
				// sequence gap, refilled from the recent cache).
				c.log.Debug("stream owner changed; resubscribing", "stream", stream, "from", o)
				wait = 50 * time.Millisecond
				continue
			}
			var ue *url.Error
			if errors.As(err, &ue) && strings.HasPrefix(ue.URL, o+"/") {
				// The owner itself could not be reached: skip it for a
				// while (a relay it sent us to that is gone, it learns of
				// by itself when that relay's upstream drops).
				c.markDown(o)
			}
			c.log.Debug("relay subscription lost; resubscribing", "stream", stream, "owner", o, "err", err)
			select {
			case <-sctx.Done():
				return
			case <-time.After(wait):
			}
			wait = min(2*wait, time.Second)
			if time.Since(started) > 5*time.Second {
				wait = 50 * time.Millisecond
			}
		}
	}()
	select {
	case <-established:
		return cancel, nil
	case <-ctx.Done():
		cancel()
		return nil, fmt.Errorf("relay tree: subscribe to stream %s: no relay answered: %w (%w)", stream, live.ErrUnavailable, ctx.Err())
	}
}
