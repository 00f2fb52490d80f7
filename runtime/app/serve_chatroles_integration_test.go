//go:build integration

package app

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/concord-chat/concord/runtime/adapters/registry"
	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/services/catalog"
	"github.com/concord-chat/concord/runtime/services/readstaterole"
	"github.com/concord-chat/concord/runtime/services/relayrole"
	"github.com/concord-chat/concord/runtime/services/wiring"
)

// concord serve builds the chat roles of catalog.Chat with the Build
// functions concord dev builds them with (TestDevBuildsChatRoles in
// test/dev): with the registry and the node's gRPC services, the
// read-state seam in process for the users the node owns and the role's
// service on ReadStateNode for the others.
func TestServeBuildsChatRoles(t *testing.T) {
	addr := os.Getenv("CONCORD_KAFKA")
	if addr == "" {
		t.Fatal("CONCORD_KAFKA is not set: run `make test` (or hack/kafka/kafka.sh start)")
	}
	saved := catalog.Chat
	var built, want []string
	wrapped := make([]wiring.Role, 0, len(saved))
	for _, r := range saved {
		// The data role needs a shared store (Cassandra); its serve Build
		// runs in test/cluster's TestKillDataNode.
		if r.Name != registry.RoleData {
			want = append(want, r.Name)
		}
		wrapped = append(wrapped, wiring.Role{Name: r.Name, Build: func(ctx context.Context, b *wiring.Builder) error {
			if _, placed := wiring.Lookup(b.Seams, wiring.Placement); !placed || b.Registry == nil || b.GRPC == nil || b.Seams == nil || b.Store == nil {
				t.Errorf("role %s: serve builder with the wrong parts: %+v", r.Name, b.Parts)
			}
			built = append(built, r.Name)
			if err := r.Build(ctx, b); err != nil {
				return err
			}
			// Each contributes its node-to-node service.
			switch {
			case r.Name == readstaterole.Name && b.GRPC.ReadStates == nil:
				t.Error("the readstate role serves no ReadStateNode")
			case r.Name == relayrole.Name && b.GRPC.Relay == nil:
				t.Error("the relay role serves no RelayNode")
			case r.Name == registry.RoleGuild && (b.GRPC.Guild == nil || b.GRPC.Owns == nil):
				t.Error("the guild role serves no GuildNode")
			}
			return nil
		}})
	}

	prefix := fmt.Sprintf("chatroles-%x", rand.Uint64())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	nodeRoles := append([]string{}, DefaultRoles...)
	for _, r := range want {
		if !slices.Contains(nodeRoles, r) {
			nodeRoles = append(nodeRoles, r)
		}
	}
	n, err := Open(ctx, Config{Roles: nodeRoles, Node: "solo", DataDir: t.TempDir(),
		HTTP: "127.0.0.1:0", GRPC: "127.0.0.1:0", LeaseTTL: 2 * time.Second, Logger: slog.New(slog.DiscardHandler),
		EventLog: "kafka://" + addr + "?topic_prefix=" + prefix + "."}, Options{Tables: Tables{Chat: wrapped, Table: catalog.Table}})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- n.Serve(ctx) }()
	t.Cleanup(func() { cancel(); <-done; n.Close() })
	if !slices.Equal(built, want) || !slices.Contains(built, registry.RoleGuild) || !slices.Contains(built, readstaterole.Name) || !slices.Contains(built, relayrole.Name) {
		t.Fatalf("serve built chat roles %v, want %v (guild, readstate and relay among them)", built, want)
	}
	// The node's REST surface and admin endpoints call the guild role's
	// service, the one the seam holds.
	if svc, ok := wiring.Lookup(n.Seams(), wiring.GuildService); !ok || svc == nil || svc != n.Guilds() {
		t.Fatalf("the guild seam of a node running the guild role = %p, %v; the node calls %p", svc, ok, n.Guilds())
	}

	if n.ReadStates() == nil || n.ReadStates().Local() == nil {
		t.Fatal("the read-state seam of a node running the role has no in-process service")
	}
	// Once the node is on its own read-state ring it owns every user:
	// the seam answers in process.
	deadline := time.Now().Add(30 * time.Second)
	for {
		states, err := n.ReadStates().States(ctx, snowflake.ID(42), []snowflake.ID{7})
		if err == nil && len(states) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("read states through the serve seam: %v %v", states, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
