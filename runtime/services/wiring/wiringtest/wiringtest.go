// Package wiringtest builds, for the tests of the role packages, the
// wiring.Parts a process hands its roles: real parts over a Pebble store in
// a temporary directory, as `concord dev` builds them, for a test to
// adjust (a registry, gRPC services, an admin mux) before wiring.Build.
package wiringtest

import (
	"context"
	"crypto/ed25519"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/concord-chat/concord/runtime/adapters/registry"
	"github.com/concord-chat/concord/runtime/adapters/store"
	pebblestore "github.com/concord-chat/concord/runtime/adapters/store/pebble"
	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/config"
	"github.com/concord-chat/concord/runtime/domain/auth"
	"github.com/concord-chat/concord/runtime/domain/voice/fleet"
	"github.com/concord-chat/concord/runtime/services/transport"
	"github.com/concord-chat/concord/runtime/services/wiring"
)

// Key returns the server key the issuer of Parts signs tokens with, for
// a test that provides it to a role as well.
func Key() []byte { return []byte(strings.Repeat("k", 32)) }

// Parts returns the parts a process builds its roles from: cfg with its
// data directory in a temporary directory, completed; a Pebble store in
// another, closed when the test ends; a token issuer with Key; snowflakes
// of cfg's worker and process; and seams holding the ports the root of a
// process running every role gives (the in-process voice fleet and voice
// port, the raw store, the server key; a test gives the others its roles
// need).
// The data directory is set before Complete so that the paths derived
// from it (the store's, the objects') are the test's too.
func Parts(t testing.TB, seams *wiring.Seams, cfg config.Config) wiring.Parts {
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
	p := wiring.Parts{Config: cfg, Logger: logger, Store: st, Auth: issuer, IDs: ids, Seams: seams}
	// The ports the root gives a process running every role: the
	// in-process voice fleet, the store, the key.
	f := fleet.NewLocal()
	wiring.Provide(seams, wiring.VoiceFleet, f)
	wiring.Provide(seams, wiring.Voice, wiring.VoicePort{Allocator: f, Endpoints: f.Endpoints, Key: voiceKey()})
	wiring.Provide(seams, wiring.RawStore, store.Store(st))
	wiring.Provide(seams, wiring.ServerKey, Key())
	return p
}

// voiceKey is a fixed voice token key for the tests' processes.
func voiceKey() ed25519.PrivateKey {
	return ed25519.NewKeyFromSeed([]byte(strings.Repeat("v", ed25519.SeedSize)))
}

// User creates a user named name in the store of p, with an id from p's
// snowflakes, and returns it.
func User(t testing.TB, p wiring.Parts, name string) store.User {
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

// Remote gives seams the ports the root of a cluster node gives on p's
// registry (p.Registry set): the guild placement ring and its GuildNode
// client, the GatewayNode client and the session directory over the
// gateway ring. They close with the seams.
func Remote(t testing.TB, ctx context.Context, p wiring.Parts) {
	t.Helper()
	if p.Registry == nil {
		t.Fatal("wiringtest.Remote: the parts have no registry")
	}
	s := p.Seams
	guilds, err := wiring.Ring(ctx, s, p.Registry, registry.RoleGuild, registry.LocalRingConfig{})
	if err != nil {
		t.Fatal(err)
	}
	gateways, err := wiring.Ring(ctx, s, p.Registry, registry.RoleGateway, registry.LocalRingConfig{})
	if err != nil {
		t.Fatal(err)
	}
	gc := transport.NewGuildClient(p.ClientConfig, guilds)
	gw := transport.NewGatewayClient(p.ClientConfig, gateways)
	dir := transport.NewSessionDirectory(p.ClientConfig, wiring.RingRoster{LocalRing: gateways})
	for _, open := range []func() error{
		func() error {
			_, err := wiring.Shared(s, wiring.GuildClient, func() (transport.GuildClient, func() error, error) { return gc, gc.Close, nil })
			return err
		},
		func() error {
			_, err := wiring.Shared(s, wiring.Gateways, func() (transport.GatewayClient, func() error, error) { return gw, gw.Close, nil })
			return err
		},
		func() error {
			_, err := wiring.Shared(s, wiring.Sessions, func() (transport.SessionDirectory, func() error, error) { return dir, dir.Close, nil })
			return err
		},
	} {
		if err := open(); err != nil {
			t.Fatal(err)
		}
	}
}
