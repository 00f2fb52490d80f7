package api

import (
	"net/http"
	"strings"

	"github.com/concord-chat/concord/runtime/adapters/tracing"
	"github.com/concord-chat/concord/runtime/base/route"
	"github.com/concord-chat/concord/runtime/base/snowflake"
)

// Routes returns the REST API's routes, as New mounts them under each API
// version: the table is filled by the same registration code, so it
// cannot drift from the handler. Routes acting on a guild name it
// {guild}, on a channel {channel}, on a webhook {webhook}, on an invite
// {code} (see package route).
func Routes() []route.Route {
	var rec route.Recorder
	// The seams are nil here: registering takes their method values
	// without calling them.
	(&handler{}).routes(&rec, "")
	return rec.Routes
}

// registrar is where routes mount: *http.ServeMux, or a route.Recorder
// building the exported table (Routes) from this same code.
type registrar interface {
	HandleFunc(pattern string, handler func(http.ResponseWriter, *http.Request))
}

// authedFunc is a handler for an authenticated user.
type authedFunc func(w http.ResponseWriter, r *http.Request, user snowflake.ID) error

// routes is the REST API's one routes table: every route, under prefix
// p, to the seam that serves it (handlers.go).
func (h *handler) routes(mux registrar, p string) {
	open := func(pattern string, fn func(http.ResponseWriter, *http.Request) error) {
		method, path, _ := strings.Cut(pattern, " ")
		mux.HandleFunc(method+" "+p+path, func(w http.ResponseWriter, r *http.Request) {
			if err := fn(w, r); err != nil {
				h.fail(w, r, err)
			}
		})
	}
	authed := func(pattern string, fn authedFunc) {
		open(pattern, func(w http.ResponseWriter, r *http.Request) error {
			ctx, span := tracing.Start(r.Context(), "auth")
			user, err := h.authenticate(r.WithContext(ctx))
			tracing.End(span, err)
			if err != nil {
				return err
			}
			return fn(w, r, user)
		})
	}

	// Accounts and the current user.
	open("POST /auth/register", h.account.register)
	open("POST /auth/login", h.account.login)
	open("GET /gateway", h.account.gateway)
	authed("GET /users/@me", h.account.me)
	authed("GET /oauth2/applications/@me", h.account.application)
	authed("GET /users/@me/guilds", h.account.myGuilds)
	authed("DELETE /users/@me/guilds/{guild}", h.account.leaveGuild)
	authed("POST /users/@me/channels", h.account.createDM)
	authed("GET /users/{user}", h.account.getUser)

	// Guilds, their channels, roles and members.
	authed("POST /guilds", h.guild.createGuild)
	authed("GET /guilds/{guild}", h.guild.getGuild)
	authed("PATCH /guilds/{guild}", h.guild.modifyGuild)
	authed("DELETE /guilds/{guild}", h.guild.deleteGuild)
	authed("GET /guilds/{guild}/channels", h.channel.listChannels)
	authed("POST /guilds/{guild}/channels", h.channel.createChannel)
	authed("GET /guilds/{guild}/roles", h.role.listRoles)
	authed("POST /guilds/{guild}/roles", h.role.createRole)
	authed("PATCH /guilds/{guild}/roles", h.role.modifyRolePositions)
	authed("PATCH /guilds/{guild}/roles/{role}", h.role.modifyRole)
	authed("DELETE /guilds/{guild}/roles/{role}", h.role.deleteRole)
	authed("GET /guilds/{guild}/members", h.member.listMembers)
	authed("GET /guilds/{guild}/members/{user}", h.member.getMember)
	authed("PATCH /guilds/{guild}/members/{user}", h.member.modifyMember)
	authed("DELETE /guilds/{guild}/members/{user}", h.member.removeMember)
	authed("PUT /guilds/{guild}/members/{user}/roles/{role}", h.member.addMemberRole)
	authed("DELETE /guilds/{guild}/members/{user}/roles/{role}", h.member.removeMemberRole)

	// Channels.
	authed("GET /channels/{channel}", h.channel.getChannel)
	authed("PATCH /channels/{channel}", h.channel.modifyChannel)
	authed("DELETE /channels/{channel}", h.channel.deleteChannel)
	authed("PUT /channels/{channel}/permissions/{target}", h.channel.putOverwrite)
	authed("DELETE /channels/{channel}/permissions/{target}", h.channel.deleteOverwrite)
	authed("POST /channels/{channel}/invites", h.invite.createInvite)
	authed("POST /channels/{channel}/typing", h.channel.typing)

	// Messages.
	authed("GET /channels/{channel}/messages", h.message.listMessages)
	authed("POST /channels/{channel}/messages", h.message.createMessage)
	authed("POST /channels/{channel}/messages/bulk-delete", h.message.bulkDelete)
	authed("GET /channels/{channel}/messages/{message}", h.message.getMessage)
	authed("PATCH /channels/{channel}/messages/{message}", h.message.editMessage)
	authed("DELETE /channels/{channel}/messages/{message}", h.message.deleteMessage)
	authed("POST /channels/{channel}/messages/{message}/ack", h.message.ackMessage)

	// Reactions and pins. DELETE /channels/{c}/messages/pins/{m} and
	// DELETE /channels/{c}/messages/{m}/reactions overlap as patterns, so
	// both go through removeMessageSub; GET /channels/{c}/messages/pins
	// is more specific than GET /channels/{c}/messages/{m} and wins over
	// it.
	authed("GET /channels/{channel}/messages/{message}/reactions/{emoji}", h.reaction.listReactionUsers)
	authed("PUT /channels/{channel}/messages/{message}/reactions/{emoji}/{user}", h.reaction.addReaction)
	authed("DELETE /channels/{channel}/messages/{message}/reactions/{emoji}/{user}", h.reaction.removeReaction)
	authed("DELETE /channels/{channel}/messages/{message}/reactions/{emoji}", h.reaction.removeEmojiReactions)
	authed("DELETE /channels/{channel}/messages/{a}/{b}", h.reaction.removeMessageSub)

	authed("GET /channels/{channel}/messages/pins", h.pin.listPins)
	authed("PUT /channels/{channel}/messages/pins/{message}", h.pin.pinMessage)
	authed("GET /channels/{channel}/pins", h.pin.listPinsLegacy)
	authed("PUT /channels/{channel}/pins/{message}", h.pin.pinMessage)
	authed("DELETE /channels/{channel}/pins/{message}", h.pin.unpinMessage)

	// Moderation: bans and the audit log.
	authed("GET /guilds/{guild}/bans", h.moderation.listBans)
	authed("GET /guilds/{guild}/bans/{user}", h.moderation.getBan)
	authed("PUT /guilds/{guild}/bans/{user}", h.moderation.putBan)
	authed("DELETE /guilds/{guild}/bans/{user}", h.moderation.deleteBan)
	authed("POST /guilds/{guild}/bulk-ban", h.moderation.bulkBan)
	authed("GET /guilds/{guild}/audit-logs", h.moderation.getAuditLog)

	// The member search, the guild preview and the answers for emoji,
	// stickers and OAuth2 joins (gaps.go).
	authed("GET /guilds/{guild}/members/search", h.member.searchMembers)
	authed("PUT /guilds/{guild}/members/{user}", func(w http.ResponseWriter, r *http.Request, _ snowflake.ID) error { return errNoOAuth2Join })
	authed("GET /guilds/{guild}/preview", h.gap.guildPreview)

	authed("GET /guilds/{guild}/emojis", h.gap.emptyGuildList)
	authed("GET /guilds/{guild}/emojis/{emoji}", h.gap.unknownGuildItem(errUnknownEmojiNotFound))
	authed("POST /guilds/{guild}/emojis", h.gap.refuseCreate("image", "Custom emoji"))
	authed("PATCH /guilds/{guild}/emojis/{emoji}", h.gap.unknownGuildItem(errUnknownEmojiNotFound))
	authed("DELETE /guilds/{guild}/emojis/{emoji}", h.gap.unknownGuildItem(errUnknownEmojiNotFound))
	authed("GET /guilds/{guild}/stickers", h.gap.emptyGuildList)
	authed("GET /guilds/{guild}/stickers/{sticker}", h.gap.unknownGuildItem(errUnknownSticker))
	authed("POST /guilds/{guild}/stickers", h.gap.refuseCreate("file", "Stickers"))
	authed("PATCH /guilds/{guild}/stickers/{sticker}", h.gap.unknownGuildItem(errUnknownSticker))
	authed("DELETE /guilds/{guild}/stickers/{sticker}", h.gap.unknownGuildItem(errUnknownSticker))
	authed("GET /stickers/{sticker}", func(w http.ResponseWriter, r *http.Request, _ snowflake.ID) error { return errUnknownSticker })

	// Webhooks: managed with the caller's token; executed, and their
	// messages handled, with the webhook's own token in the path.
	authed("POST /channels/{channel}/webhooks", h.webhook.createWebhook)
	authed("GET /channels/{channel}/webhooks", h.webhook.channelWebhooks)
	authed("GET /guilds/{guild}/webhooks", h.webhook.guildWebhooks)
	authed("GET /webhooks/{webhook}", h.webhook.getWebhook)
	authed("PATCH /webhooks/{webhook}", h.webhook.modifyWebhook)
	authed("DELETE /webhooks/{webhook}", h.webhook.deleteWebhook)

	open("GET /webhooks/{webhook}/{token}", h.webhook.getWebhookByToken)
	open("PATCH /webhooks/{webhook}/{token}", h.webhook.modifyWebhookByToken)
	open("DELETE /webhooks/{webhook}/{token}", h.webhook.deleteWebhookByToken)
	open("POST /webhooks/{webhook}/{token}", h.webhookExec.executeWebhook)
	open("GET /webhooks/{webhook}/{token}/messages/{message}", h.webhookExec.getWebhookMessage)
	open("PATCH /webhooks/{webhook}/{token}/messages/{message}", h.webhookExec.editWebhookMessage)
	open("DELETE /webhooks/{webhook}/{token}/messages/{message}", h.webhookExec.deleteWebhookMessage)

	// Threads and their members.
	authed("POST /channels/{channel}/messages/{message}/threads", h.thread.startThreadFromMessage)
	authed("POST /channels/{channel}/threads", h.thread.startThread)
	authed("GET /channels/{channel}/threads/archived/public", h.thread.archivedPublic)
	authed("GET /channels/{channel}/threads/archived/private", h.thread.archivedPrivate)
	authed("GET /channels/{channel}/users/@me/threads/archived/private", h.thread.archivedJoined)
	authed("GET /guilds/{guild}/threads/active", h.thread.activeThreads)
	authed("GET /channels/{channel}/thread-members", h.thread.listThreadMembers)
	authed("GET /channels/{channel}/thread-members/{user}", h.thread.getThreadMember)
	authed("PUT /channels/{channel}/thread-members/{user}", h.thread.addThreadMember)
	authed("DELETE /channels/{channel}/thread-members/{user}", h.thread.removeThreadMember)

	// Attachment downloads (signed URLs, no Authorization).
	open("GET /attachments/{channel}/{attachment}/{name}", h.message.getAttachment)

	// Voice.
	authed("GET /voice/regions", h.voice.voiceRegions)
	authed("GET /guilds/{guild}/regions", h.voice.guildVoiceRegions)

	// Invites.
	open("GET /invites/{code}", h.invite.getInvite)
	authed("POST /invites/{code}", h.invite.acceptInvite)
	authed("DELETE /invites/{code}", h.invite.deleteInvite)
}
