package api

import (
	"context"
	"errors"
	"net/http"
	"slices"

	"github.com/concord-chat/concord/runtime/adapters/store"
	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/guild"
	"github.com/concord-chat/concord/runtime/domain/permissions"
	"github.com/concord-chat/concord/runtime/domain/wire"
)

// maxReactionEmojis is Discord's limit of distinct emojis on a message.
const maxReactionEmojis = 20

var errMaxReactions = &apiError{Status: http.StatusBadRequest, Code: 30010, Message: "Maximum number of reactions reached (20)"}

// reactionTarget is a reaction route's channel, message and emoji after
// the visibility decision.
type reactionTarget struct {
	view    guild.ReadView
	message store.Message
	key     string
	emoji   wire.Emoji
}

// reactionPath decides visibility for the caller, then loads the message:
// a hidden channel is 50001 before anything about the message is said.
// Reacting and reading reactions need READ_MESSAGE_HISTORY, as on Discord.
func (h *reactionHandler) reactionPath(r *http.Request, user snowflake.ID, withEmoji bool) (reactionTarget, error) {
	var t reactionTarget
	channelID, messageID, err := messagePath(r)
	if err != nil {
		return t, err
	}
	if withEmoji {
		if t.key, t.emoji, err = reactionEmoji(r.PathValue("emoji")); err != nil {
			return t, err
		}
	}
	ctx := r.Context()
	if t.view, err = h.guilds.Visibility(ctx, user, channelID); err != nil {
		return t, err
	}
	if !t.view.Access.CanReadHistory() {
		return t, guild.ErrMissingPermissions
	}
	if t.message, err = h.store.GetMessage(ctx, channelID, messageID); err != nil {
		return t, messageErr(err)
	}
	return t, nil
}

// reactionUser reads {user}: "@me" or an id.
func reactionUser(r *http.Request, user snowflake.ID) (snowflake.ID, error) {
	if r.PathValue("user") == "@me" {
		return user, nil
	}
	return pathID(r, "user", guild.ErrUnknownUser)
}

