package api

// moderationRoutes registers reactions, pins, bans and the audit log.
//
// DELETE /channels/{c}/messages/pins/{m} and DELETE
// /channels/{c}/messages/{m}/reactions overlap as patterns, so both go
// through removeMessageSub; GET /channels/{c}/messages/pins is more
// specific than GET /channels/{c}/messages/{m} and wins over it.
func (h *handler) moderationRoutes(authed func(string, authedFunc)) {
	authed("GET /channels/{channel}/messages/{message}/reactions/{emoji}", h.listReactionUsers)
	authed("PUT /channels/{channel}/messages/{message}/reactions/{emoji}/{user}", h.addReaction)
	authed("DELETE /channels/{channel}/messages/{message}/reactions/{emoji}/{user}", h.removeReaction)
	authed("DELETE /channels/{channel}/messages/{message}/reactions/{emoji}", h.removeEmojiReactions)
	authed("DELETE /channels/{channel}/messages/{a}/{b}", h.removeMessageSub)

	authed("GET /channels/{channel}/messages/pins", h.listPins)
	authed("PUT /channels/{channel}/messages/pins/{message}", h.pinMessage)
	authed("GET /channels/{channel}/pins", h.listPinsLegacy)
	authed("PUT /channels/{channel}/pins/{message}", h.pinMessage)
	authed("DELETE /channels/{channel}/pins/{message}", h.unpinMessage)

	authed("GET /guilds/{guild}/bans", h.listBans)
	authed("GET /guilds/{guild}/bans/{user}", h.getBan)
	authed("PUT /guilds/{guild}/bans/{user}", h.putBan)
	authed("DELETE /guilds/{guild}/bans/{user}", h.deleteBan)
	authed("POST /guilds/{guild}/bulk-ban", h.bulkBan)
	authed("GET /guilds/{guild}/audit-logs", h.getAuditLog)
	h.gapRoutes(authed)
}
