package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/concord-chat/concord/runtime/adapters/tracing"
	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/live"
	"github.com/concord-chat/concord/runtime/domain/live/filter"
)

const (
	maxNonce    = 64
	nonceWait   = 5 * time.Second
	maxPage     = 100
	defaultPage = 50
)

type postBody struct {
	Text      *string         `json:"text"`
	VideoTSMs *int64          `json:"video_ts_ms"`
	Nonce     json.RawMessage `json:"nonce"`
}

// nonce returns the nonce as a string: a JSON string or integer, as
// Discord accepts; "" when absent or null.
func (b *postBody) nonce() (string, error) {
	raw := strings.TrimSpace(string(b.Nonce))
	if raw == "" || raw == "null" {
		return "", nil
	}
	var s string
	if err := json.Unmarshal(b.Nonce, &s); err != nil {
		var n int64
		if err := json.Unmarshal(b.Nonce, &n); err != nil {
			return "", formErr("nonce", "MODEL_TYPE_CONVERT", "Must be a string or an integer.")
		}
		s = strconv.FormatInt(n, 10)
	}
	if s == "" || len(s) > maxNonce {
		return "", formErr("nonce", "BASE_TYPE_BAD_LENGTH", "Must be between 1 and 64 in length.")
	}
	return s, nil
}

func (a *API) postComment(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	accepted := a.now()
	who, err := a.mustCaller(r)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	me := who.id
	s, err := a.stream(ctx, r)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	var body postBody
	if err := decode(w, r, &body, false); err != nil {
		a.fail(w, r, err)
		return
	}
	nonce, err := body.nonce()
	if err != nil {
		a.fail(w, r, err)
		return
	}
	text := ""
	if body.Text != nil {
		text = strings.TrimSpace(*body.Text)
	}
	if text == "" {
		a.fail(w, r, apiErr(http.StatusBadRequest, CodeEmptyComment, "Cannot send an empty comment."))
		return
	}
	if utf8.RuneCountInString(text) > live.MaxCommentRunes {
		a.fail(w, r, formErr("text", "BASE_TYPE_MAX_LENGTH", "Must be 200 or fewer in length."))
		return
	}
	var vts int64
	if body.VideoTSMs != nil {
		vts = *body.VideoTSMs
	}
	if vts < 0 {
		a.fail(w, r, formErr("video_ts_ms", "NUMBER_TYPE_MIN", "Must be 0 or more."))
		return
	}
	if s.State == live.StateEnded {
		a.fail(w, r, errEnded)
		return
	}
	// A retried nonce returns the first attempt's comment, before the
	// filter: the retry must not hit the rate limit the first one set.
	var nonceKey string
	if nonce != "" {
		nonceKey = "live:nonce:" + s.ID.String() + ":" + me.String() + ":" + nonce
		prev, claimed, err := a.d.Nonces.Claim(ctx, nonceKey, a.cfg.NonceTTL)
		if err != nil {
			a.fail(w, r, err)
			return
		}
		if !claimed {
			a.replayNonce(w, r, nonceKey, prev)
			return
		}
	}
	c, err := a.acceptComment(ctx, &s, who, text, vts, accepted)
	if err != nil {
		if nonceKey != "" {
			if rerr := a.d.Nonces.Release(context.WithoutCancel(ctx), nonceKey); rerr != nil {
				a.log.Warn("nonce release failed", "err", rerr)
			}
		}
		a.fail(w, r, err)
		return
	}
	view := c.View()
	if nonceKey != "" {
		b, _ := json.Marshal(view)
		if err := a.d.Nonces.Set(context.WithoutCancel(ctx), nonceKey, b, a.cfg.NonceTTL); err != nil {
			a.log.Warn("nonce not remembered", "err", err)
		}
	}
	a.m.accepted.Inc()
	writeJSON(w, http.StatusCreated, view)
}

