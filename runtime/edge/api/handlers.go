package api

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/concord-chat/concord/runtime/adapters/store"
	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/auth"
	"github.com/concord-chat/concord/runtime/domain/guild"
	"github.com/concord-chat/concord/runtime/edge/api/uploads"
)

// The REST API is cut along the seams of Discord's resources: one handler
// type per seam, each holding only the collaborators its routes use, and
// one routes table (routes.go) that mounts them all. A seam that needs
// another's operation holds that seam (a channel's delete deletes its
// webhooks through webhookHandler) rather than reaching into its
// collaborators, so the fields of each type below are the whole of what
// its routes can touch.
//
// What several seams share is in small helper values they embed:
// bodyLimit (request bodies), views (messages rendered for a viewer),
// people (users and members rendered), writes (message writes with their
// attachments), auditor (audit log entries) and removedHook
// (Deps.MemberRemoved). A seam's own field of the same name as one of
// theirs (guilds, store, now) is the same collaborator.

// handler is the REST API's root: it authenticates, translates errors,
// records the audit trail and mounts the seams' routes.
type handler struct {
	auth *auth.Issuer
	log  *slog.Logger
	// bodyLimit bounds the body the audit trail reads for its changes.
	bodyLimit
	// auditor records the audit trail's entries.
	auditor

	account     *accountHandler
	guild       *guildHandler
	role        *roleHandler
	member      *memberHandler
	channel     *channelHandler
	invite      *inviteHandler
	message     *messageHandler
	reaction    *reactionHandler
	pin         *pinHandler
	thread      *threadHandler
	voice       *voiceHandler
	webhook     *webhookHandler
	webhookExec *webhookExecHandler
	moderation  *moderationHandler
	gap         *gapHandler
}

// accountHandler serves accounts, tokens, the gateway URL, the current
// user, DM channels and leaving a guild (accounts.go, dms.go).
type accountHandler struct {
	store  store.Store
	guilds *guild.Service
	auth   *auth.Issuer
	ids    guild.IDSource
	now    func() time.Time
	// configuredGateway is Config.GatewayURL.
	configuredGateway string
	bodyLimit
	removedHook
}

// guildHandler serves a guild itself: create, read, modify, delete
// (guilds.go).
type guildHandler struct {
	store   store.Store
	guilds  *guild.Service
	log     *slog.Logger
	webhook *webhookHandler
	bodyLimit
}

// roleHandler serves a guild's roles (guilds.go).
type roleHandler struct {
	roles *guild.Roles
	bodyLimit
}

// memberHandler serves a guild's members and their roles (members.go,
// the member search of gaps.go).
type memberHandler struct {
	// members reads and changes members and their roles.
	members *guild.Members
	// voice applies the voice part of a member's PATCH.
	voice *guild.Voice
	now   func() time.Time
	bodyLimit
	people
	removedHook
}

// channelHandler serves a guild's channels, their permission overwrites
// and typing (channels.go); a thread's channel routes go to threadHandler.
type channelHandler struct {
	guilds *guild.Service
	// channels creates, changes and deletes channels and overwrites.
	channels *guild.Channels
	thread   *threadHandler
	webhook  *webhookHandler
	voice    *voiceHandler
	bodyLimit
	writes
}

// inviteHandler serves invites (invites.go).
type inviteHandler struct {
	store  store.Store
	guilds *guild.Service
	now    func() time.Time
	bodyLimit
}

// messageHandler serves a channel's messages: send, read, edit, delete,
// bulk delete, ack and the attachments' downloads (messages.go, edits.go,
// history.go, events.go, attachments.go).
type messageHandler struct {
	store  store.Store
	guilds *guild.Service
	log    *slog.Logger
	now    func() time.Time
	nonces *nonceCache
	events EventPublisher
	reads  ReadStates
	users  UserDispatcher
	// uploads serves attachment downloads.
	uploads   *uploads.Store
	priorSend PriorSend
	bodyLimit
	views
	writes
}

// reactionHandler serves reactions (reactions.go).
type reactionHandler struct {
	store  store.Store
	guilds *guild.Service
	log    *slog.Logger
	// pin unpins for DELETE /channels/{c}/messages/pins/{m}, whose
	// pattern is the same as a reaction delete's (removeMessageSub).
	pin *pinHandler
	people
}

// pinHandler serves pins (pins.go).
type pinHandler struct {
	store store.Store
	// messages pins and unpins.
	messages *guild.Messages
	log      *slog.Logger
	views
	auditor
}

// threadHandler serves threads, forum posts and thread members
// (threads.go, forum.go).
type threadHandler struct {
	store  store.Store
	guilds *guild.Service
	// threads creates, changes and lists threads and their members.
	threads *guild.Threads
	ids     guild.IDSource
	log     *slog.Logger
	bodyLimit
	views
	writes
	auditor
}

// voiceHandler serves voice regions and checks a channel's rtc_region
// (voice.go, channelregion.go).
type voiceHandler struct {
	voice *guild.Voice
}

// webhookHandler manages webhooks: with the caller's token, or with the
// webhook's own (webhooks.go).
type webhookHandler struct {
	store store.Store
	// channels decides who manages a channel's webhooks and announces
	// their changes.
	channels *guild.Channels
	ids      guild.IDSource
	log      *slog.Logger
	now      func() time.Time
	bodyLimit
	people
	auditor
}

// webhookExecHandler executes webhooks and serves the messages they sent
// (webhookexec.go).
type webhookExecHandler struct {
	store  store.Store
	guilds *guild.Service
	log    *slog.Logger
	now    func() time.Time
	// limit limits executions per webhook (webhooklimit.go).
	limit webhookLimiter
	views
	writes
}

