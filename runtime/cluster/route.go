package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"net/http"
	"strings"
	"sync"

	"github.com/concord-chat/concord/runtime/bots"
	"github.com/concord-chat/concord/runtime/snowflake"
	"github.com/concord-chat/concord/runtime/store"
)

// route says which guild node should serve a REST request: the owner of
// Guild when it is set, else the ring owner of Key (any live guild node;
// the key only spreads the load).
type route struct {
	Guild snowflake.ID
	Key   snowflake.ID
}

// ringKey is the id to look up on the placement ring.
func (r route) ringKey() snowflake.ID {
	if r.Guild != 0 {
		return r.Guild
	}
	return r.Key
}

// maxCachedChannels bounds the channel → guild cache; it is cleared when
// full (a channel's guild never changes, so any entry stays correct).
const maxCachedChannels = 1 << 17

// resolver maps REST requests to routes: the guild comes from the path
// (/guilds/{id}/..., /users/@me/guilds/{id}), from the channel's guild
// (/channels/{id}/..., read from the store once and cached) or from the
// invite's guild (/invites/{code}). Other requests, and private channels
// (guild 0), go to any guild node.
type resolver struct {
	store store.Guilds
	// interactions finds an interaction's guild for the bot platform's
	// callback and webhook routes; nil routes them anywhere.
	interactions interactionGuilds

	mu       sync.Mutex
	channels map[snowflake.ID]snowflake.ID
}

func newResolver(s store.Guilds) *resolver {
	return &resolver{store: s, channels: make(map[snowflake.ID]snowflake.ID)}
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
// that its actor is the one that changes: /applications/{app}/guilds/
// {guild}/... by path, POST /oauth2/authorize by the body's guild_id,
// POST /interactions by the body's channel, and an interaction's callback
// and webhooks by the guild of the interaction its token names.
func (rs *resolver) route(ctx context.Context, r *http.Request, body []byte) (route, error) {
	seg := apiSegments(r.URL.Path)
	rt := route{Key: spreadKey(r)}
	switch {
	case len(seg) >= 4 && seg[0] == "applications" && seg[2] == "guilds":
		rt.Guild = parseID(seg[3])
	case len(seg) == 2 && seg[0] == "oauth2" && seg[1] == "authorize" && r.Method == http.MethodPost:
		var b struct {
			GuildID snowflake.ID `json:"guild_id"`
		}
		_ = json.Unmarshal(body, &b) // a bad body is the owner's 400 to answer
		rt.Guild = b.GuildID
	case len(seg) == 1 && seg[0] == "interactions" && r.Method == http.MethodPost:
		var b struct {
			ChannelID snowflake.ID `json:"channel_id"`
		}
		if json.Unmarshal(body, &b) != nil || b.ChannelID == 0 {
			break
		}
		g, err := rs.channelGuild(ctx, b.ChannelID)
		if err != nil {
			return rt, err
		}
		rt.Guild = g
	case len(seg) >= 3 && seg[0] == "interactions":
		return rs.interactionRoute(ctx, rt, seg[2])
	case len(seg) >= 3 && seg[0] == "webhooks" && isInteractionToken(seg[2]):
		return rs.interactionRoute(ctx, rt, seg[2])
	case len(seg) >= 2 && seg[0] == "webhooks":
		return rs.webhookRoute(ctx, rt, seg[1])
	case len(seg) >= 2 && seg[0] == "guilds":
		rt.Guild = parseID(seg[1])
	case len(seg) >= 4 && seg[0] == "users" && seg[1] == "@me" && seg[2] == "guilds":
		rt.Guild = parseID(seg[3])
	case len(seg) >= 2 && (seg[0] == "channels" || seg[0] == "attachments"):
		id := parseID(seg[1])
		if id == 0 {
			break
		}
		g, err := rs.channelGuild(ctx, id)
		if err != nil {
			return rt, err
		}
		rt.Guild = g
		if g == 0 {
			rt.Key = id // one node per private channel keeps its events in order
		}
	case len(seg) == 2 && seg[0] == "invites":
		inv, err := rs.store.GetInvite(ctx, seg[1])
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return rt, fmt.Errorf("cluster: invite %q: %w", seg[1], err)
		}
		rt.Guild = inv.GuildID
	}
	return rt, nil
}

// interactionRoute routes by the guild of the interaction token names;
// one node per interaction otherwise (a DM interaction), which keeps its
// acknowledgement timer and its followups together.
func (rs *resolver) interactionRoute(ctx context.Context, rt route, token string) (route, error) {
	id, ok := bots.InteractionOfToken(token)
	if !ok || rs.interactions == nil {
		return rt, nil
	}
	rt.Key = id
	in, err := rs.interactions.GetInteraction(ctx, id)
	if errors.Is(err, bots.ErrNotFound) {
		return rt, nil
	}
	if err != nil {
		return rt, fmt.Errorf("cluster: interaction %d: %w", id, err)
	}
	rt.Guild = in.GuildID
	return rt, nil
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
func (rs *resolver) webhookRoute(ctx context.Context, rt route, rawID string) (route, error) {
	wg, ok := rs.store.(webhookGuilds)
	id := parseID(rawID)
	if !ok || id == 0 {
		return rt, nil
	}
	wh, err := wg.GetWebhook(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return rt, nil
	}
	if err != nil {
		return rt, fmt.Errorf("cluster: webhook %d: %w", id, err)
	}
	rt.Guild = wh.GuildID
	return rt, nil
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
		return 0, fmt.Errorf("cluster: channel %d: %w", id, err)
	}
	rs.mu.Lock()
	if len(rs.channels) >= maxCachedChannels {
		clear(rs.channels)
	}
	rs.channels[id] = c.GuildID
	rs.mu.Unlock()
	return c.GuildID, nil
}

// apiSegments returns the path segments after /api/v<N>, or nil for paths
// outside the versioned API.
func apiSegments(path string) []string {
	rest, ok := strings.CutPrefix(path, "/api/v")
	if !ok {
		return nil
	}
	_, rest, ok = strings.Cut(rest, "/")
	if !ok {
		return nil
	}
	return strings.Split(strings.Trim(rest, "/"), "/")
}

func parseID(s string) snowflake.ID {
	id, err := snowflake.Parse(s)
	if err != nil {
		return 0
	}
	return id
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
