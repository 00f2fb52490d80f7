// Package api is the live-comments Comment API: the stateless HTTP role
// that creates and moderates streams, accepts comments through the sync
// filter and appends them to the stream's pinned partition of the event
// log (the produce offset is the comment's seq), takes reaction batches,
// and serves scroll-back and replay from the comments store.
package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/concord-chat/concord/runtime/adapters/eventlog"
	"github.com/concord-chat/concord/runtime/adapters/registry"
	"github.com/concord-chat/concord/runtime/adapters/store"
	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/auth"
	"github.com/concord-chat/concord/runtime/domain/live"
	"github.com/concord-chat/concord/runtime/domain/live/filter"
)

// Config configures the API. Zero fields take the stated defaults.
type Config struct {
	// Topics names the event log topics (default live.TopicsFor("concord.live.")).
	Topics live.Topics
	// NonceTTL is how long a comment nonce is remembered (default 10 min).
	NonceTTL time.Duration
	// ReportThreshold is how many distinct reporters take a comment down
	// (default 3).
	ReportThreshold int
	// CallerTTL is how long a verified token and an author's account are
	// reused (callers.go): a token reset takes effect within it (default
	// 5 s; negative: nothing is cached).
	CallerTTL time.Duration
	// CallerCacheSize bounds the cached tokens, and the cached accounts
	// (default 50,000 each).
	CallerCacheSize int
	// Logger (default slog.Default()).
	Logger *slog.Logger
	// Registerer receives the API's metrics (nil: none).
	Registerer prometheus.Registerer
}

// Deps are the API's collaborators.
type Deps struct {
	Verifier live.Verifier
	Users    live.Users
	IDs      live.IDs
	Log      live.Appender
	Store    live.Store
	Recent   live.Recent
	Nonces   live.Nonces
	Counters live.Counters
	Board    live.Board
	// Live serves GET /v1/streams/{id}/live when this process also runs a
	// gateway (concord dev); nil answers 404 there, for the edge to route
	// those requests to gateways instead.
	Live http.Handler
}

// API is the Comment API role.
type API struct {
	cfg    Config
	d      Deps
	dir    *filter.Directory
	filter *filter.Filter
	log    *slog.Logger
	mux    *http.ServeMux
	m      metrics
	now    func() time.Time
	calls  *callerCache
	// accepted are the comments this process accepted lately, for
	// takedowns that come before the archiver (accepted.go).
	accepted *acceptedIndex

	partsMu sync.Mutex
	parts   int
}

// DefaultTopics are the topics when Config.Topics is empty.
var DefaultTopics = live.TopicsFor("concord.live.")