// moderationHandler serves bans and the audit log (bans.go, audit.go).
type moderationHandler struct {
	store  store.Store
	guilds *guild.Service
	// members bans and unbans.
	members *guild.Members
	log     *slog.Logger
	now     func() time.Time
	bodyLimit
	people
	auditor
}

// gapHandler answers for what Concord does not have (emoji, stickers,
// OAuth2 joins) and serves the guild preview (gaps.go).
type gapHandler struct {
	guilds *guild.Service
}

// bodyLimit is Config.MaxBodyBytes: the largest request body read.
type bodyLimit int64

// readBody reads the request body up to the limit.
func (b bodyLimit) readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	return readBody(w, r, int64(b))
}

// views renders stored messages for a viewer, with their reactions and
// signed attachment URLs (reads.go); people renders their authors.
type views struct {
	store   store.Store
	uploads *uploads.Store
	people
}

// people renders users and members (memberJSON, userOrGhost).
type people struct {
	guilds *guild.Service
	now    func() time.Time
}

// writes performs message writes through the guild service and keeps
// their attachments (attachments.go).
type writes struct {
	// messages is the guild's write path; the handlers that embed
	// writes reach its other operations (delete, typing) through it too.
	messages *guild.Messages
	log      *slog.Logger
	uploads  *uploads.Store
}

// auditor records audit log entries (audit.go).
type auditor struct {
	store  store.Store
	guilds *guild.Service
	ids    guild.IDSource
	log    *slog.Logger
}

// removedHook is Deps.MemberRemoved; nil runs nothing.
type removedHook func(ctx context.Context, guildID, userID snowflake.ID)

// newHandler wires the seams from the defaulted cfg and deps.
func newHandler(cfg Config, deps Deps) *handler {
	up := uploads.New(uploads.Config{Objects: deps.Objects, Key: deps.AttachmentKey, IDs: deps.IDs,
		MaxJSONBytes: cfg.MaxBodyBytes, MaxFileBytes: cfg.MaxFileBytes, URLTTL: cfg.AttachmentURLTTL,
		MediaURL: cfg.MediaURL, Now: cfg.Now})
	body := bodyLimit(cfg.MaxBodyBytes)
	pp := people{guilds: deps.Guilds, now: cfg.Now}
	v := views{store: deps.Store, uploads: up, people: pp}
	wr := writes{messages: deps.Guilds.Messages, log: deps.Logger, uploads: up}
	au := auditor{store: deps.Store, guilds: deps.Guilds, ids: deps.IDs, log: deps.Logger}
	removed := removedHook(deps.MemberRemoved)

	voice := &voiceHandler{voice: deps.Guilds.Voice}
	webhook := &webhookHandler{store: deps.Store, channels: deps.Guilds.Channels, ids: deps.IDs, log: deps.Logger, now: cfg.Now,
		bodyLimit: body, people: pp, auditor: au}
	thread := &threadHandler{store: deps.Store, guilds: deps.Guilds, threads: deps.Guilds.Threads, ids: deps.IDs, log: deps.Logger,
		bodyLimit: body, views: v, writes: wr, auditor: au}
	pin := &pinHandler{store: deps.Store, messages: deps.Guilds.Messages, log: deps.Logger, views: v, auditor: au}
	return &handler{
		auth: deps.Auth, log: deps.Logger, bodyLimit: body, auditor: au,
		account: &accountHandler{store: deps.Store, guilds: deps.Guilds, auth: deps.Auth, ids: deps.IDs, now: cfg.Now,
			configuredGateway: cfg.GatewayURL, bodyLimit: body, removedHook: removed},
		guild:  &guildHandler{store: deps.Store, guilds: deps.Guilds, log: deps.Logger, webhook: webhook, bodyLimit: body},
		role:   &roleHandler{roles: deps.Guilds.Roles, bodyLimit: body},
		member: &memberHandler{members: deps.Guilds.Members, voice: deps.Guilds.Voice, now: cfg.Now, bodyLimit: body, people: pp, removedHook: removed},
		channel: &channelHandler{guilds: deps.Guilds, channels: deps.Guilds.Channels, thread: thread, webhook: webhook, voice: voice,
			bodyLimit: body, writes: wr},
		invite: &inviteHandler{store: deps.Store, guilds: deps.Guilds, now: cfg.Now, bodyLimit: body},
		message: &messageHandler{store: deps.Store, guilds: deps.Guilds, log: deps.Logger, now: cfg.Now,
			nonces: newNonceCache(cfg.NonceWindow, cfg.Now),
			events: deps.Events, reads: deps.ReadStates, users: deps.Users, uploads: up, priorSend: deps.PriorSend,
			bodyLimit: body, views: v, writes: wr},
		reaction: &reactionHandler{store: deps.Store, guilds: deps.Guilds, log: deps.Logger, pin: pin, people: pp},
		pin:      pin,
		thread:   thread,
		voice:    voice,
		webhook:  webhook,
		webhookExec: &webhookExecHandler{store: deps.Store, guilds: deps.Guilds, log: deps.Logger, now: cfg.Now,
			views: v, writes: wr},
		moderation: &moderationHandler{store: deps.Store, guilds: deps.Guilds, members: deps.Guilds.Members, log: deps.Logger, now: cfg.Now, bodyLimit: body, people: pp, auditor: au},
		gap:        &gapHandler{guilds: deps.Guilds},
	}
}
