package api

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/concord-chat/concord/runtime/adapters/eventlog"
	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/live"
)

// Stream setting bounds.
const (
	maxTitleRunes   = 200
	maxSlowMode     = 6 * 60 * 60
	maxBlockedTerms = 200
	maxTermRunes    = 100
	maxStreamURL    = 2048
)

// streamURL checks a stream_url: an absolute http or https URL with a
// host and no credentials, at most 2,048 bytes. "" clears it.
func streamURL(raw string) (string, error) {
	raw = strings.TrimSpace(raw)
	if raw == "" {
		return "", nil
	}
	bad := formErr("stream_url", "URL_TYPE_INVALID_URL", "Not a well formed URL.")
	if len(raw) > maxStreamURL {
		return "", bad
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Hostname() == "" || u.User != nil {
		return "", bad
	}
	return u.String(), nil
}

func (a *API) createStream(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	me, err := a.mustUser(r)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	var body struct {
		Title     *string `json:"title"`
		StreamURL *string `json:"stream_url"`
	}
	if err := decode(w, r, &body, false); err != nil {
		a.fail(w, r, err)
		return
	}
	if body.Title == nil || strings.TrimSpace(*body.Title) == "" {
		a.fail(w, r, formErr("title", "BASE_TYPE_REQUIRED", "This field is required"))
		return
	}
	if utf8.RuneCountInString(*body.Title) > maxTitleRunes {
		a.fail(w, r, formErr("title", "BASE_TYPE_BAD_LENGTH", "Must be between 1 and 200 in length."))
		return
	}
	var su string
	if body.StreamURL != nil {
		if su, err = streamURL(*body.StreamURL); err != nil {
			a.fail(w, r, err)
			return
		}
	}
	id, err := a.d.IDs.Next()
	if err != nil {
		a.fail(w, r, err)
		return
	}
	n, err := a.partitions(ctx)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	s := live.Stream{
		ID: id, CreatorID: me, Title: strings.TrimSpace(*body.Title), State: live.StateLive,
		StartedAt: a.now().UTC().Truncate(time.Millisecond),
		// The partition is chosen once, from the count at creation, and
		// kept with the stream: adding partitions never moves it.
		Partition: eventlog.PartitionFor(live.StreamKey(id), n),
		StreamURL: su,
	}
	if err := a.saveStream(ctx, s); err != nil {
		a.fail(w, r, err)
		return
	}
	if _, err := a.appendRecords(ctx, &s, live.LogRecord{Kind: live.KindState, StreamID: s.ID,
		State: &live.StateChange{State: live.StateLive}, AcceptedAt: a.now().UnixNano()}); err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, s.View(0))
}

func (a *API) getStream(w http.ResponseWriter, r *http.Request) {
	if _, err := a.user(r); err != nil {
		a.fail(w, r, err)
		return
	}
	s, err := a.stream(r.Context(), r)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	v := s.View(a.viewers(r.Context(), s.ID))
	v.Sampled = v.Sampled || a.sampled(r.Context(), s.ID)
	writeJSON(w, http.StatusOK, v)
}

// sampled reports whether the router that owns the stream's partition
// holds it in sampled mode (its lease-bound board key): a router that
// dies takes the key with it, and its successor sets it again once the
// rate says so.
func (a *API) sampled(ctx context.Context, id snowflake.ID) bool {
	v, err := a.d.Board.Get(ctx, live.SampledKey(id))
	if err != nil || len(v) == 0 {
		return false
	}
	var st live.StateChange
	return json.Unmarshal(v, &st) == nil && st.Sampled
}

// creatorStream authenticates the creator of the path's stream.
func (a *API) creatorStream(r *http.Request) (live.Stream, error) {
	me, err := a.mustUser(r)
	if err != nil {
		return live.Stream{}, err
	}
	id, err := snowflake.Parse(r.PathValue("id"))
	if err != nil {
		return live.Stream{}, errUnknownStream
	}
	s, err := a.storedStream(r.Context(), id)
	if err != nil {
		return live.Stream{}, err
	}
	if s.CreatorID != me {
		return live.Stream{}, errForbidden
	}
	return s, nil
}

func (a *API) endStream(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	s, err := a.creatorStream(r)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	if s.State != live.StateEnded {
		now := a.now().UTC().Truncate(time.Millisecond)
		s.State, s.EndedAt = live.StateEnded, &now
		if err := a.saveStream(ctx, s); err != nil {
			a.fail(w, r, err)
			return
		}
		if _, err := a.appendRecords(ctx, &s, live.LogRecord{Kind: live.KindState, StreamID: s.ID,
			State: &live.StateChange{State: live.StateEnded, Sampled: s.Sampled}, AcceptedAt: a.now().UnixNano()}); err != nil {
			a.fail(w, r, err)
			return
		}
	}
	writeJSON(w, http.StatusOK, s.View(a.viewers(ctx, s.ID)))
}

func (a *API) patchStream(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	s, err := a.creatorStream(r)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	var body struct {
		SlowModeSeconds *int      `json:"slow_mode_seconds"`
		BlockedTerms    *[]string `json:"blocked_terms"`
		StreamURL       *string   `json:"stream_url"`
	}
	if err := decode(w, r, &body, false); err != nil {
		a.fail(w, r, err)
		return
	}
	if body.SlowModeSeconds != nil {
		if *body.SlowModeSeconds < 0 || *body.SlowModeSeconds > maxSlowMode {
			a.fail(w, r, formErr("slow_mode_seconds", "NUMBER_TYPE_MAX", "Must be between 0 and 21600."))
			return
		}
		s.SlowModeSeconds = *body.SlowModeSeconds
	}
	if body.BlockedTerms != nil {
		terms := *body.BlockedTerms
		if len(terms) > maxBlockedTerms {
			a.fail(w, r, formErr("blocked_terms", "BASE_TYPE_MAX_LENGTH", "Must be 200 or fewer in length."))
			return
		}
		clean := make([]string, 0, len(terms))
		for _, t := range terms {
			t = strings.TrimSpace(t)
			if t == "" || utf8.RuneCountInString(t) > maxTermRunes {
				a.fail(w, r, formErr("blocked_terms", "BASE_TYPE_BAD_LENGTH", "Each term must be between 1 and 100 in length."))
				return
			}
			clean = append(clean, t)
		}
		s.BlockedTerms = clean
	}
	if body.StreamURL != nil {
		su, err := streamURL(*body.StreamURL)
		if err != nil {
			a.fail(w, r, err)
			return
		}
		s.StreamURL = su
	}
	if err := a.saveStream(ctx, s); err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, s.View(a.viewers(ctx, s.ID)))
}

func (a *API) putModerator(w http.ResponseWriter, r *http.Request)    { a.setModerator(w, r, true) }
func (a *API) deleteModerator(w http.ResponseWriter, r *http.Request) { a.setModerator(w, r, false) }

func (a *API) setModerator(w http.ResponseWriter, r *http.Request, add bool) {
	ctx := r.Context()
	s, err := a.creatorStream(r)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	uid, err := snowflake.Parse(r.PathValue("user"))
	if err != nil {
		a.fail(w, r, errUnknownUser)
		return
	}
	if add {
		if _, err := a.getUser(ctx, uid); err != nil {
			a.fail(w, r, err)
			return
		}
	}
	mods := s.Moderators[:0:0]
	for _, m := range s.Moderators {
		if m != uid {
			mods = append(mods, m)
		}
	}
	if add {
		mods = append(mods, uid)
	}
	s.Moderators = mods
	if err := a.saveStream(ctx, s); err != nil {
		a.fail(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
