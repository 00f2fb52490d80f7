package apirole

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"net/http"
	"sync"

	"github.com/concord-chat/concord/runtime/adapters/store"
	"github.com/concord-chat/concord/runtime/base/route"
	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/bots"
	"github.com/concord-chat/concord/runtime/edge/api"
)

// target says which guild node should serve a REST request: the owner of
// Guild when it is set, else the ring owner of Key (any live guild node;
// the key only spreads the load).
type target struct {
	Guild snowflake.ID
	Key   snowflake.ID
}

// ringKey is the id to look up on the placement ring.
func (t target) ringKey() snowflake.ID {
	if t.Guild != 0 {
		return t.Guild
	}
	return t.Key
}

// maxCachedChannels bounds the channel → guild cache; it is cleared when
// full (a channel's guild never changes, so any entry stays correct).
const maxCachedChannels = 1 << 17

// resolver maps REST requests to targets by the route tables the REST API
// and the bot platform export (api.Routes, bots.Routes), so that this
// package keeps no copy of their paths. A route acting on a guild
// ({guild}) goes to its owner; on a channel ({channel}) to the owner of
// the channel's guild (read from the store once and cached); on an invite
// ({code}) or a webhook ({webhook}) to the owner of its guild. Other
// requests, requests that match no route (the handler's 404 or 405 is
// the same everywhere) and private channels (guild 0) go to any guild
// node.
type resolver struct {
	store store.Guilds
	// interactions finds an interaction's guild for the bot platform's
	// callback and webhook routes; nil routes them anywhere.
	interactions interactionGuilds
	api, bots    *route.Table

	mu       sync.Mutex
	channels map[snowflake.ID]snowflake.ID
}

func newResolver(s store.Guilds) *resolver {
	return &resolver{
		store: s, channels: make(map[snowflake.ID]snowflake.ID),
		api: route.NewTable(api.Routes()), bots: route.NewTable(bots.Routes()),
	}
}

// interactionGuilds finds the guild of an interaction; the bot store
// implements it.
type interactionGuilds interface {
	GetInteraction(ctx context.Context, id snowflake.ID) (bots.Interaction, error)
}

// route resolves r, whose body (already read) is body. A channel or
// invite that does not exist routes to any node, which answers Discord's
// 404. An error means the store could not be read.
//
// The bot platform's routes go to the owner of the guild they act on, so
// that its actor is the one that changes: by the {guild} of the path, and
// for the routes whose guild is elsewhere, POST /oauth2/authorize by the
// body's guild_id, POST /interactions by the body's channel, and an
// interaction's callback and followup webhooks by the guild of the
// interaction its token names. /webhooks/{id}/{token} is the bot
// platform's when the token is an interaction's, else the API's.
func (rs *resolver) route(ctx context.Context, r *http.Request, body []byte) (target, error) {
	t := target{Key: spreadKey(r)}
	if m, ok := rs.bots.Match(r.Method, r.URL); ok && (m.Value("token") == "" || isInteractionToken(m.Value("token"))) {
		return rs.botRoute(ctx, t, m, body)
	}
	m, ok := rs.api.Match(r.Method, r.URL)
	if !ok {
		return t, nil
	}
	switch {
	case m.Guild() != 0:
		t.Guild = m.Guild()
	case m.Channel() != 0:
		return rs.channelRoute(ctx, t, m.Channel())
	case m.Value("webhook") != "":
		return rs.webhookRoute(ctx, t, m.ID("webhook"))
	case m.Value("code") != "":
		inv, err := rs.store.GetInvite(ctx, m.Value("code"))
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return t, fmt.Errorf("apirole: invite %q: %w", m.Value("code"), err)
		}
		t.Guild = inv.GuildID
	}
	return t, nil
}

