// Package api serves Concord's Discord-shaped REST API under /api/v9 and
// /api/v10 (identical), so that unmodified bot libraries work against it.
//
// Handlers check the request, call the guild tier (which authorises in the
// guild actor) and the store, and translate errors once, in errors.go, to
// Discord's error JSON. The send path is: authorise in the actor, mint an
// id, write the message durably, hand MESSAGE_CREATE to the actor for
// fan-out (an enqueue, so a sender's next message can never reach the
// actor before this one), then answer 200; a store failure is a 503,
// never a 200.
//
// The handler is cut along Discord's resources: one type per seam
// (accounts, guilds, roles, members, channels, invites, messages,
// reactions, pins, threads, voice, webhooks, webhook execution,
// moderation), each holding only the collaborators its routes use
// (handlers.go), all mounted by one routes table (routes.go).
package api

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"time"

	"github.com/concord-chat/concord/runtime/adapters/store"
	"github.com/concord-chat/concord/runtime/adapters/store/objects"
	"github.com/concord-chat/concord/runtime/base/route"
	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/auth"
	"github.com/concord-chat/concord/runtime/domain/guild"
	"github.com/concord-chat/concord/runtime/edge/api/uploads"
)

// Config configures the REST API. Zero fields take the stated defaults.
type Config struct {
	// GatewayURL is returned by GET /gateway(/bot); default
	// "ws://<Host header>/gateway".
	GatewayURL string
	// MaxBodyBytes caps request bodies (default 1 MiB).
	MaxBodyBytes int64
	// NonceWindow is how long enforce_nonce remembers a nonce (default 5 min).
	NonceWindow time.Duration
	// Now returns the current time (default time.Now).
	Now func() time.Time
	// MaxFileBytes caps each uploaded file (default 25 MiB, Discord's).
	MaxFileBytes int64
	// AttachmentURLTTL is how long a signed attachment URL stays valid
	// (default 24 hours).
	AttachmentURLTTL time.Duration
	// MediaURL is the origin attachment URLs point at
	// (scheme://host[:port]); default: the origin of the request.
	MediaURL string
	// Logger receives the API's log lines; Deps.Logger, when set, wins.
	// Default: discard.
	Logger *slog.Logger
}

// Deps are the API's collaborators; all but Logger are required.
type Deps struct {
	Store  store.Store
	Guilds *guild.Service
	Auth   *auth.Issuer
	// IDs mints invite, webhook and attachment ids; *snowflake.Generator
	// implements it (message ids are minted by Guilds).
	IDs    guild.IDSource
	Logger *slog.Logger
	// Events, when set, receives the message events the API publishes
	// outside a message write (EventPublisher); message writes log theirs
	// through Guilds.
	Events EventPublisher
	// ReadStates, when set, serves message acks.
	ReadStates ReadStates
	// Users, when set, carries MESSAGE_ACK to the acking user's sessions.
	Users UserDispatcher
	// Objects, when set, stores attachments; without it uploads are
	// refused.
	Objects objects.Store
	// AttachmentKey signs attachment URLs; every process serving the same
	// objects must share it. Empty: a random key of this process.
	AttachmentKey []byte
	// PriorSend, when set, is asked about a send with enforce_nonce whose
	// nonce this process has not seen: the nonce cache lives in process
	// memory, so a send retried on another process (the first died while
	// serving it) finds the message the first attempt wrote through it,
	// and is answered with that message instead of writing it again.
	PriorSend PriorSend
	// MemberRemoved, when set, runs after a member left or was removed
	// from a guild, before the 204 (the bot platform drops a removed
	// bot's installation and managed role).
	MemberRemoved func(ctx context.Context, guildID, userID snowflake.ID)
}

// PriorSend finds the message author already sent to channelID with
// nonce (the stored form: the string, or '#' and an integer's digits)
// in an earlier attempt of the send r; false when there is none.
type PriorSend func(r *http.Request, channelID, author snowflake.ID, nonce string) (snowflake.ID, bool)

// New returns the REST API handler. It panics when a required dependency
// is missing, which is a wiring bug.
func New(cfg Config, deps Deps) http.Handler {
	if deps.Store == nil || deps.Guilds == nil || deps.Auth == nil || deps.IDs == nil {
		panic("api: New needs Store, Guilds, Auth and IDs")
	}
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = 1 << 20
	}
	if cfg.NonceWindow <= 0 {
		cfg.NonceWindow = 5 * time.Minute
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.MaxFileBytes <= 0 {
		cfg.MaxFileBytes = 25 << 20
	}
	if cfg.AttachmentURLTTL <= 0 {
		cfg.AttachmentURLTTL = 24 * time.Hour
	}

	if deps.Logger == nil {
		deps.Logger = cfg.Logger
	}
	if deps.Logger == nil {
		deps.Logger = slog.New(slog.DiscardHandler)
	}
	h := newHandler(cfg, deps)
	mux := http.NewServeMux()
	for _, v := range []string{"/api/v9", "/api/v10"} {
		h.routes(mux, v)
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusNotFound, map[string]any{"message": "404: Not Found", "code": 0})
	})
	return route.DefaultVersion(uploads.WithBase(h.auditTrail(mux)))
}

// authenticate reads "Bot <token>", "Bearer <token>" or a bare token.
func (h *handler) authenticate(r *http.Request) (snowflake.ID, error) {
	token := auth.StripPrefix(r.Header.Get("Authorization"))
	if token == "" {
		return 0, errUnauthorized
	}
	id, err := h.auth.Verify(r.Context(), token)
	if errors.Is(err, auth.ErrInvalidToken) {
		return 0, errUnauthorized
	}
	if err != nil {
		return 0, errors.Join(guild.ErrUnavailable, err)
	}
	return id, nil
}

func (h *handler) fail(w http.ResponseWriter, r *http.Request, err error) {
	ae := toAPIError(err)
	if ae.Status >= 500 {
		h.log.Error("request failed", "method", r.Method, "path", r.URL.Path, "err", err)
	}
	writeError(w, err)
}

// pathID parses a snowflake path value; a bad one is the given not-found
// error, as Discord answers for ids that cannot exist.
func pathID(r *http.Request, name string, notFound error) (snowflake.ID, error) {
	id, err := snowflake.Parse(r.PathValue(name))
	if err != nil {
		return 0, notFound
	}
	return id, nil
}

// background returns a context for work after the response is written.
func background(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
}
