package api

import (
	"encoding/json"
	"net/http"
	"time"
	"unicode/utf8"

	"github.com/concord-chat/concord/runtime/domain/live"
)

func jsonMarshal(v any) ([]byte, error) { return json.Marshal(v) }

// batchTTL is how long a reaction batch id is remembered: clients retry
// within seconds.
const batchTTL = 10 * time.Minute

func (a *API) postReactions(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	me, s, ok := a.userStream(w, r)
	if !ok {
		return
	}
	var body struct {
		BatchID *string          `json:"batch_id"`
		Counts  map[string]int64 `json:"counts"`
		// P is the report probability the client applied (the state
		// event's report_p), absent: 1.
		P *float64 `json:"p"`
	}
	if err := decode(w, r, &body, false); err != nil {
		a.fail(w, r, err)
		return
	}
	if body.BatchID == nil || *body.BatchID == "" || utf8.RuneCountInString(*body.BatchID) > 64 {
		a.fail(w, r, formErr("batch_id", "BASE_TYPE_BAD_LENGTH", "Must be between 1 and 64 in length."))
		return
	}
	p := 1.0
	if body.P != nil {
		if p = *body.P; !(p >= live.MinReportP && p <= 1) {
			a.fail(w, r, formErr("p", "NUMBER_TYPE_MAX", "p must be between 1/1024 and 1."))
			return
		}
	}
	if len(body.Counts) == 0 {
		a.fail(w, r, formErr("counts", "BASE_TYPE_REQUIRED", "At least one reaction is required."))
		return
	}
	var total int64
	for k, n := range body.Counts {
		if !live.ReactionKinds[k] {
			a.fail(w, r, formErr("counts", "REACTION_UNKNOWN", "Unknown reaction "+k+"."))
			return
		}
		if n < 0 || n > live.MaxReactionCount {
			a.fail(w, r, formErr("counts", "NUMBER_TYPE_MAX", "Counts must be between 0 and 1000."))
			return
		}
		total += n
	}
	if s.State == live.StateEnded {
		a.fail(w, r, errEnded)
		return
	}
	if total == 0 {
		w.WriteHeader(http.StatusAccepted)
		return
	}
	// A retried batch id is counted once.
	n, err := a.d.Counters.Incr(ctx, "live:rx:"+s.ID.String()+":"+me.String()+":"+*body.BatchID, 1, batchTTL)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	if n == 1 {
		rec, err := live.ReactionRecord{StreamID: s.ID, Second: a.now().Unix(), Counts: body.Counts, P: p}.Record(a.cfg.Topics.Reactions, me)
		if err != nil {
			a.fail(w, r, err)
			return
		}
		if err := a.d.Log.Append(ctx, rec); err != nil {
			a.fail(w, r, err)
			return
		}
	}
	w.WriteHeader(http.StatusAccepted)
}
