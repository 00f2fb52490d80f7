package guildrole

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/concord-chat/concord/runtime/base/lifecycle"
	"github.com/concord-chat/concord/runtime/config"
	"github.com/concord-chat/concord/runtime/domain/event"
	"github.com/concord-chat/concord/runtime/domain/guild"
	"github.com/concord-chat/concord/runtime/services/readstaterole"
	"github.com/concord-chat/concord/runtime/services/wiring"
	"github.com/concord-chat/concord/runtime/services/wiring/wiringtest"
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

// TestDevBuild: in `concord dev` the role refuses to build without the
// process's gateway sink; with it, it provides its guild service (the
// one read states check visibility with) and the voice endpoints of the
// in-process fleet, delivers the service's events to the sink, and the
// seams close the service with the process.
func TestDevBuild(t *testing.T) {
	ctx := context.Background()
	var none wiring.Seams
	var group lifecycle.Group
	err := wiring.Build(ctx, []wiring.Role{Role}, func(string) bool { return true }, wiringtest.Parts(t, &none, config.Default()), http.NewServeMux(), &group)
	if err == nil || !strings.Contains(err.Error(), `port "guild/sink"`) {
		t.Fatalf("build without a sink = %v, want the missing sink named", err)
	}

	var seams wiring.Seams
	sink := make(chanSink, 64)
	wiring.Provide[event.Sink](&seams, wiring.Sink, sink)
	parts := wiringtest.Parts(t, &seams, config.Default())
	if err := wiring.Build(ctx, []wiring.Role{Role}, func(string) bool { return true }, parts, http.NewServeMux(), &group); err != nil {
		t.Fatal(err)
	}
	svc, ok := wiring.Lookup(&seams, wiring.GuildService)
	if !ok || svc == nil {
		t.Fatal("the role provided no guild service")
	}
	// Read states check visibility with the service the port holds.
	var _ readstaterole.Guilds = svc
	// A session attached to a guild of the service gets its GUILD_CREATE
	// through the process's sink.
	user := wiringtest.User(t, parts, "owner").ID
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
