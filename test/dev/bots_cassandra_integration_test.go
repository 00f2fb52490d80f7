//go:build integration

package dev

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/concord-chat/concord/internal/resttest"
	"github.com/concord-chat/concord/runtime/config"
)

// TestBotsOnCassandraAreShared runs two platforms (as two processes would)
// on one Cassandra keyspace: an application created through one is
// visible through the other, with its token, because the bot platform's
// store lives in the shared keyspace (runtime/domain/bots/cassandra), not in a
// process's data directory.
func TestBotsOnCassandraAreShared(t *testing.T) {
	store := freshKeyspaceStore(t, "botsplat")
	key := fmt.Sprintf("%064x", rand.Uint64())
	on := func(c *config.Config) {
		c.Store = store
		c.ServerKey = key
		c.Registry = "mem"
	}
	_, a := startTestPlatform(t, on)
	_, b := startTestPlatform(t, on)

	var u struct {
		Token string `json:"token"`
	}
	resttest.Call(t, a, "", "POST", "/auth/register", map[string]any{"username": "owner", "password": "correct-horse-1"}, &u)
	var app struct {
		ID  string `json:"id"`
		Bot struct {
			ID string `json:"id"`
		} `json:"bot"`
	}
	resttest.Call(t, a, u.Token, "POST", "/applications", map[string]any{"name": "Shared"}, &app)
	var reset struct {
		Token string `json:"token"`
	}
	resttest.Call(t, a, u.Token, "POST", "/applications/"+app.ID+"/bot/reset", nil, &reset)
	var me struct {
		ID string `json:"id"`
	}
	resttest.Call(t, b, "Bot "+reset.Token, "GET", "/oauth2/applications/@me", nil, &me)
	if me.ID != app.ID {
		t.Fatalf("the other platform sees application %q, want %q", me.ID, app.ID)
	}
}
