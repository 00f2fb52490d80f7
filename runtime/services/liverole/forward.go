package liverole

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"sync/atomic"

	"github.com/concord-chat/concord/runtime/adapters/registry"
	"github.com/concord-chat/concord/runtime/domain/live"
	"github.com/concord-chat/concord/runtime/domain/live/placement"
	"github.com/concord-chat/concord/runtime/services/wiring"
)

// forwarder answers GET /v1/streams/{id}/live on a live-api process that
// runs no gateway: it is the edge of runtime/domain/live/placement over the
// live-gateway nodes of the registry. A stream's viewers go to its k
// gateways (k from the stream directory: the gateways' viewer reports on
// the board), chosen by consistent hashing of the stream id with bounded
// load, so one comment costs one backbone copy per gateway of its stream
// rather than one per gateway its viewers happened to land on.
type forwarder struct {
	reg   registry.Registry
	log   *slog.Logger
	dir   *placement.Directory
	edge  *placement.Edge
	nodes atomic.Pointer[[]registry.Node]
}

func newForwarder(b *wiring.Builder, brd live.Board) (*forwarder, error) {
	if b.Registry == nil || brd == nil {
		return nil, fmt.Errorf("live-api: forwarding to live gateways needs the registry")
	}
	log := b.Logger.With("component", "live-forward")
	dir := placement.NewDirectory(brd, placement.DirectoryConfig{})
	f := &forwarder{reg: b.Registry, log: log, dir: dir,
		edge: placement.NewEdge(placement.NewPlacer(dir, placement.PlacerConfig{}), placement.EdgeConfig{Logger: log, Registerer: b.Metrics})}
	f.nodes.Store(&[]registry.Node{})
	return f, nil
}

// Run follows the live-gateway nodes of the registry and the stream
// directory until ctx ends.
func (f *forwarder) Run(ctx context.Context) error {
	ch, err := f.reg.Watch(ctx, NameGateway)
	if err != nil {
		return fmt.Errorf("live-api: watch live gateways: %w", err)
	}
	go f.dir.Run(ctx, func(err error) {
		f.log.Warn("stream directory not refreshed; placing from the last good read", "err", err)
	})
	for snap := range ch {
		var nodes []registry.Node
		var gws []placement.Gateway
		for _, n := range snap.Nodes {
			if n.HasRole(NameGateway) && !n.Draining && n.HTTPAddr != "" {
				nodes = append(nodes, n)
				gws = append(gws, placement.Gateway{Name: n.Name, Addr: n.HTTPAddr})
			}
		}
		f.edge.SetGateways(gws)
		f.nodes.Store(&nodes)
	}
	return nil
}

func (f *forwarder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.edge.ServeHTTP(w, r)
}
