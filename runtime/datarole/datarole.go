// Package datarole is the data role, built by the same Build in `concord
// dev` and in `concord serve --roles=data`: the message reads and writes
// of the channels a consistent-hash ring over the live data nodes gives
// the node, with identical in-flight reads merged into one query
// (runtime/dataservice), served over DataNode to the nodes that send
// their message traffic there (--data-nodes=ring).
//
// In `concord dev` no other process sends it anything: the process's own
// store is the data path (on Cassandra already behind the process's
// coalescing data service), so the role adds nothing.
package datarole

import (
	"context"

	"github.com/concord-chat/concord/runtime/dataservice"
	"github.com/concord-chat/concord/runtime/lifecycle"
	"github.com/concord-chat/concord/runtime/registry"
	"github.com/concord-chat/concord/runtime/role"
	"github.com/concord-chat/concord/runtime/store"
)

// Name is the role's --roles name.
const Name = registry.RoleData

// Role is the data role.
var Role = role.Role{Name: Name, Build: build}

// RawStore is the seam of the process's store adapter itself, under the
// wrappers that send message traffic to the data nodes or coalesce it:
// the data role coalesces over the store, not over a wrapper that would
// send the traffic back to a data node.
var RawStore = role.Key[store.Store]{Name: "store/raw"}

func build(_ context.Context, b *role.Builder) error {
	if b.Dev() {
		return nil
	}
	raw, ok := role.Lookup(b.Seams, RawStore)
	if !ok {
		raw = b.Store
	}
	svc := dataservice.New(raw, dataservice.Config{Name: b.Config.Node, Logger: b.Logger.With("component", "data")})
	if b.GRPC != nil {
		b.GRPC.Data = svc
	}
	return b.Add(lifecycle.Part{Name: "service", Close: svc.Close})
}
