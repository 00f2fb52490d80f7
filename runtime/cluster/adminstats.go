package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/concord-chat/concord/runtime/adminauth"
	"github.com/concord-chat/concord/runtime/guild"
	"github.com/concord-chat/concord/runtime/registry"
	"github.com/concord-chat/concord/runtime/snowflake"
)

// GuildSample is one guild's load as GET /admin/guilds reports it. It has
// the JSON shape of the operator's fleet.GuildSample (operator/fleet),
// which the operator's autoscaler and kubectl-concord decode; it is
// declared again here so that the runtime binary does not link the
// Kubernetes API types that package imports (a test checks both encode
// identically).
type GuildSample struct {
	// GuildID is the guild's snowflake.
	GuildID string `json:"guildID"`
	// Node is the registry node id running the guild's actor.
	Node string `json:"node"`
	// Pod is the pod name of that node; empty here (the operator fills
	// it from the pod it asked).
	Pod string `json:"pod,omitempty"`
	// EventAgeP50 and EventAgeP99 are the time from an operation's entry
	// into the actor's queue to its dispatch, over the latest events of
	// the last minute (guild.StatsWindow), in nanoseconds.
	EventAgeP50 time.Duration `json:"eventAgeP50"`
	EventAgeP99 time.Duration `json:"eventAgeP99"`
	// QueueLength is the number of operations waiting in the actor's
	// mailbox.
	QueueLength int64 `json:"queueLength"`
	// Online is the number of gateway sessions subscribed to the guild.
	Online int64 `json:"online"`
	// Members is the guild's member count.
	Members int64 `json:"members"`
	// VoiceCalls is always 0: there is no voice role yet.
	VoiceCalls int64 `json:"voiceCalls"`
}

// sampleOf converts a guild actor's stats.
func sampleOf(node string, st guild.Stats) GuildSample {
	return GuildSample{
		GuildID:     strconv.FormatUint(uint64(st.GuildID), 10),
		Node:        node,
		EventAgeP50: st.EventAgeP50,
		EventAgeP99: st.EventAgeP99,
		QueueLength: int64(st.QueueLength),
		Online:      int64(st.Online),
		Members:     int64(st.Members),
	}
}

// statsRoutes adds the per-guild statistics endpoints:
//
//	GET /admin/guilds       → 200 []GuildSample
//	GET /admin/guilds/{id}  → 200 GuildSample, or 404 {"code": 10004} when not loaded
//
// A guild node answers for the guilds loaded in its own actors (the
// operator asks every guild pod). An api node that runs no guild role
// answers for the whole cluster (kubectl-concord asks the api Service):
// it asks every live guild node's admin endpoint (registry label
// concord.dev/admin) and, for one guild, the guild's owner on the ring.
func (n *Node) statsRoutes(mux *http.ServeMux) {
	switch {
	case n.guilds != nil:
		mux.HandleFunc("GET /admin/guilds", n.serveLocalGuilds)
		mux.HandleFunc("GET /admin/guilds/{id}", n.serveLocalGuild)
	case has(n.cfg, registry.RoleAPI):
		mux.HandleFunc("GET /admin/guilds", n.serveClusterGuilds)
		mux.HandleFunc("GET /admin/guilds/{id}", n.serveOwnerGuild)
	}
}

func (n *Node) serveLocalGuilds(w http.ResponseWriter, _ *http.Request) {
	stats := n.guilds.AllGuildStats()
	out := make([]GuildSample, 0, len(stats))
	for _, st := range stats {
		out = append(out, sampleOf(n.cfg.Node, st))
	}
	writeJSON(w, http.StatusOK, out)
}

func (n *Node) serveLocalGuild(w http.ResponseWriter, r *http.Request) {
	id, ok := guildParam(w, r)
	if !ok {
		return
	}
	st, ok := n.guilds.GuildStats(id)
	if !ok {
		writeUnknownGuild(w)
		return
	}
	writeJSON(w, http.StatusOK, sampleOf(n.cfg.Node, st))
}

// serveClusterGuilds merges the answers of every live guild node. Nodes
// that fail are left out (and logged); when every node fails, 502.
func (n *Node) serveClusterGuilds(w http.ResponseWriter, r *http.Request) {
	nodes := n.guildRng.View().Nodes()
	var (
		mu       sync.Mutex
		out      = []GuildSample{}
		answered int
		lastErr  error
		wg       sync.WaitGroup
	)
	for _, node := range nodes {
		wg.Go(func() {
			var samples []GuildSample
			_, err := n.adminGet(r.Context(), node, "/admin/guilds", &samples)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				lastErr = err
				n.log.Warn("guild stats of a guild node", "guild_node", node.Name, "err", err)
				return
			}
			answered++
			out = append(out, samples...)
		})
	}
	wg.Wait()
	if len(nodes) > 0 && answered == 0 {
		writeError(w, http.StatusBadGateway, fmt.Sprintf("no guild node answered: %v", lastErr))
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// serveOwnerGuild asks the guild's owner on the ring and relays its
// answer.
func (n *Node) serveOwnerGuild(w http.ResponseWriter, r *http.Request) {
	id, ok := guildParam(w, r)
	if !ok {
		return
	}
	owner, ok := n.guildRng.Owner(id)
	if !ok {
		writeUnknownGuild(w)
		return
	}
	var s GuildSample
	status, err := n.adminGet(r.Context(), owner, "/admin/guilds/"+strconv.FormatUint(uint64(id), 10), &s)
	switch {
	case status == http.StatusNotFound:
		writeUnknownGuild(w)
	case err != nil:
		writeError(w, http.StatusBadGateway, fmt.Sprintf("guild node %s: %v", owner.Name, err))
	default:
		writeJSON(w, http.StatusOK, s)
	}
}

// adminClient is the HTTP client of admin requests between nodes; each
// request is bounded by its context.
var adminClient = &http.Client{}

// adminGet decodes the 200 answer of GET path on node's admin endpoint
// into out, bounded by the node's call timeout. It returns the status
// when one arrived.
func (n *Node) adminGet(ctx context.Context, node registry.Node, path string, out any) (int, error) {
	addr := node.Labels[labelAdmin]
	if addr == "" {
		addr = node.HTTPAddr
	}
	if addr == "" {
		return 0, fmt.Errorf("node %s publishes no admin or HTTP address", node.Name)
	}
	ctx, cancel := context.WithTimeout(ctx, n.cfg.CallTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+path, nil)
	if err != nil {
		return 0, fmt.Errorf("admin request to %s: %w", node.Name, err)
	}
	adminauth.Set(req, n.adminToken)
	resp, err := adminClient.Do(req)
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

// guildParam parses the {id} path value; a malformed id is answered 404
// as Discord answers unknown routes.
func guildParam(w http.ResponseWriter, r *http.Request) (snowflake.ID, bool) {
	v, err := strconv.ParseUint(r.PathValue("id"), 10, 64)
	if err != nil || v == 0 {
		writeError(w, http.StatusNotFound, "404: Not Found")
		return 0, false
	}
	return snowflake.ID(v), true
}

// writeUnknownGuild answers Discord's Unknown Guild error: the guild is
// not loaded on this node (or, on an api node, on its owner).
func writeUnknownGuild(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusNotFound)
	_ = json.NewEncoder(w).Encode(map[string]any{"message": "Unknown Guild", "code": 10004})
}

// writeJSON answers v as JSON with status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
