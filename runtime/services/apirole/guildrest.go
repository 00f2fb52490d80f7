package apirole

import (
	"bytes"
	"io"
	"log/slog"
	"net/http"

	"github.com/concord-chat/concord/runtime/base/snowflake"
)

// guildREST is the REST surface of a guild node: the REST API and the bot
// platform for the guilds the placement ring gives this node. The guild
// actors themselves, the GuildNode service and the sweep of guilds placed
// elsewhere are the guild role's (runtime/services/guildrole).
type guildREST struct {
	node string
	owns func(snowflake.ID) bool
	res  *resolver
	api  http.Handler
	log  *slog.Logger
}

// ServeHTTP serves the REST API for the guilds this node owns. A request
// for another node's guild (the API node's ring is ahead of or behind
// ours) is answered 503 with notOwnerHeader, unprocessed, so that the API
// node retries it on the owner; this keeps a guild's writes in one actor.
func (g *guildREST) ServeHTTP(w http.ResponseWriter, r *http.Request) {
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
