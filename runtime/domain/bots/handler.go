package bots

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/concord-chat/concord/runtime/adapters/store"
	"github.com/concord-chat/concord/runtime/base/route"
	"github.com/concord-chat/concord/runtime/base/snowflake"
)

// Config configures a Handler. Zero fields take the stated defaults.
type Config struct {
	// Key is the server key (from a Kubernetes Secret in production): it
	// MACs interaction tokens and seals applications' signing keys.
	// Required, at least 32 bytes, and stable across restarts.
	Key []byte
	// AckWindow is how long an interaction waits for its first response
	// (default 3 s).
	AckWindow time.Duration
	// TokenLifetime is how long an interaction token serves followups
	// (default 15 min).
	TokenLifetime time.Duration
	// MaxBodyBytes caps request bodies (default 1 MiB).
	MaxBodyBytes int64
	// MaxEndpointResponseBytes caps what an interactions endpoint may
	// answer; a longer answer is a failed delivery (default 64 KiB).
	MaxEndpointResponseBytes int64
	// AllowPrivateEndpoints admits interactions endpoint URLs on loopback
	// and private addresses (tests and `concord dev` only; default false).
	AllowPrivateEndpoints bool
	// Clock tells time and runs the acknowledgement timers (default wall
	// clock).
	Clock Clock
	// Registerer receives the package's metrics (default: none).
	Registerer prometheus.Registerer
	// Logger receives log lines (default: discard).
	Logger *slog.Logger
}

// Deps are the Handler's collaborators. Resolver defaults to
// net.DefaultResolver; all others are required.
type Deps struct {
	Store      Store
	Users      store.Users
	Tokens     Tokens
	IDs        IDSource
	Guilds     Guilds
	Dispatcher Dispatcher
	Messages   Messages
	// Egress sends deliveries and verification PINGs to interactions
	// endpoints.
	Egress   Doer
	Resolver Resolver
	// Authenticate returns the caller of a request (from its
	// Authorization header) and whether it is a bot. Any error is a 401,
	// except one wrapping ErrUnavailable (an outage), which is a 503.
	Authenticate func(r *http.Request) (userID snowflake.ID, bot bool, err error)
	// TokenReset, when set, is called after a bot's token was reset so
	// that the gateway closes the bot's sessions (a reset closes open
	// sessions through the revocation path, not only later identifies). Optional.
	TokenReset func(ctx context.Context, botUserID snowflake.ID)
	// Revocations, when set, receives every uninstall, token reset and
	// narrowing of a managed role, each applied within a deadline
	// (runtime/domain/entitlement). Optional.
	Revocations Revocations
	// Uploads, when set, stores the files of multipart responses and
	// followups (uploads.go). Optional.
	Uploads Uploads
}

// Handler serves the bot platform's REST routes and runs interaction
// timers. It is safe for concurrent use.
type Handler struct {
	cfg     Config
	deps    Deps
	log     *slog.Logger
	metrics *metrics
	keys    keyring

	// ixMu serialises the responses, expiry and followups of one interaction
	// (striped by id): the store update is atomic, but the message
	// created for it must be recorded before a followup reads it.
	ixMu [256]sync.Mutex

	mu     sync.Mutex
	timers map[snowflake.ID]Timer
	// traces are the traceparents of the pending interactions' invocations
	// (sampled ones only), for their callbacks to continue (tracing.go).
	traces  map[snowflake.ID]string
	closed  bool
	flights sync.WaitGroup
}

