// Package datarole is the data role, built by the same Build in `concord
// dev` and in `concord serve --roles=data`: the message reads and writes
// of the channels a consistent-hash ring over the live data nodes gives
// the node, with identical in-flight reads merged into one query
// (runtime/services/dataservice), served over DataNode to the nodes that send
// their message traffic there (--data-nodes=ring).
//
// A process without node-to-node services (every role in one process,
// `concord dev`) has no other process sending it anything: its own store
// is the data path (on Cassandra already behind the process's coalescing
// data service), so the role adds nothing there.
package datarole

import (
	"context"
	"errors"

	"github.com/concord-chat/concord/runtime/adapters/registry"
	"github.com/concord-chat/concord/runtime/base/lifecycle"
	"github.com/concord-chat/concord/runtime/services/dataservice"
	"github.com/concord-chat/concord/runtime/services/wiring"
)

// Name is the role's --roles name.
const Name = registry.RoleData

// Role is the data role.
var Role = wiring.Role{Name: Name, Build: build, Needs: []string{wiring.RawStore.Name}}

// build serves DataNode over the process's store adapter itself
// (wiring.RawStore): the role coalesces over the store, not over a wrapper
// that would send the traffic back to a data node.
func build(_ context.Context, b *wiring.Builder) error {
	if b.GRPC == nil {
		return nil // no node-to-node services: no one to serve
	}
	raw, ok := wiring.Lookup(b.Seams, wiring.RawStore)
	if !ok {
		return errors.New("no store in the process to serve")
	}
	svc := dataservice.New(raw, dataservice.Config{Name: b.Config.Node, Logger: b.Logger.With("component", "data")})
	b.GRPC.Data = svc
	return b.Add(lifecycle.Part{Name: "service", Close: svc.Close})
}