// replayNonce answers a retried nonce with the stored comment, waiting a
// little for a first attempt still in flight.
func (a *API) replayNonce(w http.ResponseWriter, r *http.Request, key string, prev []byte) {
	deadline := time.Now().Add(nonceWait)
	for prev == nil && time.Now().Before(deadline) {
		select {
		case <-r.Context().Done():
			return
		case <-time.After(50 * time.Millisecond):
		}
		v, claimed, err := a.d.Nonces.Claim(r.Context(), key, a.cfg.NonceTTL)
		if err != nil {
			a.fail(w, r, err)
			return
		}
		if claimed {
			// The first attempt failed and released the key: this retry
			// holds it now, but the simplest correct answer is to let the
			// client retry again.
			a.d.Nonces.Release(r.Context(), key)
			break
		}
		prev = v
	}
	if prev == nil {
		a.fail(w, r, apiErr(http.StatusConflict, CodeNonceInFlight, "A comment with this nonce is still being posted; retry."))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	w.Write(prev)
}

// acceptComment runs the sync filter and appends the comment; the offset
// the log acknowledges is its seq.
func (a *API) acceptComment(ctx context.Context, s *live.Stream, who caller, text string, vts int64, accepted time.Time) (live.Comment, error) {
	u, err := a.author(ctx, who)
	if err != nil {
		return live.Comment{}, err
	}
	start := time.Now()
	d, err := a.filter.Check(ctx, s, u, text)
	a.m.filter.Observe(time.Since(start).Seconds())
	if err != nil {
		// The counters are down: fail open, as REST rate limits do, rather
		// than stop every comment.
		a.log.Warn("live filter counters unavailable; accepting", "err", err)
		d = filter.Decision{}
	}
	if d.Reject != "" {
		a.m.rejected.WithLabelValues(d.Reject).Inc()
		return live.Comment{}, rejection(d)
	}
	id, err := a.d.IDs.Next()
	if err != nil {
		return live.Comment{}, fmt.Errorf("comment id: %w", err)
	}
	c := live.Comment{
		ID: id, StreamID: s.ID, Author: live.Author{ID: u.ID, Username: u.Username}, Text: text,
		VideoTSMs: vts, CreatedAt: accepted.UTC().Truncate(time.Millisecond), Shadow: d.Shadow,
	}
	if d.Shadow {
		a.m.shadowed.WithLabelValues(d.ShadowReason).Inc()
	}
	feat := &live.Features{Moderator: s.IsModerator(u.ID), Bot: u.Bot}
	if !u.CreatedAt.IsZero() {
		feat.AccountAgeS = max(int64(accepted.Sub(u.CreatedAt)/time.Second), 0)
	}
	actx, span := tracing.Start(ctx, "live.append")
	offs, err := a.appendRecords(actx, s, live.LogRecord{Kind: live.KindComment, StreamID: s.ID, Comment: &c,
		AcceptedAt: accepted.UnixNano(), Features: feat, Trace: tracing.Traceparent(actx)})
	tracing.End(span, err)
	if err != nil {
		return live.Comment{}, err
	}
	c.Seq = offs[0]
	a.accepted.add(c)
	return c, nil
}

func rejection(d filter.Decision) *Error {
	switch d.Reject {
	case filter.ReasonBanned:
		return &Error{Status: http.StatusForbidden, Code: CodeBanned, Message: d.Detail, Reason: d.Reject}
	case filter.ReasonAccountAge:
		return &Error{Status: http.StatusForbidden, Code: CodeAccountTooNew, Message: d.Detail, Reason: d.Reject}
	case filter.ReasonLink:
		return &Error{Status: http.StatusBadRequest, Code: CodeBlockedLink, Message: d.Detail, Reason: d.Reject}
	case filter.ReasonRateLimited:
		return &Error{Status: http.StatusTooManyRequests, Code: CodeSlowMode, Message: d.Detail, Reason: d.Reject,
			RetryAfter: d.RetryAfter.Seconds()}
	default:
		return &Error{Status: http.StatusBadRequest, Code: CodeBlockedTerm, Message: d.Detail, Reason: d.Reject}
	}
}

func (a *API) listComments(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	me, err := a.user(r)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	s, err := a.stream(ctx, r)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	q := r.URL.Query()
	pg := live.Page{Limit: defaultPage, Viewer: me, AfterVideoTS: -1}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxPage {
			a.fail(w, r, formErr("limit", "NUMBER_TYPE_MAX", "Must be between 1 and 100."))
			return
		}
		pg.Limit = n
	}
	if v := q.Get("before"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			a.fail(w, r, formErr("before", "NUMBER_TYPE_COERCE", "Must be a seq (a non-negative integer)."))
			return
		}
		// Before 0 means nothing older exists.
		if n == 0 {
			writeJSON(w, http.StatusOK, []live.CommentView{})
			return
		}
		pg.Before = n
	}
	if v := q.Get("after_video_ts"); v != "" {
		if pg.Before > 0 {
			a.fail(w, r, formErr("after_video_ts", "BASE_TYPE_INVALID", "Give before or after_video_ts, not both."))
			return
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < -1 {
			a.fail(w, r, formErr("after_video_ts", "NUMBER_TYPE_COERCE", "Must be a video timestamp in milliseconds."))
			return
		}
		pg.Replay, pg.AfterVideoTS = true, n
	}
	cs, err := a.d.Store.List(ctx, s.ID, pg)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	out := make([]live.CommentView, 0, len(cs))
	for i := range cs {
		out = append(out, cs[i].View())
	}
	writeJSON(w, http.StatusOK, out)
}

