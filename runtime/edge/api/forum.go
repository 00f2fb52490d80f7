package api

import (
	"encoding/json"
	"errors"
	"net/http"
	"unicode/utf8"

	"github.com/concord-chat/concord/runtime/adapters/store"
	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/guild"
	"github.com/concord-chat/concord/runtime/domain/permissions"
	"github.com/concord-chat/concord/runtime/domain/wire"
	"github.com/concord-chat/concord/runtime/edge/api/uploads"
)

// Forum channels (type 15). A post is POST /channels/{forum}/threads with
// a message object: a public thread whose starter message, stored in the
// thread, has the thread's id (as on Discord), tagged with applied_tags
// from the forum's available_tags. The answer is the thread with that
// message; THREAD_CREATE then MESSAGE_CREATE reach who sees the forum.

// forumTagRequest is one entry of available_tags: an existing tag keeps
// its id, a new one (no id) gets one.
type forumTagRequest struct {
	ID        reqID  `json:"id"`
	Name      string `json:"name"`
	Moderated bool   `json:"moderated"`
	EmojiID   reqID  `json:"emoji_id"`
	EmojiName string `json:"emoji_name"`
}

// validateForumTags checks available_tags as Discord's form validation
// does, naming the field.
func validateForumTags(tags []forumTagRequest) error {
	if len(tags) > 20 {
		return formError("available_tags", "BASE_TYPE_MAX_LENGTH", "Must be 20 or fewer in length.")
	}
	for i, t := range tags {
		if n := utf8.RuneCountInString(t.Name); n < 1 || n > 20 {
			return formError("available_tags."+itoa(i)+".name", "BASE_TYPE_BAD_LENGTH", "Must be between 1 and 20 in length.")
		}
		if t.EmojiID != 0 && t.EmojiName != "" {
			return formError("available_tags."+itoa(i)+".emoji_name", "FORUM_TAG_EMOJI_CONFLICT", "A tag has either a custom emoji or a unicode emoji.")
		}
	}
	return nil
}

// forumTags mints ids for the new tags of an available_tags request.
func (h *threadHandler) forumTags(req []forumTagRequest) ([]store.ForumTag, error) {
	out := make([]store.ForumTag, 0, len(req))
	for _, t := range req {
		id := snowflake.ID(t.ID)
		if id == 0 {
			var err error
			if id, err = h.ids.Next(); err != nil {
				return nil, errors.Join(guild.ErrUnavailable, err)
			}
		}
		out = append(out, store.ForumTag{ID: id, Name: t.Name, Moderated: t.Moderated, EmojiID: snowflake.ID(t.EmojiID), EmojiName: t.EmojiName})
	}
	return out, nil
}

// forumPost is a forum thread's answer: the thread (with the creator's
// thread member) and, beside its fields, its starter message.
type forumPost struct {
	Thread  wire.Channel
	Message wire.Message
}

// MarshalJSON writes the thread object with a "message" field added.
func (p forumPost) MarshalJSON() ([]byte, error) {
	thread, err := json.Marshal(p.Thread)
	if err != nil {
		return nil, err
	}
	msg, err := json.Marshal(p.Message)
	if err != nil {
		return nil, err
	}
	out := append(thread[:len(thread)-1:len(thread)-1], `,"message":`...)
	out = append(out, msg...)
	return append(out, '}'), nil
}

// appliedTags reads applied_tags (snowflakes as strings or numbers).
func appliedTags(raw []reqID) []snowflake.ID {
	out := make([]snowflake.ID, 0, len(raw))
	for _, id := range raw {
		out = append(out, snowflake.ID(id))
	}
	return out
}

// startForumPost creates a post in a forum: spec is the thread, msg the
// starter message's body and files its uploads (a multipart request's
// files[n], named by msg's attachments array like a message's).
func (h *threadHandler) startForumPost(w http.ResponseWriter, r *http.Request, user snowflake.ID, spec guild.ThreadSpec, msg json.RawMessage, files uploads.Files) error {
	if len(msg) == 0 || string(msg) == "null" {
		return formError("message", "BASE_TYPE_REQUIRED", "This field is required")
	}
	req, err := decodeCreateMessage(msg, files...)
	if err != nil {
		return err
	}
	ctx := r.Context()
	if len(files) > 0 {
		// Files need ATTACH_FILES in the forum, asked before the post
		// exists (a post is never left without its starter message).
		if _, err := h.guilds.Authorize(ctx, user, spec.ParentID, permissions.AttachFiles); err != nil {
			return err
		}
	}
	id, err := h.ids.Next()
	if err != nil {
		return errors.Join(guild.ErrUnavailable, err)
	}
	// The files are stored first, under the post's id (its channel): a
	// bad attachments array is refused before anything is created, and
	// the objects are deleted again if the post is refused.
	atts, err := h.saveAttachments(ctx, id, req.Attachments, req.files)
	if err != nil {
		return err
	}
	spec.MessageID, spec.Forum = id, true
	th, member, err := h.threads.Create(ctx, user, spec)
	if err != nil {
		h.forgetAttachments(ctx, atts)
		return err
	}
	// Mentions resolve as in an edit: the post was just authorised, and
	// only who sees the thread is pinged. The starter message has the
	// post's id.
	mentions := parseMentions(req.Content, req.AllowedMentions)
	rd := h.reader(user)
	written, err := h.messages.Create(ctx, guild.MessageWrite{
		Check: guild.CheckEdit, UserID: user,
		Message: store.Message{
			ID: th.ID, ChannelID: th.ID, AuthorID: user, Content: req.Content, Type: wire.MessageDefault,
			Flags: sendFlags(req.Flags), Embeds: wire.JoinRaw(req.Embeds), Components: wire.JoinRaw(req.Components), Attachments: atts,
		},
		Mentions: &guild.Mentions{Everyone: mentions.Everyone, Users: mentions.Users, Roles: mentions.Roles},
		Render:   rd.written(nil, true),
	})
	if err != nil {
		return err
	}
	out := written.Wire
	h.recordAudit(r, th.GuildID, user, auditEntry{Action: auditThreadCreate, Target: th.ID, Changes: []auditChange{
		change("name", nil, th.Name), change("type", nil, th.Type), change("applied_tags", nil, th.Thread.AppliedTags)}})
	writeJSON(w, http.StatusCreated, forumPost{Thread: threadJSON(th, member), Message: out})
	return nil
}
