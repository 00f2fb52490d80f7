package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/concord-chat/concord/runtime/event"
	"github.com/concord-chat/concord/runtime/guild"
	"github.com/concord-chat/concord/runtime/memberlist"
	"github.com/concord-chat/concord/runtime/presence"
	"github.com/concord-chat/concord/runtime/registry"
	"github.com/concord-chat/concord/runtime/snowflake"
	"github.com/concord-chat/concord/runtime/transport"
)

// guildErrors is the domain part of the transport's error table, shared
// by guild servers and gateway clients.
var guildErrors = []transport.ErrorCode{
	{Err: guild.ErrMissingAccess, Code: codes.PermissionDenied},
	{Err: guild.ErrUnknownGuild, Code: codes.NotFound},
	{Err: guild.ErrNotSubscribed, Code: codes.NotFound},
}

// guildRole is the guild role of a node: the guild actors of the guilds
// the placement ring gives this node, the REST API for them, and the
// GuildNode gRPC service gateways subscribe sessions through.
type guildRole struct {
	node    string
	svc     *guild.Service
	ring    *registry.LocalRing
	owns    func(snowflake.ID) bool
	res     *resolver
	api     http.Handler
	metrics *metrics
	log     *slog.Logger
}

// ServeHTTP serves the REST API for the guilds this node owns. A request
// for another node's guild (the API node's ring is ahead of or behind
// ours) is answered 503 with notOwnerHeader, unprocessed, so that the API
// node retries it on the owner; this keeps a guild's writes in one actor.
func (g *guildRole) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := routingBody(w, r)
	if err != nil {
		writeTooLarge(w)
		return
	}
	rt, err := g.res.route(r.Context(), r, body)
	if err != nil {
		g.log.Warn("route request", "path", r.URL.Path, "err", err)
		writeError(w, http.StatusServiceUnavailable, "Service unavailable")
		return
	}
	if rt.Guild != 0 && !g.owns(rt.Guild) {
		w.Header().Set(notOwnerHeader, g.node)
		writeError(w, http.StatusServiceUnavailable, "Service unavailable: guild placed on another node")
		return
	}
	g.api.ServeHTTP(w, r)
}

// routingBody reads a request's body for routing and puts it back for the
// handler.
func routingBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	if r.Body == nil || r.Body == http.NoBody || isUpload(r) {
		// An upload is streamed to the REST handler, which bounds it
		// (spool.go); no route reads it.
		return nil, nil
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxProxyBody))
	if err != nil {
		return nil, err
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	return body, nil
}

// sweep unloads every loaded guild the ring no longer gives this node, at
// each ring change and every interval (guilds created or touched here for
// a moment, such as by POST /guilds, are placed elsewhere), until ctx
// ends.
func (g *guildRole) sweep(ctx context.Context, interval time.Duration) {
	changes := g.ring.Changes(ctx)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case _, ok := <-changes:
			if !ok {
				return
			}
		case <-t.C:
		case <-ctx.Done():
			return
		}
		for _, id := range g.svc.LoadedGuilds() {
			if g.owns(id) {
				continue
			}
			if err := g.svc.Unload(ctx, id); err != nil {
				if ctx.Err() == nil {
					g.log.Warn("unload guild placed elsewhere", "guild_id", id, "err", err)
				}
				continue
			}
			g.metrics.unloaded.Inc()
		}
	}
}

// guildBackend serves GuildNode with the local guild service.
type guildBackend struct {
	svc *guild.Service
	// presences is the guild node's presence cache with --presence, nil
	// without.
	presences *presenceCache
}

var _ transport.GuildBackend = guildBackend{}

// Subscribe implements transport.GuildBackend.
func (b guildBackend) Subscribe(ctx context.Context, guildID snowflake.ID, s event.Session) error {
	return notOwner(b.svc.AttachSession(ctx, guildID, s))
}

