// Package roletest builds, for the tests of the role packages, the
// role.Parts a process hands its roles: real parts over a Pebble store in
// a temporary directory, as `concord dev` builds them, for a test to
// adjust (a registry, gRPC services, an admin mux) before role.Build.
package roletest

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/concord-chat/concord/runtime/auth"
	"github.com/concord-chat/concord/runtime/config"
	"github.com/concord-chat/concord/runtime/role"
	"github.com/concord-chat/concord/runtime/snowflake"
	"github.com/concord-chat/concord/runtime/store"
	pebblestore "github.com/concord-chat/concord/runtime/store/pebble"
	"github.com/concord-chat/concord/runtime/voice/fleet"
)

// Key returns the server key the issuer of Parts signs tokens with, for
// a test that provides it to a role as well.
func Key() []byte { return []byte(strings.Repeat("k", 32)) }

// Parts returns the parts a process builds its roles from: cfg with its
// data directory in a temporary directory, completed; a Pebble store in
// another, closed when the test ends; a token issuer with Key; snowflakes
// of cfg's worker and process; the in-process voice fleet; and seams.
// The data directory is set before Complete so that the paths derived
// from it (the store's, the objects') are the test's too.
func Parts(t testing.TB, seams *role.Seams, cfg config.Config) role.Parts {
	t.Helper()
	cfg.DataDir = t.TempDir()
	cfg, err := cfg.Complete()
	if err != nil {
		t.Fatal(err)
	}
	logger := slog.New(slog.DiscardHandler)
	st, err := pebblestore.New(pebblestore.Config{Dir: t.TempDir(), Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	issuer, err := auth.New(auth.Config{Key: Key()}, st)
	if err != nil {
		t.Fatal(err)
	}
	ids, err := snowflake.New(snowflake.Config{Worker: cfg.Worker, Process: cfg.Process})
	if err != nil {
		t.Fatal(err)
	}
	return role.Parts{Config: cfg, Logger: logger, Store: st, Auth: issuer, IDs: ids,
		VoiceFleet: fleet.NewLocal(), Seams: seams}
}

// User creates a user named name in the store of p, with an id from p's
// snowflakes, and returns it.
func User(t testing.TB, p role.Parts, name string) store.User {
	t.Helper()
	id, err := p.IDs.Next()
	if err != nil {
		t.Fatal(err)
	}
	u := store.User{ID: id, Username: name, CreatedAt: time.Now().UTC()}
	if err := p.Store.CreateUser(context.Background(), u); err != nil {
		t.Fatal(err)
	}
	return u
}