// New checks deps and returns the API; Run must run for rules and bans
// to reach its filter.
func New(cfg Config, d Deps) (*API, error) {
	if d.Verifier == nil || d.Users == nil || d.IDs == nil || d.Log == nil || d.Store == nil ||
		d.Recent == nil || d.Nonces == nil || d.Counters == nil || d.Board == nil {
		return nil, errors.New("live api: every dependency but Live is required")
	}
	if cfg.Topics.Comments == "" {
		cfg.Topics = DefaultTopics
	}
	if cfg.NonceTTL <= 0 {
		cfg.NonceTTL = 10 * time.Minute
	}
	if cfg.ReportThreshold <= 0 {
		cfg.ReportThreshold = 3
	}
	if cfg.CallerTTL == 0 {
		cfg.CallerTTL = 5 * time.Second
	}
	if cfg.CallerCacheSize <= 0 {
		cfg.CallerCacheSize = 50_000
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	a := &API{cfg: cfg, d: d, log: cfg.Logger.With("component", "live-api"), now: time.Now}
	a.accepted = newAcceptedIndex(acceptedSize)
	a.calls = newCallerCache(cfg.CallerTTL, cfg.CallerCacheSize, func() time.Time { return a.now() })
	a.dir = filter.NewDirectory(a.log)
	a.filter = filter.New(a.dir, d.Counters)
	a.m = newMetrics(cfg.Registerer)
	a.routes()
	return a, nil
}

// Run follows the board's rules, bans and stream records until ctx ends.
func (a *API) Run(ctx context.Context) error { return a.dir.Run(ctx, a.d.Board) }

// Synced is closed once the first board snapshot is applied.
func (a *API) Synced() <-chan struct{} { return a.dir.Synced() }

// ServeHTTP implements http.Handler for every path under /v1 of the
// contract.
func (a *API) ServeHTTP(w http.ResponseWriter, r *http.Request) { a.mux.ServeHTTP(w, r) }

func (a *API) routes() {
	m := http.NewServeMux()
	m.HandleFunc("POST /v1/streams", a.createStream)
	m.HandleFunc("GET /v1/streams/{id}", a.getStream)
	m.HandleFunc("PATCH /v1/streams/{id}", a.patchStream)
	m.HandleFunc("POST /v1/streams/{id}/end", a.endStream)
	m.HandleFunc("PUT /v1/streams/{id}/moderators/{user}", a.putModerator)
	m.HandleFunc("DELETE /v1/streams/{id}/moderators/{user}", a.deleteModerator)
	m.HandleFunc("POST /v1/streams/{id}/comments", a.postComment)
	m.HandleFunc("GET /v1/streams/{id}/comments", a.listComments)
	m.HandleFunc("DELETE /v1/streams/{id}/comments/{comment}", a.deleteComment)
	m.HandleFunc("POST /v1/streams/{id}/comments/{comment}/reports", a.reportComment)
	m.HandleFunc("PUT /v1/streams/{id}/bans/{user}", a.putStreamBan)
	m.HandleFunc("DELETE /v1/streams/{id}/bans/{user}", a.deleteStreamBan)
	m.HandleFunc("PUT /v1/users/@me/bans/{user}", a.putCreatorBan)
	m.HandleFunc("DELETE /v1/users/@me/bans/{user}", a.deleteCreatorBan)
	m.HandleFunc("POST /v1/streams/{id}/reactions", a.postReactions)
	m.HandleFunc("GET /v1/streams/{id}/live", func(w http.ResponseWriter, r *http.Request) {
		if a.d.Live == nil {
			writeError(w, errNotFound)
			return
		}
		a.d.Live.ServeHTTP(w, r)
	})
	m.HandleFunc("/v1/", func(w http.ResponseWriter, r *http.Request) { writeError(w, errNotFound) })
	a.mux = m
}

// user authenticates the request: 0 without a token, errUnauthorized for
// a bad one.
func (a *API) user(r *http.Request) (snowflake.ID, error) {
	c, err := a.caller(r)
	return c.id, err
}

// caller is an authenticated request's token.
type caller struct {
	token string
	tokenEntry
}

// caller verifies the request's token, or finds it verified in the last
// CallerTTL (callers.go); a zero id without a token.
func (a *API) caller(r *http.Request) (caller, error) {
	token := auth.StripPrefix(r.Header.Get("Authorization"))
	if token == "" {
		return caller{}, nil
	}
	if e, ok := a.calls.token(token); ok {
		a.m.callerCache.WithLabelValues("token", "hit").Inc()
		return caller{token, e}, nil
	}
	a.m.callerCache.WithLabelValues("token", "miss").Inc()
	id, err := a.d.Verifier.Verify(r.Context(), token)
	if errors.Is(err, auth.ErrInvalidToken) {
		return caller{}, errUnauthorized
	}
	if err != nil {
		return caller{}, errors.Join(errUnavailable, err)
	}
	e := tokenEntry{id: id}
	e.gen, e.hasGen = auth.TokenGeneration(token)
	a.calls.putToken(token, e)
	return caller{token, e}, nil
}

// author returns c's account: cached for CallerTTL, else read. A token
// whose generation is not the account's was revoked (errUnauthorized);
// a newer one than a cached account's means the account changed since
// it was read, so it is read again before deciding.
func (a *API) author(ctx context.Context, c caller) (store.User, error) {
	u, cached := a.calls.account(c.id)
	if cached && c.hasGen && c.gen > u.TokenGeneration {
		cached = false
	}
	if cached {
		a.m.callerCache.WithLabelValues("account", "hit").Inc()
	} else {
		a.m.callerCache.WithLabelValues("account", "miss").Inc()
		var err error
		if u, err = a.getUser(ctx, c.id); err != nil {
			if errors.Is(err, errUnknownUser) {
				a.calls.dropToken(c.token)
				return store.User{}, errUnauthorized
			}
			return store.User{}, err
		}
		a.calls.putAccount(u)
	}
	if c.hasGen && c.gen != u.TokenGeneration {
		a.calls.dropToken(c.token)
		return store.User{}, errUnauthorized
	}
	return u, nil
}

// mustUser authenticates and requires a token.
func (a *API) mustUser(r *http.Request) (snowflake.ID, error) {
	c, err := a.mustCaller(r)
	return c.id, err
}

// mustCaller is caller, requiring a token.
func (a *API) mustCaller(r *http.Request) (caller, error) {
	c, err := a.caller(r)
	if err == nil && c.id == 0 {
		err = errUnauthorized
	}
	return c, err
}

func (a *API) fail(w http.ResponseWriter, r *http.Request, err error) {
	var e *Error
	if !errors.As(err, &e) {
		if errors.Is(err, live.ErrNotFound) {
			err = errUnknownStream
		} else {
			err = errors.Join(errUnavailable, err)
		}
	}
	if errors.As(err, &e) && e.Status >= 500 {
		a.log.Error("live request failed", "method", r.Method, "path", r.URL.Path, "err", err)
	}
	writeError(w, err)
}

// stream returns the stream of the {id} path value: the pushed record
// when the board has it, else the store's.
// userStream is the prologue of the handlers that act as a signed-in
// user on a stream: the caller (401 without a token) and the stream named
// by the path (404 when unknown). On failure it has answered and ok is
// false.
func (a *API) userStream(w http.ResponseWriter, r *http.Request) (me snowflake.ID, s live.Stream, ok bool) {
	me, err := a.mustUser(r)
	if err == nil {
		s, err = a.stream(r.Context(), r)
	}
	if err != nil {
		a.fail(w, r, err)
		return 0, live.Stream{}, false
	}
	return me, s, true
}

func (a *API) stream(ctx context.Context, r *http.Request) (live.Stream, error) {
	id, err := snowflake.Parse(r.PathValue("id"))
	if err != nil {
		return live.Stream{}, errUnknownStream
	}
	if s, ok := a.dir.Stream(id); ok {
		return s, nil
	}
	return a.storedStream(ctx, id)
}

// storedStream reads a stream's record from the store, the authority a
// change starts from (the directory's copy may lag another instance's
// write, and a change made on it would undo that write).
func (a *API) storedStream(ctx context.Context, id snowflake.ID) (live.Stream, error) {
	s, err := a.d.Store.GetStream(ctx, id)
	if errors.Is(err, live.ErrNotFound) {
		return live.Stream{}, errUnknownStream
	}
	if err != nil {
		return live.Stream{}, fmt.Errorf("get stream %d: %w", id, err)
	}
	return s, nil
}

// saveStream writes s to the store, then pushes it to every API instance.
func (a *API) saveStream(ctx context.Context, s live.Stream) error {
	s.Version++
	if err := a.d.Store.PutStream(ctx, s); err != nil {
		return fmt.Errorf("put stream %d: %w", s.ID, err)
	}
	b, err := json.Marshal(s)
	if err != nil {
		return fmt.Errorf("encode stream %d: %w", s.ID, err)
	}
	if err := a.d.Board.Put(ctx, filter.StreamKey(s.ID), b, registry.Persistent); err != nil {
		return fmt.Errorf("push stream %d: %w", s.ID, err)
	}
	// This instance reads its own write at once; the others get it from
	// the watch.
	a.dir.Remember(s)
	return nil
}

// decode reads a JSON body into v: invalid JSON is 50109, a wrong type
// is 50035 naming the field. An empty body is allowed when optional.
func decode(w http.ResponseWriter, r *http.Request, v any, optional bool) error {
	body, err := readBody(w, r)
	if err != nil {
		return err
	}
	if optional && len(strings.TrimSpace(string(body))) == 0 {
		return nil
	}
	if err := json.Unmarshal(body, v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			field := te.Field
			if field == "" {
				field = "_root"
			}
			return formErr(field, "MODEL_TYPE_CONVERT", fmt.Sprintf("Expected %s.", te.Type))
		}
		return errInvalidJSON
	}
	return nil
}

func readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return nil, formErr("_root", "BASE_TYPE_MAX_LENGTH", fmt.Sprintf("Request body must be %d or fewer bytes.", maxBody))
	}
	if err != nil {
		return nil, formErr("_root", "BODY_READ_FAILED", "The request body could not be read.")
	}
	return body, nil
}

// appendRecords appends records of one stream to its pinned partition
// and returns their offsets.
func (a *API) appendRecords(ctx context.Context, s *live.Stream, recs ...live.LogRecord) ([]int64, error) {
	out := make([]eventlog.Record, len(recs))
	for i, lr := range recs {
		rec, err := lr.Record(a.cfg.Topics.Comments)
		if err != nil {
			return nil, err
		}
		out[i] = rec
	}
	offs, err := a.d.Log.AppendTo(ctx, a.cfg.Topics.Comments, s.Partition, out...)
	if err != nil {
		return nil, fmt.Errorf("append to %s/%d: %w", a.cfg.Topics.Comments, s.Partition, err)
	}
	return offs, nil
}

// partitions returns the comments topic's partition count, asked once.
func (a *API) partitions(ctx context.Context) (int, error) {
	a.partsMu.Lock()
	defer a.partsMu.Unlock()
	if a.parts > 0 {
		return a.parts, nil
	}
	n, err := a.d.Log.Partitions(ctx, a.cfg.Topics.Comments)
	if err != nil {
		return 0, fmt.Errorf("partitions of %s: %w", a.cfg.Topics.Comments, err)
	}
	a.parts = n
	return n, nil
}

func (a *API) viewers(ctx context.Context, id snowflake.ID) int64 {
	reports, err := a.d.Board.List(ctx, live.ViewersPrefix(id))
	if err != nil {
		a.log.Warn("viewer counts unavailable", "stream", id, "err", err)
		return 0
	}
	return live.SumViewers(reports, a.now())
}

// getUser returns the account of id; a missing one is errUnknownUser.
func (a *API) getUser(ctx context.Context, id snowflake.ID) (store.User, error) {
	u, err := a.d.Users.GetUser(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return store.User{}, errUnknownUser
	}
	if err != nil {
		return store.User{}, fmt.Errorf("get user %d: %w", id, err)
	}
	return u, nil
}