// NewHandler validates cfg and deps and returns a Handler.
func NewHandler(cfg Config, deps Deps) (*Handler, error) {
	if len(cfg.Key) < 32 {
		return nil, fmt.Errorf("%w: Key must be at least 32 bytes, got %d", ErrConfig, len(cfg.Key))
	}
	if deps.Store == nil || deps.Users == nil || deps.Tokens == nil || deps.IDs == nil || deps.Guilds == nil ||
		deps.Dispatcher == nil || deps.Messages == nil || deps.Egress == nil || deps.Authenticate == nil {
		return nil, fmt.Errorf("%w: Deps needs Store, Users, Tokens, IDs, Guilds, Dispatcher, Messages, Egress and Authenticate", ErrConfig)
	}
	if cfg.AckWindow <= 0 {
		cfg.AckWindow = 3 * time.Second
	}
	if cfg.TokenLifetime <= 0 {
		cfg.TokenLifetime = 15 * time.Minute
	}
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = 1 << 20
	}
	if cfg.MaxEndpointResponseBytes <= 0 {
		cfg.MaxEndpointResponseBytes = 64 << 10
	}
	if cfg.Clock == nil {
		cfg.Clock = realClock{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if deps.Resolver == nil {
		deps.Resolver = defaultResolver
	}
	m, err := newMetrics(cfg.Registerer)
	if err != nil {
		return nil, err
	}
	return &Handler{
		cfg: cfg, deps: deps, log: cfg.Logger.With("component", "bots"), metrics: m,
		keys: newKeyring(cfg.Key), timers: make(map[snowflake.ID]Timer),
		traces: make(map[snowflake.ID]string),
	}, nil
}

// Register mounts the routes on mux under prefix+"/api/v9" and
// prefix+"/api/v10" (prefix is usually ""). Method-qualified patterns are
// used, so the core REST API may share mux as long as it does not also
// register GET /oauth2/applications/@me.
func (h *Handler) Register(mux *http.ServeMux, prefix string) {
	for _, v := range []string{"/api/v9", "/api/v10"} {
		h.routes(mux, prefix+v)
	}
}

// caller is an authenticated request's user.
type caller struct {
	id  snowflake.ID
	bot bool
}

// registrar is where routes mount: *http.ServeMux, or a route.Recorder
// building the exported table (Routes) from this same code.
type registrar interface {
	HandleFunc(pattern string, handler func(http.ResponseWriter, *http.Request))
}

// Routes returns the bot platform's routes as Register mounts them under
// each API version, filled by the same registration code. Its
// /webhooks/{app}/{token} routes are an interaction's followup webhooks:
// the REST API serves the same paths for channel webhooks, and the token
// tells them apart (InteractionOfToken).
func Routes() []route.Route {
	var rec route.Recorder
	(&Handler{}).routes(&rec, "")
	return rec.Routes
}

func (h *Handler) routes(mux registrar, p string) {
	open := func(pattern string, fn func(http.ResponseWriter, *http.Request) error) {
		method, path, _ := strings.Cut(pattern, " ")
		mux.HandleFunc(method+" "+p+path, func(w http.ResponseWriter, r *http.Request) {
			if err := fn(w, r); err != nil {
				h.fail(w, r, err)
			}
		})
	}
	authed := func(pattern string, fn func(http.ResponseWriter, *http.Request, caller) error) {
		open(pattern, func(w http.ResponseWriter, r *http.Request) error {
			id, bot, err := h.deps.Authenticate(r)
			if errors.Is(err, ErrUnavailable) {
				return err
			}
			if err != nil {
				return fmt.Errorf("%w: %w", ErrUnauthorized, err)
			}
			return fn(w, r, caller{id: id, bot: bot})
		})
	}

	authed("POST /applications", h.createApplication)
	authed("GET /applications", h.listApplications)
	authed("GET /oauth2/applications/@me", h.currentApplication)
	authed("GET /applications/@me", h.currentApplication)
	authed("PATCH /applications/@me", h.patchCurrentApplication)
	authed("GET /applications/{app}", h.getApplication)
	authed("PATCH /applications/{app}", h.patchApplication)
	authed("POST /applications/{app}/bot/reset", h.resetBotToken)

	authed("GET /applications/{app}/commands", h.listCommands)
	authed("POST /applications/{app}/commands", h.createCommand)
	authed("PUT /applications/{app}/commands", h.overwriteCommands)
	authed("GET /applications/{app}/commands/{cmd}", h.getCommand)
	authed("PATCH /applications/{app}/commands/{cmd}", h.editCommand)
	authed("DELETE /applications/{app}/commands/{cmd}", h.deleteCommand)
	authed("GET /applications/{app}/guilds/{guild}/commands", h.listCommands)
	authed("POST /applications/{app}/guilds/{guild}/commands", h.createCommand)
	authed("PUT /applications/{app}/guilds/{guild}/commands", h.overwriteCommands)
	authed("GET /applications/{app}/guilds/{guild}/commands/{cmd}", h.getCommand)
	authed("PATCH /applications/{app}/guilds/{guild}/commands/{cmd}", h.editCommand)
	authed("DELETE /applications/{app}/guilds/{guild}/commands/{cmd}", h.deleteCommand)

	authed("POST /oauth2/authorize", h.authorize)
	authed("DELETE /guilds/{guild}/integrations/{app}", h.removeIntegration)

	authed("POST /interactions", h.invoke)
	open("POST /interactions/{id}/{token}/callback", h.callback)
	open("POST /webhooks/{app}/{token}", h.followup)
	open("GET /webhooks/{app}/{token}/messages/{msg}", h.getWebhookMessage)
	open("PATCH /webhooks/{app}/{token}/messages/{msg}", h.editWebhookMessage)
	open("DELETE /webhooks/{app}/{token}/messages/{msg}", h.deleteWebhookMessage)
}

func (h *Handler) fail(w http.ResponseWriter, r *http.Request, err error) {
	ae := toAPIError(err)
	if ae.Status >= 500 {
		h.log.Error("request failed", "method", r.Method, "path", r.URL.Path, "err", err)
	}
	writeError(w, err)
}

// Close stops the acknowledgement timers and waits for deliveries in
// flight. Interactions still pending get no failure message.
func (h *Handler) Close() {
	h.mu.Lock()
	h.closed = true
	for id, t := range h.timers {
		t.Stop()
		delete(h.timers, id)
	}
	h.mu.Unlock()
	h.flights.Wait()
}

// goAsync runs fn in a goroutine unless the handler is closed.
func (h *Handler) goAsync(fn func()) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return
	}
	h.flights.Add(1)
	go func() {
		defer h.flights.Done()
		fn()
	}()
}

// lockInteraction serialises the responses of one interaction.
func (h *Handler) lockInteraction(id snowflake.ID) func() {
	m := &h.ixMu[uint64(id)%uint64(len(h.ixMu))]
	m.Lock()
	return m.Unlock
}

// pathID parses a snowflake path value; a bad one is notFound.
func pathID(r *http.Request, name string, notFound error) (snowflake.ID, error) {
	id, err := snowflake.Parse(r.PathValue(name))
	if err != nil {
		return 0, notFound
	}
	return id, nil
}

// background returns a context for work after the response is written.
func background(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), d)
}