// Disconnect implements transport.GuildBackend. Gateways detach only
// sessions that ended for good; once no guild of this node holds the
// session, its typing focus here ends too (guild.Service.SessionEnded).
func (b guildBackend) Disconnect(ctx context.Context, guildID snowflake.ID, s event.Session) error {
	err := b.svc.DetachSession(ctx, guildID, s)
	if err == nil && b.presences != nil && !b.svc.HasSession(s.ID) {
		b.svc.SessionEnded(s.ID)
	}
	return notOwner(err)
}

// MoveSession implements transport.GuildBackend: a session the guild
// does not deliver to is guild.ErrNotSubscribed (NotFound on the wire).
func (b guildBackend) MoveSession(ctx context.Context, guildID snowflake.ID, mv guild.Move) (int, error) {
	n, err := b.svc.MoveSession(ctx, guildID, mv)
	if err != nil && !errors.Is(err, guild.ErrNotSubscribed) {
		return 0, notOwner(err)
	}
	return n, err
}

// CanView implements transport.GuildBackend for the read-state role's
// mention counting.
func (b guildBackend) CanView(ctx context.Context, _, user, channel snowflake.ID) (bool, error) {
	return b.svc.CanView(ctx, user, channel), nil
}

// RoleMembers implements transport.GuildBackend: an unknown guild is
// guild.ErrUnknownGuild (NotFound on the wire).
func (b guildBackend) RoleMembers(ctx context.Context, guildID, role snowflake.ID) ([]snowflake.ID, error) {
	ids, err := b.svc.RoleMembers(ctx, guildID, role)
	if err != nil && !errors.Is(err, guild.ErrUnknownGuild) {
		return nil, notOwner(err)
	}
	return ids, err
}

// PresenceChanged implements transport.GuildBackend: the presence node's
// broadcast is cached for the guilds loaded later and applied to every
// guild of the user loaded here. A node without --presence does not
// serve it.
func (b guildBackend) PresenceChanged(ctx context.Context, _, user snowflake.ID, p presence.Presence) error {
	if b.presences == nil {
		return fmt.Errorf("%w: presence is off on this guild node", transport.ErrNotServed)
	}
	b.presences.set(user, p)
	b.svc.PresenceChanged(ctx, user, p, nil)
	return nil
}

// LazyRequest implements transport.GuildBackend: op 14, parsed here by
// the gateway's own parser.
func (b guildBackend) LazyRequest(ctx context.Context, guildID snowflake.ID, s event.Session, d json.RawMessage) error {
	req, err := memberlist.ParseRequest(d)
	if err != nil || req.GuildID != guildID {
		return fmt.Errorf("%w: op 14 for guild %d: %v", transport.ErrInvalid, guildID, err)
	}
	return notOwner(b.svc.LazyRequest(ctx, s, req))
}

// RequestMembers implements transport.GuildBackend: op 8.
func (b guildBackend) RequestMembers(ctx context.Context, guildID snowflake.ID, s event.Session, d json.RawMessage) error {
	req, err := memberlist.ParseMembersRequest(d)
	if err != nil || req.GuildID != guildID {
		return fmt.Errorf("%w: op 8 for guild %d: %v", transport.ErrInvalid, guildID, err)
	}
	return notOwner(b.svc.RequestMembers(ctx, s, req))
}

// UpdateVoiceState implements transport.GuildBackend: op 4. A join the
// guild refuses was answered through the guild's events and is no error
// of the call.
func (b guildBackend) UpdateVoiceState(ctx context.Context, s event.Session, req guild.VoiceStateRequest) error {
	if err := b.svc.UpdateVoiceState(ctx, s, req); err != nil && !isVoiceRefusal(err) {
		return notOwner(err)
	}
	return nil
}

// notOwner turns guild.ErrMoved (the actor was unloaded because the guild
// moved) into the transport's ErrNotOwner, so callers retry on the owner.
func notOwner(err error) error {
	if errors.Is(err, guild.ErrMoved) {
		return fmt.Errorf("%w: %w", transport.ErrNotOwner, err)
	}
	return err
}
