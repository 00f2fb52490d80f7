package apirole

import (
	"context"
	"encoding/base64"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/concord-chat/concord/runtime/adapters/store"
	"github.com/concord-chat/concord/runtime/base/route"
	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/bots"
	"github.com/concord-chat/concord/runtime/edge/api"
)

// The ids the fakes below answer with.
const (
	pathGuild    = 111 // a {guild} of a path
	pathChannel  = 222 // a {channel} of a path, in channelGuild
	channelGuild = 500
	inviteGuild  = 600
	webhookGuild = 700
	interaction  = 800 // the interaction an interaction token names
	interGuild   = 900 // its guild
	bodyGuild    = 1000
)

// routeStore answers the resolver's lookups and counts them.
type routeStore struct {
	store.Guilds
	lookups atomic.Int32
}

func (s *routeStore) GetChannel(_ context.Context, id snowflake.ID) (store.Channel, error) {
	s.lookups.Add(1)
	if id != pathChannel {
		return store.Channel{}, store.ErrNotFound
	}
	return store.Channel{ID: id, GuildID: channelGuild}, nil
}

func (s *routeStore) GetInvite(_ context.Context, code string) (store.Invite, error) {
	s.lookups.Add(1)
	return store.Invite{Code: code, GuildID: inviteGuild}, nil
}

func (s *routeStore) GetWebhook(_ context.Context, id snowflake.ID) (store.Webhook, error) {
	s.lookups.Add(1)
	return store.Webhook{ID: id, GuildID: webhookGuild}, nil
}

type routeInteractions struct{}

func (routeInteractions) GetInteraction(_ context.Context, id snowflake.ID) (bots.Interaction, error) {
	if id != interaction {
		return bots.Interaction{}, bots.ErrNotFound
	}
	return bots.Interaction{ID: id, GuildID: interGuild}, nil
}

// interactionToken is a token naming interaction, shaped as the bot
// platform mints them.
var interactionToken = base64.RawURLEncoding.EncodeToString([]byte("interaction:800:")) + ".c2VjcmV0"

// fill substitutes a route's wildcards: the fakes' ids for {guild} and
// {channel}, an interaction token for {token} when interactionTokens,
// 333 for the rest.
func fill(rt route.Route, interactionTokens bool) string {
	segs := strings.Split(rt.Path, "/")
	for i, seg := range segs {
		switch {
		case seg == "{guild}":
			segs[i] = "111"
		case seg == "{channel}":
			segs[i] = "222"
		case seg == "{token}" && interactionTokens:
			segs[i] = interactionToken
		case seg == "{token}":
			segs[i] = "channel-webhook-token"
		case strings.HasPrefix(seg, "{"):
			segs[i] = "333"
		}
	}
	return "/api/v10" + strings.Join(segs, "/")
}

// wantGuild is the guild a route of table must resolve to, by what it
// acts on.
func wantGuild(rt route.Route, botPlatform bool) snowflake.ID {
	has := func(p string) bool { return strings.Contains(rt.Path, "{"+p+"}") }
	switch {
	case has("guild"):
		return pathGuild
	case has("channel"):
		return channelGuild
	case botPlatform && has("token"):
		return interGuild
	case botPlatform && rt.Pattern == "POST /oauth2/authorize":
		return bodyGuild // the body's guild_id
	case botPlatform && rt.Pattern == "POST /interactions":
		return channelGuild // the guild of the body's channel_id
	case has("webhook"):
		return webhookGuild
	case has("code"):
		return inviteGuild
	}
	return 0
}

// TestResolverRoutesEveryRoute: every route the REST API and the bot
// platform export resolves to the guild it acts on — by path, through
// the channel, invite, webhook or interaction it names, or by its body —
// and a route acting on no guild spreads over the nodes.
func TestResolverRoutesEveryRoute(t *testing.T) {
	st := &routeStore{}
	rs := newResolver(st)
	rs.interactions = routeInteractions{}
	check := func(rt route.Route, path string, want snowflake.ID) {
		t.Helper()
		body := `{"guild_id":"1000","channel_id":"222"}`
		req := httptest.NewRequest(rt.Method, path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bot x")
		got, err := rs.route(context.Background(), req, []byte(body))
		if err != nil || got.Guild != want || got.ringKey() == 0 {
			t.Errorf("%s (%s): target %+v, %v; want guild %d", rt.Pattern, path, got, err, want)
		}
	}
	for _, rt := range api.Routes() {
		check(rt, fill(rt, false), wantGuild(rt, false))
	}
	for _, rt := range bots.Routes() {
		check(rt, fill(rt, true), wantGuild(rt, true))
	}
}

// TestResolverRoutesNothingElse: requests that match no route go to any
// node without a store lookup, however much their path looks like one.
func TestResolverRoutesNothingElse(t *testing.T) {
	st := &routeStore{}
	rs := newResolver(st)
	for _, c := range []struct{ method, path string }{
		{http.MethodGet, "/api/v10/guilds"},
		{http.MethodGet, "/api/v10/users/@me/guilds/111"},
		{http.MethodPost, "/api/v10/guilds/111/unknown"},
		{http.MethodPatch, "/api/v10/channels/222/typing"},
		{http.MethodGet, "/api/v8/channels/222"},
		{http.MethodGet, "/api/v10//channels/222"},
		{http.MethodGet, "/channels/222"},
		{http.MethodGet, "/gateway"},
		{http.MethodGet, "/"},
	} {
		req := httptest.NewRequest(c.method, c.path, nil)
		got, err := rs.route(context.Background(), req, nil)
		if err != nil || got.Guild != 0 || got.ringKey() == 0 {
			t.Errorf("%s %s: target %+v, %v; want no guild and a spread key", c.method, c.path, got, err)
		}
	}
	if n := st.lookups.Load(); n != 0 {
		t.Errorf("%d store lookups for requests that are no route", n)
	}
}