// retract appends one retraction per comment to the stream's partition
// and soft-deletes what the store already holds (the archiver does it
// again when it reaches the retraction).
func (a *API) retract(ctx context.Context, s *live.Stream, cs []live.Comment, reason string) error {
	if len(cs) == 0 {
		return nil
	}
	now := a.now().UnixNano()
	recs := make([]live.LogRecord, len(cs))
	for i, c := range cs {
		recs[i] = live.LogRecord{Kind: live.KindRetract, StreamID: s.ID, AcceptedAt: now, Retract: &live.Retraction{
			CommentID: c.ID, Seq: c.Seq, Reason: reason, AuthorID: c.Author.ID, Shadow: c.Shadow, VideoTSMs: c.VideoTSMs}}
	}
	if _, err := a.appendRecords(ctx, s, recs...); err != nil {
		return err
	}
	for _, c := range cs {
		a.accepted.retracted(c.ID, reason)
		if err := a.d.Store.Retract(ctx, s.ID, c.ID, reason); err != nil && !errors.Is(err, live.ErrNotFound) {
			a.log.Warn("soft delete deferred to the archiver", "comment", c.ID, "err", err)
		}
	}
	a.m.retracted.Add(float64(len(cs)))
	return nil
}

func (a *API) deleteComment(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	me, s, ok := a.userStream(w, r)
	if !ok {
		return
	}
	var body struct {
		Reason *string `json:"reason"`
	}
	if err := decode(w, r, &body, true); err != nil {
		a.fail(w, r, err)
		return
	}
	cid, err := snowflake.Parse(r.PathValue("comment"))
	if err != nil {
		a.fail(w, r, errUnknownComment)
		return
	}
	mod := s.IsModerator(me)
	given := ""
	if body.Reason != nil && strings.TrimSpace(*body.Reason) != "" {
		given = truncate(strings.TrimSpace(*body.Reason), 200)
	}
	c, err := a.findComment(ctx, &s, cid)
	if errors.Is(err, errPendingComment) {
		// Only in the log so far: the takedown follows it there and
		// applies if me wrote it or moderates the stream.
		if err := a.requestTakedown(ctx, &s, cid, given, me, mod); err != nil {
			a.fail(w, r, err)
			return
		}
		w.WriteHeader(http.StatusNoContent)
		return
	}
	if err != nil {
		a.fail(w, r, err)
		return
	}
	if c.Author.ID != me && !mod {
		a.fail(w, r, errForbidden)
		return
	}
	if c.Retracted {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	reason := "deleted by author"
	if c.Author.ID != me {
		reason = "removed by moderator"
	}
	if given != "" {
		reason = given
	}
	if err := a.retract(ctx, &s, []live.Comment{c}, reason); err != nil {
		a.fail(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func truncate(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n])
}

func (a *API) reportComment(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	me, s, ok := a.userStream(w, r)
	if !ok {
		return
	}
	var body struct {
		Reason *string `json:"reason"`
	}
	if err := decode(w, r, &body, false); err != nil {
		a.fail(w, r, err)
		return
	}
	if body.Reason == nil || utf8.RuneCountInString(*body.Reason) > 200 {
		a.fail(w, r, formErr("reason", "BASE_TYPE_BAD_LENGTH", "Must be between 0 and 200 in length."))
		return
	}
	cid, err := snowflake.Parse(r.PathValue("comment"))
	if err != nil {
		a.fail(w, r, errUnknownComment)
		return
	}
	c, err := a.findComment(ctx, &s, cid)
	pending := errors.Is(err, errPendingComment)
	if err != nil && !pending {
		a.fail(w, r, err)
		return
	}
	// One report per reporter and comment; the threshold counts reporters.
	first, err := a.d.Counters.Incr(ctx, "live:reported:"+cid.String()+":"+me.String(), 1, 24*time.Hour)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	if first == 1 && !c.Retracted {
		n, err := a.d.Counters.Incr(ctx, "live:reports:"+cid.String(), 1, 24*time.Hour)
		if err != nil {
			a.fail(w, r, err)
			return
		}
		if n == int64(a.cfg.ReportThreshold) {
			take := func() error { return a.retract(ctx, &s, []live.Comment{c}, "reported") }
			if pending {
				// Reported before it was readable here: the takedown
				// follows it in the log, whoever wrote it.
				take = func() error { return a.requestTakedown(ctx, &s, cid, "reported", 0, true) }
			}
			if err := take(); err != nil {
				a.fail(w, r, err)
				return
			}
		}
	}
	w.WriteHeader(http.StatusNoContent)
}
