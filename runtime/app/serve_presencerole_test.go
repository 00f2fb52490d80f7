package app

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/concord-chat/concord/runtime/services/catalog"
	"github.com/concord-chat/concord/runtime/services/gatewayrole"
	"github.com/concord-chat/concord/runtime/services/presencerole"
	"github.com/concord-chat/concord/runtime/services/wiring"
)

// concord serve builds the presence role with the Build concord dev
// builds it with: a node running it with a gateway serves its gateway the
// role's side (presencerole.GatewayKey, with the resync on presence ring
// changes and the periodic re-reports as parts), and a gateway node
// without --presence builds no presence at all.
func TestServeBuildsPresenceRole(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a node with an embedded etcd")
	}
	for _, c := range []struct {
		name  string
		roles []string
		want  bool
	}{
		{"with presence", append(append([]string{}, DefaultRoles...), presencerole.Name), true},
		{"without", DefaultRoles, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			// The gateway role is built with the presence side it
			// reports to: look the side up as the role builds.
			saved := catalog.Chat
			var used *presencerole.GatewaySide
			wrapped := make([]wiring.Role, 0, len(saved))
			for _, r := range saved {
				if r.Name != gatewayrole.Name {
					wrapped = append(wrapped, r)
					continue
				}
				wrapped = append(wrapped, wiring.Role{Name: r.Name, Build: func(ctx context.Context, b *wiring.Builder) error {
					if side, ok := wiring.Lookup(b.Seams, presencerole.GatewayKey); ok && side.Presence != nil {
						used = &side
					}
					return r.Build(ctx, b)
				}})
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			n, err := Open(ctx, Config{Roles: c.roles, Node: "solo", DataDir: t.TempDir(),
				HTTP: "127.0.0.1:0", GRPC: "127.0.0.1:0", LeaseTTL: 2 * time.Second, Logger: slog.New(slog.DiscardHandler)}, Options{Tables: Tables{Chat: wrapped, Table: catalog.Table}})
			if err != nil {
				t.Fatal(err)
			}
			defer n.Close()
			side, ok := wiring.Lookup(n.Seams(), presencerole.GatewayKey)
			if ok != c.want || (used != nil) != c.want {
				t.Fatalf("gateway side provided %v, used by the gateway %v; want %v", ok, used != nil, c.want)
			}
			if !c.want {
				return
			}
			if side.Presence == nil || side.Resync == nil || used.Presence != side.Presence {
				t.Fatal("the gateway does not report to the presence role's gateway side")
			}
			if _, ok := wiring.Lookup(n.Seams(), wiring.RingKey(presencerole.Name)); !ok {
				t.Fatal("the presence role opened no presence ring")
			}
		})
	}
}