// botRoute routes a bot platform request (see route).
func (rs *resolver) botRoute(ctx context.Context, t target, m route.Match, body []byte) (target, error) {
	switch {
	case m.Guild() != 0:
		t.Guild = m.Guild()
	case m.Value("token") != "":
		return rs.interactionRoute(ctx, t, m.Value("token"))
	case m.Route.Pattern == "POST /oauth2/authorize":
		var b struct {
			GuildID snowflake.ID `json:"guild_id"`
		}
		_ = json.Unmarshal(body, &b) // a bad body is the owner's 400 to answer
		t.Guild = b.GuildID
	case m.Route.Pattern == "POST /interactions":
		var b struct {
			ChannelID snowflake.ID `json:"channel_id"`
		}
		if json.Unmarshal(body, &b) != nil || b.ChannelID == 0 {
			break
		}
		g, err := rs.channelGuild(ctx, b.ChannelID)
		if err != nil {
			return t, err
		}
		t.Guild = g
	}
	return t, nil
}

// channelRoute routes by the channel's guild; a private channel (or one
// that does not exist) keys the ring by the channel, so that one node
// serves it and its events stay in order.
func (rs *resolver) channelRoute(ctx context.Context, t target, id snowflake.ID) (target, error) {
	g, err := rs.channelGuild(ctx, id)
	if err != nil {
		return t, err
	}
	t.Guild = g
	if g == 0 {
		t.Key = id
	}
	return t, nil
}

// interactionRoute routes by the guild of the interaction token names;
// one node per interaction otherwise (a DM interaction), which keeps its
// acknowledgement timer and its followups together.
func (rs *resolver) interactionRoute(ctx context.Context, t target, token string) (target, error) {
	id, ok := bots.InteractionOfToken(token)
	if !ok || rs.interactions == nil {
		return t, nil
	}
	t.Key = id
	in, err := rs.interactions.GetInteraction(ctx, id)
	if errors.Is(err, bots.ErrNotFound) {
		return t, nil
	}
	if err != nil {
		return t, fmt.Errorf("apirole: interaction %d: %w", id, err)
	}
	t.Guild = in.GuildID
	return t, nil
}

func isInteractionToken(token string) bool {
	_, ok := bots.InteractionOfToken(token)
	return ok
}

// webhookGuilds finds the guild of a webhook; the store implements it.
type webhookGuilds interface {
	GetWebhook(ctx context.Context, id snowflake.ID) (store.Webhook, error)
}

// webhookRoute routes a webhook's routes (by id, or by token) to the
// owner of the webhook's guild, where its executions are limited and its
// messages fanned out; an unknown webhook goes anywhere, which answers
// 10015.
func (rs *resolver) webhookRoute(ctx context.Context, t target, id snowflake.ID) (target, error) {
	wg, ok := rs.store.(webhookGuilds)
	if !ok || id == 0 {
		return t, nil
	}
	wh, err := wg.GetWebhook(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return t, nil
	}
	if err != nil {
		return t, fmt.Errorf("apirole: webhook %d: %w", id, err)
	}
	t.Guild = wh.GuildID
	return t, nil
}

func (rs *resolver) channelGuild(ctx context.Context, id snowflake.ID) (snowflake.ID, error) {
	rs.mu.Lock()
	g, ok := rs.channels[id]
	rs.mu.Unlock()
	if ok {
		return g, nil
	}
	c, err := rs.store.GetChannel(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("apirole: channel %d: %w", id, err)
	}
	rs.mu.Lock()
	if len(rs.channels) >= maxCachedChannels {
		clear(rs.channels)
	}
	rs.channels[id] = c.GuildID
	rs.mu.Unlock()
	return c.GuildID, nil
}

// spreadKey hashes the caller's credentials (or the path) so that
// requests without a guild spread over the guild nodes.
func spreadKey(r *http.Request) snowflake.ID {
	h := fnv.New64a()
	if a := r.Header.Get("Authorization"); a != "" {
		h.Write([]byte(a))
	} else {
		h.Write([]byte(r.URL.Path))
	}
	return snowflake.ID(h.Sum64() | 1)
}
