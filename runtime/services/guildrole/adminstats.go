package guildrole

import (
	"net/http"
	"strconv"

	"github.com/concord-chat/concord/runtime/base/adminapi"
	"github.com/concord-chat/concord/runtime/base/rest"
	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/guild"
)

// Admin paths of the per-guild statistics (adminapi.GuildsPath and
// GuildPath), served by every process running the guild role (`concord
// dev` included) for the guilds loaded in its actors; the operator asks
// every guild pod. An api node without the guild role answers the same
// paths for the whole cluster (apirole).
const (
	// StatsPath answers 200 []adminapi.GuildSample.
	StatsPath = adminapi.GuildsPath
	// StatsGuildPath answers 200 adminapi.GuildSample, or 404 with
	// Discord's Unknown Guild error when the guild is not loaded.
	StatsGuildPath = adminapi.GuildPath
)

// localStats serves the statistics of the guilds loaded in svc's actors.
type localStats struct {
	svc  *guild.Service
	node string // the registry node id reported as each sample's Node
}

// routes adds GET StatsPath and GET StatsGuildPath with handle (the
// builder's HandleAdmin: behind the admin token).
func (s localStats) routes(handle func(pattern string, h http.Handler)) {
	handle("GET "+StatsPath, http.HandlerFunc(s.serveAll))
	handle("GET "+StatsGuildPath, http.HandlerFunc(s.serveOne))
}

func (s localStats) serveAll(w http.ResponseWriter, _ *http.Request) {
	stats := s.svc.AllGuildStats()
	out := make([]adminapi.GuildSample, 0, len(stats))
	for _, st := range stats {
		out = append(out, sampleOf(s.node, st))
	}
	rest.WriteJSON(w, http.StatusOK, out)
}

func (s localStats) serveOne(w http.ResponseWriter, r *http.Request) {
	id, ok := StatsGuildID(w, r)
	if !ok {
		return
	}
	st, ok := s.svc.GuildStats(id)
	if !ok {
		WriteUnknownGuild(w)
		return
	}
	rest.WriteJSON(w, http.StatusOK, sampleOf(s.node, st))
}

// sampleOf converts a guild actor's stats.
func sampleOf(node string, st guild.Stats) adminapi.GuildSample {
	return adminapi.GuildSample{
		GuildID:     strconv.FormatUint(uint64(st.GuildID), 10),
		Node:        node,
		EventAgeP50: st.EventAgeP50,
		EventAgeP99: st.EventAgeP99,
		QueueLength: int64(st.QueueLength),
		Online:      int64(st.Online),
		Members:     int64(st.Members),
		VoiceCalls:  int64(st.VoiceCalls),
	}
}

// StatsGuildID parses the {id} of StatsGuildPath; a malformed id is
// answered 404, as Discord answers unknown routes, and ok is false.
func StatsGuildID(w http.ResponseWriter, r *http.Request) (id snowflake.ID, ok bool) {
	v, err := strconv.ParseUint(r.PathValue("id"), 10, 64)
	if err != nil || v == 0 {
		rest.WriteError(w, &rest.Error{Status: http.StatusNotFound, Message: "404: Not Found"})
		return 0, false
	}
	return snowflake.ID(v), true
}

// WriteUnknownGuild answers Discord's Unknown Guild error (404, code
// 10004): the guild is not loaded on this node (or, asked of an api node,
// on its owner).
func WriteUnknownGuild(w http.ResponseWriter) {
	rest.WriteError(w, &rest.Error{Status: http.StatusNotFound, Code: 10004, Message: "Unknown Guild"})
}
