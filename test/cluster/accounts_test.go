package cluster

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// The accounts and guilds the cluster tests make through REST; untagged,
// as the one-process serve test uses them too.

// clusterUser is a user registered through the REST API.
type clusterUser struct{ token, id string }

// register registers a user named prefix_<random hex> through api and
// returns its token.
func register(t *testing.T, api rest, prefix string) string {
	t.Helper()
	var reg struct {
		Token string `json:"token"`
	}
	api.must(t, "", "POST", "/auth/register", map[string]any{"username": fmt.Sprintf("%s_%x", prefix, rand.Uint32()), "password": "correct-horse-1"}, &reg)
	return reg.Token
}

// newUser registers a user through api and returns its token and its id
// as GET /users/@me answers it.
func newUser(t *testing.T, api rest, prefix string) clusterUser {
	t.Helper()
	token := register(t, api, prefix)
	var me struct {
		ID string `json:"id"`
	}
	api.must(t, token, "GET", "/users/@me", nil, &me)
	return clusterUser{token, me.ID}
}

// createGuild creates a guild named name of the user with token and
// returns its id.
func createGuild(t *testing.T, api rest, token, name string) string {
	t.Helper()
	var g struct {
		ID string `json:"id"`
	}
	api.must(t, token, "POST", "/guilds", map[string]any{"name": name}, &g)
	return g.ID
}

// firstChannel returns the id of the first channel GET
// /guilds/{guild}/channels lists (a new guild's default channel); the
// call is answered only once the guild is loaded on its node.
func firstChannel(t *testing.T, api rest, token, guild string) string {
	t.Helper()
	var chans []struct {
		ID string `json:"id"`
	}
	api.must(t, token, "GET", "/guilds/"+guild+"/channels", nil, &chans)
	if len(chans) == 0 {
		t.Fatalf("guild %s has no channel", guild)
	}
	return chans[0].ID
}

// newGuild creates a guild named name of the user with token, with a
// text channel "general", and returns the guild's and channel's ids.
func newGuild(t *testing.T, api rest, token, name string) (guildID, channelID string) {
	t.Helper()
	guildID = createGuild(t, api, token, name)
	var ch struct {
		ID string `json:"id"`
	}
	api.must(t, token, "POST", "/guilds/"+guildID+"/channels", map[string]any{"name": "general", "type": 0}, &ch)
	return guildID, ch.ID
}

// newInvite creates an invite to channel as the user with token and
// returns its code.
func newInvite(t *testing.T, api rest, token, channel string) string {
	t.Helper()
	var inv struct {
		Code string `json:"code"`
	}
	api.must(t, token, "POST", "/channels/"+channel+"/invites", map[string]any{}, &inv)
	return inv.Code
}

// join makes u a member of the guild of the invite code.
func join(t *testing.T, api rest, u clusterUser, code string) {
	t.Helper()
	api.must(t, u.token, "POST", "/invites/"+code, map[string]any{}, nil)
}

// guildWithMembers creates a guild of owner with one text channel, which
// every member joins by invite, and returns the guild's and channel's ids.
func guildWithMembers(t *testing.T, api rest, owner clusterUser, name string, members ...clusterUser) (guildID, channelID string) {
	t.Helper()
	guildID, channelID = newGuild(t, api, owner.token, name)
	code := newInvite(t, api, owner.token, channelID)
	for _, u := range members {
		join(t, api, u, code)
	}
	return guildID, channelID
}
