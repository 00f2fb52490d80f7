package dev

import (
	"context"
	"slices"
	"testing"

	"github.com/concord-chat/concord/runtime/app"
	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/services/catalog"
	"github.com/concord-chat/concord/runtime/services/wiring"
)

// concord dev builds the chat roles of catalog.Chat with the Build
// functions concord serve builds them with (TestServeBuildsChatRoles in
// runtime/app): in process, without a registry or gRPC services, and
// each seam it provides is the in-process implementation the other roles
// then call.
func TestDevBuildsChatRoles(t *testing.T) {
	saved := catalog.Chat
	var built, want []string
	wrapped := make([]wiring.Role, 0, len(saved))
	for _, r := range saved {
		want = append(want, r.Name)
		wrapped = append(wrapped, wiring.Role{Name: r.Name, Build: func(ctx context.Context, b *wiring.Builder) error {
			if _, placed := wiring.Lookup(b.Seams, wiring.Placement); placed || b.GRPC != nil || b.Seams == nil || b.Store == nil || b.Auth == nil || b.IDs == nil {
				t.Errorf("role %s: dev builder with the wrong parts: %+v", r.Name, b.Parts)
			}
			built = append(built, r.Name)
			return r.Build(ctx, b)
		}})
	}

	p, _ := startDev(t, app.Tables{Chat: wrapped, Table: catalog.Table})
	if !slices.Equal(built, want) || !slices.Contains(built, "guild") || !slices.Contains(built, "readstate") {
		t.Fatalf("dev built chat roles %v, want %v (guild and readstate among them)", built, want)
	}
	// The REST API, the gateway and read states call the guild role's
	// service, the one the seam holds.
	if svc, ok := wiring.Lookup(p.Seams(), wiring.GuildService); !ok || svc == nil || svc != p.Guilds() {
		t.Fatalf("the guild seam of concord dev = %p, %v; the platform calls %p", svc, ok, p.Guilds())
	}
	if rs, ok := wiring.Lookup(p.Seams(), wiring.ReadStates); !ok || rs != wiring.ReadStateSeam(p.ReadStates()) {
		t.Fatal("the read-state port of concord dev is not the seam the readstate role set its service in")
	}
	if p.ReadStates().Local() == nil {
		t.Fatal("the read-state seam of concord dev is not the readstate role's in-process service")
	}
	// The seam answers in process: a user without records has none.
	states, err := p.ReadStates().States(context.Background(), snowflake.ID(42), []snowflake.ID{7})
	if err != nil || len(states) != 0 {
		t.Fatalf("read states through the dev seam: %v %v", states, err)
	}
}
