package voice

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"time"

	"github.com/concord-chat/concord/runtime/base/adminapi"
)

// Draining a server: it takes no new calls and its calls move to other
// servers before the process goes (an operator scaling a region down).
//
// The server only says it is draining, in its next load report (sent at
// once, not at the end of the period). The guilds, which own the calls,
// see the server stop being healthy and place every call on it on another
// server of the region, sending each session a new VOICE_SERVER_UPDATE:
// the failover path. The clients open a voice connection to the new
// server and close the old one, so the calls here empty; a session whose
// socket drops while the server drains leaves at once instead of waiting
// out the resume window, as resuming here would bring the call back to a
// server that is going. The drain is done when no call is left (or its
// deadline passed): the operator then deletes the pod.

// DefaultDrainTimeout bounds a drain whose request names no deadline.
const DefaultDrainTimeout = 2 * time.Minute

// DrainState is what a server reports about its drain (the operator's
// fleet.DrainState: Sessions counts the calls still here).
type DrainState struct {
	Draining bool `json:"draining"`
	// Sessions is the number of calls still on the server.
	Sessions int64 `json:"sessions"`
	// Participants are the users in those calls.
	Participants int64 `json:"participants"`
	// Done is true once no call is left, or the drain's deadline passed.
	Done bool `json:"done"`
}

// Drain marks the server as taking no new calls and reports its load at
// once so the guilds move its calls away; the drain is done by deadline at
// the latest (zero: DefaultDrainTimeout from now). Later calls keep the
// first deadline.
func (s *Server) Drain(deadline time.Time) {
	s.drainMu.Lock()
	if s.drainDeadline.IsZero() {
		if deadline.IsZero() {
			deadline = s.cfg.Now().Add(DefaultDrainTimeout)
		}
		s.drainDeadline = deadline
	}
	s.drainMu.Unlock()
	if !s.draining.Swap(true) {
		s.cfg.Logger.Info("voice server draining: no new calls, calls move to other servers", "server", s.cfg.ID, "calls", s.callCount())
	}
	select {
	case s.reportNow <- struct{}{}:
	default:
	}
}

// DrainState reports the drain's progress.
func (s *Server) DrainState() DrainState {
	s.mu.Lock()
	calls := int64(len(s.calls))
	var parts int64
	for _, c := range s.calls {
		parts += int64(len(c.snapshot()))
	}
	s.mu.Unlock()
	st := DrainState{Draining: s.draining.Load(), Sessions: calls, Participants: parts}
	if st.Draining {
		s.drainMu.Lock()
		deadline := s.drainDeadline
		s.drainMu.Unlock()
		st.Done = calls == 0 || !s.cfg.Now().Before(deadline)
	}
	return st
}

func (s *Server) callCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.calls)
}

// AdminRoutes adds the server's admin endpoints to mux, which the process
// serves behind its admin token (the handlers check no credential):
//
//	POST /admin/voice/drain  {"deadline": RFC 3339} (or no body) → 200 DrainState
//	GET  /admin/voice/drain                                       → 200 DrainState
//	GET  /admin/voice/load                                        → 200 adminapi.VoiceLoad
//
// and, when drainAlias is set (a process whose only drain is this
// server's), POST and GET /admin/drain as the drain, the path the operator
// drains every pod at.
func (s *Server) AdminRoutes(mux interface {
	Handle(pattern string, h http.Handler)
}, drainAlias bool) {
	drain := http.HandlerFunc(s.serveDrain)
	state := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { writeJSON(w, s.DrainState()) })
	mux.Handle("POST /admin/voice/drain", drain)
	mux.Handle("GET /admin/voice/drain", state)
	if drainAlias {
		mux.Handle("POST /admin/drain", drain)
		mux.Handle("GET /admin/drain", state)
	}
	mux.Handle("GET /admin/voice/load", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		l := s.Load()
		// The quality figures are the last report period's, the ones the
		// guilds place calls by.
		q, _ := s.LastReport()
		writeJSON(w, adminapi.VoiceLoad{ActiveCalls: int64(l.Calls), Participants: int64(l.Participants), Endpoint: l.Endpoint,
			Draining: l.Draining, PacketsForwarded: s.m.forwardRateValue(), LossRatio: q.LossRatio, Jitter: q.Jitter, RTT: q.RTT, At: l.At})
	}))
}

// serveDrain starts the drain (idempotent) and answers its state.
func (s *Server) serveDrain(w http.ResponseWriter, r *http.Request) {
	var req adminapi.DrainRequest
	// An empty body (curl -X POST, the operator's scale-down) drains with
	// the default deadline.
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<16)).Decode(&req); err != nil && !errors.Is(err, io.EOF) {
		http.Error(w, "bad request body: "+err.Error(), http.StatusBadRequest)
		return
	}
	s.Drain(req.Deadline)
	writeJSON(w, s.DrainState())
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_ = json.NewEncoder(w).Encode(v)
}
