package liverole

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/concord-chat/concord/runtime/adapters/registry"
	"github.com/concord-chat/concord/runtime/base/lifecycle"
	"github.com/concord-chat/concord/runtime/domain/live"
	"github.com/concord-chat/concord/runtime/domain/live/relay/tree"
	"github.com/concord-chat/concord/runtime/services/wiring"
)

// The relay tier. A live-relay node serves the relay tree's protocol
// (runtime/domain/live/relay/tree) on a listener of its own
// (--live-relay-listen) and announces its URL on the board under
// RelaysPrefix while it lives (WhileAlive: gone within the lease TTL of
// a dead node). Routers and gateways whose relay is the tree
// (--live-relay=tree) follow that prefix: the router publishes to a
// stream's owner among the announced nodes, gateways subscribe through
// it. The board is the registry's kv space in a cluster and the
// in-process board in one process, so both commands find their relays
// the same way.

// RelaysPrefix is where live-relay nodes announce themselves on the
// board: RelaysPrefix + node name = the node's base URL.
const RelaysPrefix = "live/relays/"

// announceEvery is how often a relay node re-writes its announcement: a
// key lost with a registry session comes back within it.
const announceEvery = 5 * time.Second

// useTree reports whether the process's relay is the relay tree:
// --live-relay=tree, or unset in one process running live-relay (dev).
func useTree(c BackendsConfig) (bool, error) {
	switch c.Config.Live.Relay {
	case "tree":
		return true, nil
	case "redis":
		return false, nil
	case "":
		return c.Embedded && slices.Contains(c.Roles, NameRelay), nil
	}
	return false, fmt.Errorf("unknown --live-relay %q (want tree or redis)", c.Config.Live.Relay)
}

// relayNodes follows the relay nodes announced on the board into a tree
// client: once per process, whichever of its roles starts it first.
type relayNodes struct {
	client *tree.Client
	board  live.Board
	once   sync.Once
}

// part returns the part that follows the board, for the first role that
// asks; nil for the others.
func (r *relayNodes) part() *lifecycle.Part {
	var p *lifecycle.Part
	r.once.Do(func() {
		p = &lifecycle.Part{Name: "relay-nodes", Run: func(ctx context.Context) error {
			followRelays(ctx, r.board, r.client.SetNodes)
			return nil
		}}
	})
	return p
}

// addRelayFollower adds the process's relay-nodes part to b when the
// process's relay is the tree and no role added it yet.
func addRelayFollower(b *wiring.Builder, bk Backends) error {
	if bk.relays == nil {
		return nil
	}
	if p := bk.relays.part(); p != nil {
		return b.Add(*p)
	}
	return nil
}

// followRelays calls set with the announced relay URLs, sorted, at every
// change, until ctx ends (re-watching after a lost watch).
func followRelays(ctx context.Context, brd live.Board, set func([]string)) {
	for ctx.Err() == nil {
		ch, err := brd.WatchKV(ctx, RelaysPrefix)
		if err == nil {
			urls := map[string]string{}
			for u := range ch {
				if u.Lost {
					continue
				}
				if u.Snapshot {
					clear(urls)
				}
				for _, c := range u.Changes {
					if c.Deleted {
						delete(urls, c.Key)
					} else {
						urls[c.Key] = string(c.Value)
					}
				}
				list := make([]string, 0, len(urls))
				for _, v := range urls {
					list = append(list, v)
				}
				slices.Sort(list)
				set(list)
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

// buildRelay builds a relay node: its listener, its HTTP server, its
// announcement on the board and its view of the other nodes (the
// children it grows the tree on).
func buildRelay(ctx context.Context, b *wiring.Builder) error {
	bk, err := backendsOf(b)
	if err != nil {
		return err
	}
	if bk.Board == nil {
		return errors.New("live-relay: no board")
	}
	l, err := b.Listen("tcp", b.Config.Live.RelayListen)
	if err != nil {
		return err
	}
	self := "http://" + advertised(l.Addr().String(), b.Config.AdvertiseHost)
	node := tree.NewNode(tree.NodeConfig{Self: self, Nodes: []string{self}, Logger: b.Logger, Registerer: b.Metrics})
	srv := &http.Server{Handler: node, ReadHeaderTimeout: 10 * time.Second}
	key := RelaysPrefix + b.Config.Node
	if err := b.Add(lifecycle.Part{Name: "relay-server",
		Run: func(ctx context.Context) error {
			go func() {
				<-ctx.Done()
				srv.Close()
			}()
			if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
				return fmt.Errorf("live-relay: serve: %w", err)
			}
			return nil
		}}); err != nil {
		return err
	}
	var announced atomic.Bool
	announce := func(ctx context.Context) error {
		err := bk.Board.Put(ctx, key, []byte(self), registry.WhileAlive)
		if err == nil {
			announced.Store(true)
		}
		return err
	}
	return b.Add(lifecycle.Part{Name: "relay-announce",
		Run: func(ctx context.Context) error {
			go followRelays(ctx, bk.Board, node.SetNodes)
			t := time.NewTicker(announceEvery)
			defer t.Stop()
			for {
				if err := announce(ctx); err != nil && ctx.Err() == nil {
					b.Logger.Warn("live-relay: announcement failed; retrying", "err", err)
				}
				select {
				case <-ctx.Done():
					// Leave at once rather than after the lease: the
					// gateways move to a sibling now.
					dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
					_ = bk.Board.Delete(dctx, key)
					cancel()
					return nil
				case <-t.C:
				}
			}
		},
		Ready: func() error {
			if !announced.Load() {
				return errors.New("live-relay: not announced on the board yet")
			}
			return nil
		}})
}

// advertised is addr with its host replaced by host when host is set (a
// listener on 0.0.0.0 in a pod).
func advertised(addr, host string) string {
	if host == "" {
		return addr
	}
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	return net.JoinHostPort(strings.Trim(host, "[]"), port)
}

// treeClient is the relay of a process whose relay is the tree: the
// nodes come from the board once relay-nodes runs.
func treeClient(log *slog.Logger) *tree.Client {
	return tree.NewClient(nil, log)
}
