package api

import (
	"cmp"
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/concord-chat/concord/runtime/domain/live"
)

// StreamViewers is one stream in the admin listing of streams by viewers.
type StreamViewers struct {
	StreamID string `json:"streamID"`
	// Viewers is the sum of the gateways' fresh reports (as GET
	// /v1/streams/{id} counts them).
	Viewers int64 `json:"viewers"`
	// Gateways is the number of gateways with viewers of the stream.
	Gateways int `json:"gateways"`
	// Sampled is set while the router holds the stream in sampled mode.
	Sampled bool `json:"sampled"`
}

// AdminStreams serves GET /admin/live/streams: the streams with viewers,
// the most watched first, from the viewer reports the gateways keep on
// the board (one board listing, whatever the number of streams); ?limit=N
// keeps the first N. kubectl concord live streams reads it.
func (a *API) AdminStreams() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		limit, _ := strconv.Atoi(r.URL.Query().Get("limit"))
		ctx := r.Context()
		reports, err := a.d.Board.List(ctx, "live/viewers/")
		if err != nil {
			http.Error(w, "viewer reports unavailable: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		sampled, err := a.d.Board.List(ctx, live.SampledPrefix)
		if err != nil {
			http.Error(w, "sampled streams unavailable: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		out := streamsByViewers(reports, sampled, a.now())
		if limit > 0 && len(out) > limit {
			out = out[:limit]
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(out)
	})
}

// streamsByViewers sums board reports (keys live/viewers/<stream>/<gateway>)
// per stream, leaving out stale and empty ones, most viewers first (then
// by id, so the order is stable).
func streamsByViewers(reports, sampled map[string][]byte, now time.Time) []StreamViewers {
	by := map[string]*StreamViewers{}
	for k, v := range reports {
		stream, _, ok := strings.Cut(strings.TrimPrefix(k, "live/viewers/"), "/")
		if !ok {
			continue
		}
		var rep live.ViewerReport
		if json.Unmarshal(v, &rep) != nil || rep.Count <= 0 || now.Sub(time.UnixMilli(rep.At)) >= live.ViewerTTL {
			continue
		}
		s := by[stream]
		if s == nil {
			s = &StreamViewers{StreamID: stream}
			by[stream] = s
		}
		s.Viewers += rep.Count
		s.Gateways++
	}
	out := make([]StreamViewers, 0, len(by))
	for id, s := range by {
		_, s.Sampled = sampled[live.SampledPrefix+id]
		out = append(out, *s)
	}
	slices.SortFunc(out, func(x, y StreamViewers) int {
		if c := cmp.Compare(y.Viewers, x.Viewers); c != 0 {
			return c
		}
		return cmp.Compare(x.StreamID, y.StreamID)
	})
	return out
}
