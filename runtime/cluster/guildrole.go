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
	"github.com/concord-chat/concord/runtime/registry"
	"github.com/concord-chat/concord/runtime/snowflake"
	"github.com/concord-chat/concord/runtime/transport"
)

// guildErrors is the domain part of the transport's error table, shared
// by guild servers and gateway clients.
var guildErrors = []transport.ErrorCode{
	{Err: guild.ErrMissingAccess, Code: codes.PermissionDenied},
	{Err: guild.ErrUnknownGuild, Code: codes.NotFound},
}

// guildRole is the guild role of a node: the guild actors of the guilds
// the placement ring gives this node, the REST API for them, and the
// GuildNode gRPC service gateways subscribe sessions through.
type guildRole struct {
	node string
	svc  *guild.Service
	ring *registry.LocalRing
	owns func(snowflake.ID) bool
	res  *resolver
	api  http.Handler
	// dedupe answers sends the API node retried after a node died.
	dedupe  *sendDeduper
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
		writeError(w, http.StatusRequestEntityTooLarge, "Request entity too large")
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
	if r.Method == http.MethodPost && r.Header.Get(retryHeader) != "" && g.dedupe != nil {
		if seg := apiSegments(r.URL.Path); len(seg) == 3 && seg[0] == "channels" && seg[2] == "messages" {
			if id := parseID(seg[1]); id != 0 && g.dedupe.serve(w, r, id) {
				return
			}
		}
	}
	g.api.ServeHTTP(w, r)
}

// routingBody reads a request's body for routing and puts it back for the
// handler.
func routingBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	if r.Body == nil || r.Body == http.NoBody {
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

// Call implements transport.GuildBackend. REST requests reach guild nodes
// over HTTP (proxy.go), not through Call; Call serves the presence
// methods (servePresenceCall) and the read-state role's permission
// questions (serveReadStateCall) and a draining gateway's session moves
// (serveMoveSession).
func (b guildBackend) Call(ctx context.Context, guildID snowflake.ID, method string, body []byte) (int, []byte, error) {
	if method == callMoveSession {
		return serveMoveSession(ctx, b.svc, guildID, body)
	}
	if status, out, ok, err := servePresenceCall(ctx, b.svc, b.presences, method, body); ok {
		return status, out, err
	}
	if status, out, ok, err := serveVoiceCall(ctx, b.svc, method, body); ok {
		return status, out, err
	}
	return serveReadStateCall(ctx, b.svc, guildID, method, body)
}

// notOwner turns guild.ErrMoved (the actor was unloaded because the guild
// moved) into the transport's ErrNotOwner, so callers retry on the owner.
func notOwner(err error) error {
	if errors.Is(err, guild.ErrMoved) {
		return fmt.Errorf("%w: %w", transport.ErrNotOwner, err)
	}
	return err
}

// callMoveSession is the GuildNode.Call method a draining gateway moves a
// session's subscription to a guild with (guild.Service.MoveSession).
//
// It rides on Call rather than a new GuildNode RPC: Call is the
// transport's documented escape hatch for owner-routed operations, so the
// move gets the same routing, retry on a new owner and error mapping
// without widening transport.GuildBackend, which every guild-tier client
// and test fake implements.
const callMoveSession = "session.move"

// moveSessionArgs is callMoveSession's body.
type moveSessionArgs struct {
	Session event.SessionID `json:"session_id"`
	To      string          `json:"to"`
	MoveID  string          `json:"move_id"`
}

// moveSessionResult is callMoveSession's answer (status 200).
type moveSessionResult struct {
	// Markers is how many gateway.MoveMarker batches the guild node sent
	// the session's old gateway node.
	Markers int `json:"markers"`
}

// serveMoveSession answers callMoveSession: 200 with the marker count,
// 404 for a session the guild does not deliver to, 400 for a bad body.
func serveMoveSession(ctx context.Context, svc *guild.Service, guildID snowflake.ID, body []byte) (int, []byte, error) {
	var a moveSessionArgs
	if err := json.Unmarshal(body, &a); err != nil || a.Session == "" || a.To == "" || a.MoveID == "" {
		return http.StatusBadRequest, nil, nil
	}
	n, err := svc.MoveSession(ctx, guildID, guild.Move{Session: a.Session, To: a.To, ID: a.MoveID})
	if errors.Is(err, guild.ErrNotSubscribed) {
		return http.StatusNotFound, nil, nil
	}
	if err != nil {
		return 0, nil, notOwner(err)
	}
	out, err := json.Marshal(moveSessionResult{Markers: n})
	if err != nil {
		return 0, nil, fmt.Errorf("cluster: move session: %w", err)
	}
	return http.StatusOK, out, nil
}
