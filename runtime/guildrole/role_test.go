package guildrole

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/concord-chat/concord/runtime/auth"
	"github.com/concord-chat/concord/runtime/config"
	"github.com/concord-chat/concord/runtime/event"
	"github.com/concord-chat/concord/runtime/guild"
	"github.com/concord-chat/concord/runtime/lifecycle"
	"github.com/concord-chat/concord/runtime/readstaterole"
	"github.com/concord-chat/concord/runtime/role"
	"github.com/concord-chat/concord/runtime/snowflake"
	"github.com/concord-chat/concord/runtime/store"
	pebblestore "github.com/concord-chat/concord/runtime/store/pebble"
	"github.com/concord-chat/concord/runtime/voice/fleet"
)

// chanSink hands the types of the batches the guild service delivers to
// a channel.
type chanSink chan string

func (s chanSink) Deliver(_ context.Context, _ string, b event.Batch) {
	select {
	case s <- b.Type:
	default:
	}
}

// devParts are the parts `concord dev` builds the role from, over a
// Pebble store in a temporary directory.
func devParts(t *testing.T, seams *role.Seams) role.Parts {
	t.Helper()
	cfg, err := config.Default().Complete()
	if err != nil {
		t.Fatal(err)
	}
	cfg.DataDir = t.TempDir()
	st, err := pebblestore.New(pebblestore.Config{Dir: t.TempDir(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	issuer, err := auth.New(auth.Config{Key: []byte(strings.Repeat("k", 32))}, st)
	if err != nil {
		t.Fatal(err)
	}
	ids, err := snowflake.New(snowflake.Config{})
	if err != nil {
		t.Fatal(err)
	}
	return role.Parts{Config: cfg, Logger: slog.New(slog.DiscardHandler), Store: st, Auth: issuer, IDs: ids,
		VoiceFleet: fleet.NewLocal(), Seams: seams}
}

// TestDevBuild: in `concord dev` the role refuses to build without the
// process's gateway sink; with it, it provides its guild service (the
// one read states check visibility with) and the voice endpoints of the
// in-process fleet, delivers the service's events to the sink, and the
// seams close the service with the process.
func TestDevBuild(t *testing.T) {
	ctx := context.Background()
	var none role.Seams
	var group lifecycle.Group
	err := role.Build(ctx, []role.Role{Role}, func(string) bool { return true }, devParts(t, &none), http.NewServeMux(), &group)
	if err == nil || !strings.Contains(err.Error(), "no gateway sink") {
		t.Fatalf("build without a sink = %v, want the missing sink named", err)
	}

	var seams role.Seams
	sink := make(chanSink, 64)
	role.Provide[event.Sink](&seams, LocalSink, sink)
	parts := devParts(t, &seams)
	if err := role.Build(ctx, []role.Role{Role}, func(string) bool { return true }, parts, http.NewServeMux(), &group); err != nil {
		t.Fatal(err)
	}
	svc, ok := role.Lookup(&seams, Service)
	if !ok || svc == nil {
		t.Fatal("the role provided no guild service")
	}
	if g, ok := role.Lookup(&seams, readstaterole.LocalGuilds); !ok || g != readstaterole.Guilds(svc) {
		t.Fatal("read states do not get the role's guild service")
	}
	if eps, ok := role.Lookup(&seams, VoiceEndpoints); !ok || eps == nil {
		t.Fatal("the role provided no voice endpoints")
	}
	// A session attached to a guild of the service gets its GUILD_CREATE
	// through the process's sink.
	user, err := parts.IDs.Next()
	if err != nil {
		t.Fatal(err)
	}
	if err := parts.Store.CreateUser(ctx, store.User{ID: user, Username: "owner", CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	g, err := svc.CreateGuild(ctx, user, "one wiring")
	if err != nil {
		t.Fatal(err)
	}
	sess := event.Session{ID: "s1", UserID: user, Node: "dev"}
	if err := svc.AttachSession(ctx, g.Guild.ID, sess); err != nil {
		t.Fatal(err)
	}
	timeout := time.After(30 * time.Second)
	for created := false; !created; {
		select {
		case typ := <-sink:
			created = typ == "GUILD_CREATE"
		case <-timeout:
			t.Fatal("no GUILD_CREATE reached the process's sink")
		}
	}
	if err := seams.Close(); err != nil {
		t.Fatal(err)
	}
	if err := svc.AttachSession(ctx, g.Guild.ID, sess); !errors.Is(err, guild.ErrUnavailable) {
		t.Fatalf("attach after the seams closed = %v, want the service closed (ErrUnavailable)", err)
	}
}