// addReaction is PUT /channels/{c}/messages/{m}/reactions/{emoji}/@me.
// A new emoji on the message needs ADD_REACTIONS; joining an existing one
// does not (as on Discord).
func (h *reactionHandler) addReaction(w http.ResponseWriter, r *http.Request, user snowflake.ID) error {
	if r.PathValue("user") != "@me" {
		return &apiError{Status: http.StatusMethodNotAllowed, Code: 0, Message: "405: Method Not Allowed"}
	}
	t, err := h.reactionPath(r, user, true)
	if err != nil {
		return err
	}
	if err := frozenThread(t.view.Channel); err != nil {
		return err
	}
	ctx := r.Context()
	ch, msg := t.message.ChannelID, t.message.ID
	counts, err := h.store.CountReactions(ctx, ch, []snowflake.ID{msg}, user)
	if err != nil {
		return errors.Join(guild.ErrUnavailable, err)
	}
	existing := slices.ContainsFunc(counts[msg], func(c store.ReactionCount) bool { return c.Emoji == t.key })
	if !existing {
		if !t.view.Permissions.Has(permissions.AddReactions) {
			return guild.ErrMissingPermissions
		}
		if len(counts[msg]) >= maxReactionEmojis {
			return errMaxReactions
		}
	}
	added, err := h.store.AddReaction(ctx, ch, msg, t.key, user)
	if err != nil {
		return errors.Join(guild.ErrUnavailable, err)
	}
	if added {
		ev := wire.ReactionAdd{UserID: user, ChannelID: ch, MessageID: msg, GuildID: t.view.Channel.GuildID,
			Emoji: t.emoji, MessageAuthorID: t.message.AuthorID, BurstColors: []string{}}
		if ev.GuildID != 0 {
			if m, err := h.guilds.Members.Get(ctx, user, ev.GuildID, user); err == nil {
				if wm, err := h.memberJSON(ctx, m); err == nil {
					ev.Member = &wm
				}
			}
		}
		h.publishChannel(ctx, t.view.Channel, "MESSAGE_REACTION_ADD", ev)
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// removeReaction is DELETE …/reactions/{emoji}/{user}: one's own
// (@me) or, with MANAGE_MESSAGES, someone else's.
func (h *reactionHandler) removeReaction(w http.ResponseWriter, r *http.Request, user snowflake.ID) error {
	target, err := reactionUser(r, user)
	if err != nil {
		return err
	}
	t, err := h.reactionPath(r, user, true)
	if err != nil {
		return err
	}
	if target != user && !t.view.Permissions.Has(permissions.ManageMessages) {
		return guild.ErrMissingPermissions
	}
	if err := frozenThread(t.view.Channel); err != nil {
		return err
	}
	ctx := r.Context()
	removed, err := h.store.RemoveReaction(ctx, t.message.ChannelID, t.message.ID, t.key, target)
	if err != nil {
		return errors.Join(guild.ErrUnavailable, err)
	}
	if removed {
		h.publishChannel(ctx, t.view.Channel, "MESSAGE_REACTION_REMOVE", wire.ReactionRemove{
			UserID: target, ChannelID: t.message.ChannelID, MessageID: t.message.ID, GuildID: t.view.Channel.GuildID, Emoji: t.emoji,
		})
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// removeEmojiReactions is DELETE …/reactions/{emoji} (MANAGE_MESSAGES).
func (h *reactionHandler) removeEmojiReactions(w http.ResponseWriter, r *http.Request, user snowflake.ID) error {
	t, err := h.reactionPath(r, user, true)
	if err != nil {
		return err
	}
	if !t.view.Permissions.Has(permissions.ManageMessages) {
		return guild.ErrMissingPermissions
	}
	if err := frozenThread(t.view.Channel); err != nil {
		return err
	}
	ctx := r.Context()
	if err := h.store.RemoveReactions(ctx, t.message.ChannelID, t.message.ID, t.key); err != nil {
		return errors.Join(guild.ErrUnavailable, err)
	}
	h.publishChannel(ctx, t.view.Channel, "MESSAGE_REACTION_REMOVE_EMOJI", wire.ReactionRemoveEmoji{
		ChannelID: t.message.ChannelID, MessageID: t.message.ID, GuildID: t.view.Channel.GuildID, Emoji: t.emoji,
	})
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// removeAllReactions is DELETE …/messages/{m}/reactions (MANAGE_MESSAGES).
func (h *reactionHandler) removeAllReactions(w http.ResponseWriter, r *http.Request, user snowflake.ID) error {
	t, err := h.reactionPath(r, user, false)
	if err != nil {
		return err
	}
	if !t.view.Permissions.Has(permissions.ManageMessages) {
		return guild.ErrMissingPermissions
	}
	if err := frozenThread(t.view.Channel); err != nil {
		return err
	}
	ctx := r.Context()
	if err := h.store.RemoveReactions(ctx, t.message.ChannelID, t.message.ID, ""); err != nil {
		return errors.Join(guild.ErrUnavailable, err)
	}
	h.publishChannel(ctx, t.view.Channel, "MESSAGE_REACTION_REMOVE_ALL", wire.ReactionRemoveAll{
		ChannelID: t.message.ChannelID, MessageID: t.message.ID, GuildID: t.view.Channel.GuildID,
	})
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// listReactionUsers is GET …/reactions/{emoji}?after&limit (1..100,
// default 25): the users who reacted, by id.
func (h *reactionHandler) listReactionUsers(w http.ResponseWriter, r *http.Request, user snowflake.ID) error {
	limit, err := queryInt(r, "limit", 25, 1, 100)
	if err != nil {
		return err
	}
	after, err := queryID(r, "after")
	if err != nil {
		return err
	}
	if typ, err := queryInt(r, "type", 0, 0, 1); err != nil {
		return err
	} else if typ == 1 {
		// Super reactions do not exist on Concord: nobody burst-reacted.
		writeJSON(w, http.StatusOK, []wire.User{})
		return nil
	}
	t, err := h.reactionPath(r, user, true)
	if err != nil {
		return err
	}
	ctx := r.Context()
	ids, err := h.store.ReactionUsers(ctx, t.message.ChannelID, t.message.ID, t.key, after, limit)
	if err != nil {
		return errors.Join(guild.ErrUnavailable, err)
	}
	out := make([]wire.User, 0, len(ids))
	for _, id := range ids {
		out = append(out, h.userOrGhost(ctx, id))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// removeMessageSub is DELETE /channels/{c}/messages/{a}/{b}: unpin
// (messages/pins/{m}) or remove all reactions (messages/{m}/reactions).
// The two routes overlap as patterns, so one handler tells them apart.
func (h *reactionHandler) removeMessageSub(w http.ResponseWriter, r *http.Request, user snowflake.ID) error {
	a, b := r.PathValue("a"), r.PathValue("b")
	switch {
	case a == "pins":
		r.SetPathValue("message", b)
		return h.pin.unpinMessage(w, r, user)
	case b == "reactions":
		r.SetPathValue("message", a)
		return h.removeAllReactions(w, r, user)
	}
	return &apiError{Status: http.StatusNotFound, Code: 0, Message: "404: Not Found"}
}

// publishChannel hands a channel content event to the guild tier, which
// delivers it to the sessions that see the channel at fan-out.
func (h *reactionHandler) publishChannel(ctx context.Context, c store.Channel, typ string, payload any) {
	bg, cancel := background(ctx)
	defer cancel()
	intent, private := guild.IntentGuildMessageReactions, guild.IntentDirectMessageReactions
	if typ == "CHANNEL_PINS_UPDATE" {
		intent, private = guild.IntentGuilds, guild.IntentDirectMessages
	}
	if err := h.guilds.Messages.PublishEvent(bg, c.GuildID, c.ID, typ, payload, intent, private); err != nil {
		h.log.Warn("channel event not published", "type", typ, "channel_id", c.ID, "err", err)
	}
}

// withReactions sets each message's reactions as the viewer sees them
// (me: whether the viewer reacted). The messages are of one channel.
func (v *views) withReactions(ctx context.Context, viewer, channelID snowflake.ID, msgs []wire.Message) error {
	if len(msgs) == 0 {
		return nil
	}
	ids := make([]snowflake.ID, len(msgs))
	for i, m := range msgs {
		ids[i] = m.ID
	}
	counts, err := v.store.CountReactions(ctx, channelID, ids, viewer)
	if err != nil {
		return errors.Join(guild.ErrUnavailable, err)
	}
	for i := range msgs {
		cs := counts[msgs[i].ID]
		if len(cs) == 0 {
			continue
		}
		out := make([]wire.Reaction, 0, len(cs))
		for _, c := range cs {
			out = append(out, wire.Reaction{Count: c.Count, CountDetails: wire.ReactionCountDetails{Normal: c.Count},
				Me: c.Me, Emoji: emojiFromKey(c.Emoji), BurstColors: []string{}})
		}
		msgs[i].Reactions = out
	}
	return nil
}
