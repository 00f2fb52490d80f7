package apirole

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/concord-chat/concord/runtime/adapters/registry"
	"github.com/concord-chat/concord/runtime/base/adminapi"
	"github.com/concord-chat/concord/runtime/base/rest"
	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/edge/adminauth"
)

// clusterStats answers the guild role's statistics paths
// (adminapi.GuildsPath, adminapi.GuildPath) for the whole cluster
// on an api node of `concord serve` that runs no guild role, which
// kubectl-concord reaches through the api Service: it asks every live
// guild node's admin endpoint (registry label adminapi.LabelAdmin) and,
// for one guild, the guild's owner on the ring.
type clusterStats struct {
	ring *registry.LocalRing
	// token is the cluster's admin token, sent to the guild nodes.
	token string
	// timeout bounds each request to a guild node.
	timeout time.Duration
	client  *http.Client
	log     *slog.Logger
}

// routes adds the two paths with handle (the builder's HandleAdmin:
// behind the admin token).
func (s *clusterStats) routes(handle func(pattern string, h http.Handler)) {
	handle("GET "+adminapi.GuildsPath, http.HandlerFunc(s.serveAll))
	handle("GET "+adminapi.GuildPath, http.HandlerFunc(s.serveOne))
}

// serveAll merges the answers of every live guild node. Nodes that fail
// are left out (and logged); when every node fails, 502.
func (s *clusterStats) serveAll(w http.ResponseWriter, r *http.Request) {
	nodes := s.ring.View().Nodes()
	var (
		mu       sync.Mutex
		out      = []adminapi.GuildSample{}
		answered int
		lastErr  error
		wg       sync.WaitGroup
	)
	for _, node := range nodes {
		wg.Go(func() {
			var samples []adminapi.GuildSample
			_, err := s.get(r.Context(), node, adminapi.GuildsPath, &samples)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				lastErr = err
				s.log.Warn("guild stats of a guild node", "guild_node", node.Name, "err", err)
				return
			}
			answered++
			out = append(out, samples...)
		})
	}
	wg.Wait()
	if len(nodes) > 0 && answered == 0 {
		rest.WriteError(w, &rest.Error{Status: http.StatusBadGateway, Message: fmt.Sprintf("no guild node answered: %v", lastErr)})
		return
	}
	rest.WriteJSON(w, http.StatusOK, out)
}

// serveOne asks the guild's owner on the ring and relays its answer.
func (s *clusterStats) serveOne(w http.ResponseWriter, r *http.Request) {
	id, ok := statsGuildID(w, r)
	if !ok {
		return
	}
	owner, ok := s.ring.Owner(id)
	if !ok {
		writeUnknownGuild(w)
		return
	}
	var sample adminapi.GuildSample
	status, err := s.get(r.Context(), owner, adminapi.GuildsPath+"/"+strconv.FormatUint(uint64(id), 10), &sample)
	switch {
	case status == http.StatusNotFound:
		writeUnknownGuild(w)
	case err != nil:
		rest.WriteError(w, &rest.Error{Status: http.StatusBadGateway, Message: fmt.Sprintf("guild node %s: %v", owner.Name, err)})
	default:
		rest.WriteJSON(w, http.StatusOK, sample)
	}
}

// get decodes the 200 answer of GET path on node's admin endpoint into
// out, bounded by s.timeout. It returns the status when one arrived.
func (s *clusterStats) get(ctx context.Context, node registry.Node, path string, out any) (int, error) {
	addr := node.Labels[adminapi.LabelAdmin]
	if addr == "" {
		addr = node.HTTPAddr
	}
	if addr == "" {
		return 0, fmt.Errorf("node %s publishes no admin or HTTP address", node.Name)
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+path, nil)
	if err != nil {
		return 0, fmt.Errorf("admin request to %s: %w", node.Name, err)
	}
	adminauth.Set(req, s.token)
	resp, err := s.client.Do(req)
	if err != nil {
		return 0, fmt.Errorf("admin request to %s: %w", node.Name, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return resp.StatusCode, fmt.Errorf("GET %s on %s: %s: %s", path, node.Name, resp.Status, msg)
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return resp.StatusCode, fmt.Errorf("decode GET %s on %s: %w", path, node.Name, err)
	}
	return resp.StatusCode, nil
}

// statsGuildID parses the {id} of adminapi.GuildPath as the guild role
// does; a malformed id is answered 404, as Discord answers unknown
// routes, and ok is false.
func statsGuildID(w http.ResponseWriter, r *http.Request) (id snowflake.ID, ok bool) {
	v, err := strconv.ParseUint(r.PathValue("id"), 10, 64)
	if err != nil || v == 0 {
		rest.WriteError(w, &rest.Error{Status: http.StatusNotFound, Message: "404: Not Found"})
		return 0, false
	}
	return snowflake.ID(v), true
}

// writeUnknownGuild answers Discord's Unknown Guild error (404, code
// 10004): the guild is not loaded on its owner.
func writeUnknownGuild(w http.ResponseWriter) {
	rest.WriteError(w, &rest.Error{Status: http.StatusNotFound, Code: 10004, Message: "Unknown Guild"})
}
