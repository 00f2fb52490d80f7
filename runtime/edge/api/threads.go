package api

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/concord-chat/concord/runtime/adapters/store"
	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/guild"
	"github.com/concord-chat/concord/runtime/domain/permissions"
	"github.com/concord-chat/concord/runtime/domain/wire"
)

// Threads. A thread is a channel (types 10, 11, 12) whose permissions are
// its parent's, decided by the guild tier's one decision (see
// runtime/domain/guild/threads.go); its messages are stored and read like any
// channel's, through the same routes and the same reader.

// Audit log action types of threads.
const (
	auditThreadCreate = 110
	auditThreadUpdate = 111
	auditThreadDelete = 112
)

// messageFlagHasThread marks a message that started a thread.
const messageFlagHasThread = 1 << 5

type startThreadRequest struct {
	Name                string `json:"name"`
	AutoArchiveDuration *int   `json:"auto_archive_duration"`
	Type                *int   `json:"type"`
	Invitable           *bool  `json:"invitable"`
	RateLimitPerUser    *int   `json:"rate_limit_per_user"`
	// Message and AppliedTags are a forum post's.
	Message     json.RawMessage `json:"message"`
	AppliedTags []reqID         `json:"applied_tags"`
}

func (req startThreadRequest) spec(parent, message snowflake.ID) (guild.ThreadSpec, error) {
	s := guild.ThreadSpec{ParentID: parent, MessageID: message, Name: req.Name, Invitable: req.Invitable}
	if req.Name == "" {
		return s, formError("name", "BASE_TYPE_REQUIRED", "This field is required")
	}
	if req.AutoArchiveDuration != nil {
		s.AutoArchiveDuration = *req.AutoArchiveDuration
		switch s.AutoArchiveDuration {
		case 60, 1440, 4320, 10080:
		default:
			return s, formError("auto_archive_duration", "BASE_TYPE_CHOICES", "Value must be one of {60, 1440, 4320, 10080}.")
		}
	}
	if req.Type != nil {
		switch *req.Type {
		case store.ChannelAnnouncementThread, store.ChannelPublicThread, store.ChannelPrivateThread:
			s.Type = *req.Type
		default:
			return s, formError("type", "BASE_TYPE_CHOICES", "Value must be one of {10, 11, 12}.")
		}
	}
	if req.RateLimitPerUser != nil {
		s.RateLimitPerUser = *req.RateLimitPerUser
	}
	return s, nil
}

// frozenThread is ErrThreadArchived for an archived thread: Discord
// refuses every change to an archived thread's messages (edits, deletions
// by their authors and by moderators, bulk deletes, reactions added or
// removed, pins) until the thread is unarchived. Only a new message
// unarchives one, on the send path (guild.Actor.threadSend).
func frozenThread(c store.Channel) error {
	if c.Thread != nil && c.Thread.Archived {
		return guild.ErrThreadArchived
	}
	return nil
}

// startThreadFromMessage is POST /channels/{c}/messages/{m}/threads.
func (h *threadHandler) startThreadFromMessage(w http.ResponseWriter, r *http.Request, user snowflake.ID) error {
	channelID, messageID, err := messagePath(r)
	if err != nil {
		return err
	}
	var req startThreadRequest
	if err := h.decodeRequest(w, r, &req); err != nil {
		return err
	}
	spec, err := req.spec(channelID, messageID)
	if err != nil {
		return err
	}
	ctx := r.Context()
	rd := h.reader(user)
	if _, err := rd.access(ctx, channelID); err != nil {
		return err
	}
	m, err := h.store.GetMessage(ctx, channelID, messageID)
	if err != nil {
		return messageErr(err)
	}
	th, member, err := h.threads.Create(ctx, user, spec)
	if err != nil {
		return err
	}
	// The message now names its thread (HAS_THREAD, its thread in the
	// MESSAGE_UPDATE), which its author sees: they created it.
	rd.decided[th.ID] = readDecision{view: guild.ReadView{Channel: th, Access: permissions.Visible}}
	m.Flags |= messageFlagHasThread
	ref, err := rd.prepare(ctx, m, nil)
	if err != nil {
		return err
	}
	if _, err := h.messages.Update(ctx, guild.MessageWrite{Check: guild.CheckNone, UserID: user, Message: m,
		Render: rd.written(ref, false)}); err != nil {
		if errors.Is(err, guild.ErrUnavailable) && !errors.Is(err, errUndecided) {
			return err
		}
		h.log.Warn("starter message update not published", "message_id", m.ID, "err", err)
	}
	// The thread opens with a THREAD_STARTER_MESSAGE pointing at the
	// message it was started from.
	h.postSystemMessage(ctx, rd, store.Message{ChannelID: th.ID, GuildID: th.GuildID, AuthorID: user,
		Type: wire.MessageThreadStarter, ReferenceID: m.ID}, &m)
	h.threadCreated(w, r, user, th, member)
	return nil
}

// startThread is POST /channels/{c}/threads: a thread without a starter
// message (private unless type says otherwise).
func (h *threadHandler) startThread(w http.ResponseWriter, r *http.Request, user snowflake.ID) error {
	channelID, err := pathID(r, "channel", guild.ErrUnknownChannel)
	if err != nil {
		return err
	}
	// A forum post may come as multipart/form-data: payload_json and the
	// starter message's files[n] (other threads take no files: any sent
	// are dropped with the request).
	body, files, err := h.readMessagePayload(w, r)
	if err != nil {
		return err
	}
	var req startThreadRequest
	if err := decodeJSON(body, &req); err != nil {
		return err
	}
	spec, err := req.spec(channelID, 0)
	if err != nil {
		return err
	}
	// The parent's type is told only to who sees it (the one decision).
	rd := h.reader(user)
	v, err := rd.access(r.Context(), channelID)
	if err != nil {
		return err
	}
	if v.Channel.Type == store.ChannelForum {
		spec.AppliedTags = appliedTags(req.AppliedTags)
		return h.startForumPost(w, r, user, spec, req.Message, files)
	}
	th, member, err := h.threads.Create(r.Context(), user, spec)
	if err != nil {
		return err
	}
	// A public thread started without a message is announced in its
	// parent by a THREAD_CREATED message; a private one is not (those
	// who cannot join it are not told of it).
	if th.Type == store.ChannelPublicThread || th.Type == store.ChannelAnnouncementThread {
		h.postSystemMessage(r.Context(), rd, store.Message{ChannelID: th.ParentID, GuildID: th.GuildID,
			AuthorID: user, Type: wire.MessageThreadCreated, Content: th.Name, ReferenceID: th.ID}, nil)
	}
	h.threadCreated(w, r, user, th, member)
	return nil
}

// postSystemMessage stores and publishes a system message (no send
// permission is asked: the action it records was authorised), rendered
// by rd, whose viewer did the action; ref is the message it refers to,
// when it refers to one. It runs after the action succeeded, so a failure
// is logged, not answered.
func (h *threadHandler) postSystemMessage(ctx context.Context, rd *reader, m store.Message, ref *store.Message) {
	bg, cancel := background(ctx)
	defer cancel()
	if _, err := rd.prepare(bg, m, ref); err != nil {
		h.log.Warn("system message not posted", "type", m.Type, "channel_id", m.ChannelID, "err", err)
		return
	}
	if _, err := h.messages.Create(bg, guild.MessageWrite{Check: guild.CheckNone, UserID: m.AuthorID, Message: m,
		Render: rd.written(ref, true)}); err != nil {
		h.log.Warn("system message not posted", "type", m.Type, "channel_id", m.ChannelID, "err", err)
	}
}

// threadJSON renders a new thread with its creator's thread member, as
// Discord answers a thread's creation.
func threadJSON(th store.Channel, member store.ThreadMember) wire.Channel {
	out := wire.ChannelFrom(th, nil)
	tm := wire.ThreadMemberFrom(member)
	out.Member = &tm
	return out
}

func (h *threadHandler) threadCreated(w http.ResponseWriter, r *http.Request, user snowflake.ID, th store.Channel, member store.ThreadMember) {
	h.recordAudit(r, th.GuildID, user, auditEntry{Action: auditThreadCreate, Target: th.ID, Changes: []auditChange{
		change("name", nil, th.Name), change("type", nil, th.Type), change("archived", nil, false),
		change("locked", nil, false), change("auto_archive_duration", nil, th.Thread.AutoArchiveDuration)}})
	writeJSON(w, http.StatusCreated, threadJSON(th, member))
}

type threadPatchRequest struct {
	Name                *string  `json:"name"`
	Archived            *bool    `json:"archived"`
	Locked              *bool    `json:"locked"`
	AutoArchiveDuration *int     `json:"auto_archive_duration"`
	Invitable           *bool    `json:"invitable"`
	RateLimitPerUser    *int     `json:"rate_limit_per_user"`
	AppliedTags         *[]reqID `json:"applied_tags"`
}

// isThread reports whether a channel id names a thread (read from the
// store; a thread's type never changes).
func (h *threadHandler) isThread(r *http.Request, channelID snowflake.ID) bool {
	c, err := h.store.GetChannel(r.Context(), channelID)
	return err == nil && c.Thread != nil
}

// modifyThread is PATCH /channels/{thread}.
func (h *threadHandler) modifyThread(w http.ResponseWriter, r *http.Request, user, threadID snowflake.ID) error {
	var req threadPatchRequest
	if err := h.decodeRequest(w, r, &req); err != nil {
		return err
	}
	if req.AutoArchiveDuration != nil {
		switch *req.AutoArchiveDuration {
		case 60, 1440, 4320, 10080:
		default:
			return formError("auto_archive_duration", "BASE_TYPE_CHOICES", "Value must be one of {60, 1440, 4320, 10080}.")
		}
	}
	before, _ := h.store.GetChannel(r.Context(), threadID)
	patch := guild.ThreadPatch{
		Name: req.Name, Archived: req.Archived, Locked: req.Locked, AutoArchiveDuration: req.AutoArchiveDuration,
		Invitable: req.Invitable, RateLimitPerUser: req.RateLimitPerUser,
	}
	if req.AppliedTags != nil {
		tags := appliedTags(*req.AppliedTags)
		patch.AppliedTags = &tags
	}
	th, err := h.threads.Modify(r.Context(), user, threadID, patch)
	if err != nil {
		return err
	}
	var changes []auditChange
	if before.Thread != nil {
		if before.Name != th.Name {
			changes = append(changes, change("name", before.Name, th.Name))
		}
		if before.Thread.Archived != th.Thread.Archived {
			changes = append(changes, change("archived", before.Thread.Archived, th.Thread.Archived))
		}
		if before.Thread.Locked != th.Thread.Locked {
			changes = append(changes, change("locked", before.Thread.Locked, th.Thread.Locked))
		}
		if before.Thread.AutoArchiveDuration != th.Thread.AutoArchiveDuration {
			changes = append(changes, change("auto_archive_duration", before.Thread.AutoArchiveDuration, th.Thread.AutoArchiveDuration))
		}
	}
	if len(changes) > 0 {
		h.recordAudit(r, th.GuildID, user, auditEntry{Action: auditThreadUpdate, Target: th.ID, Changes: changes})
	}
	writeJSON(w, http.StatusOK, wire.ChannelFrom(th, nil))
	return nil
}

// deleteThread is DELETE /channels/{thread}.
func (h *threadHandler) deleteThread(w http.ResponseWriter, r *http.Request, user, threadID snowflake.ID) error {
	th, err := h.threads.Delete(r.Context(), user, threadID)
	if err != nil {
		return err
	}
	h.forgetChannels(r.Context(), th.ID)
	h.recordAudit(r, th.GuildID, user, auditEntry{Action: auditThreadDelete, Target: th.ID, Changes: []auditChange{
		change("name", th.Name, nil), change("type", th.Type, nil)}})
	writeJSON(w, http.StatusOK, wire.ChannelFrom(th, nil))
	return nil
}

type threadListJSON struct {
	Threads []wire.Channel      `json:"threads"`
	Members []wire.ThreadMember `json:"members"`
	HasMore *bool               `json:"has_more,omitempty"`
}

func threadList(l guild.ThreadList, paged bool) threadListJSON {
	out := threadListJSON{Threads: make([]wire.Channel, 0, len(l.Threads)), Members: make([]wire.ThreadMember, 0, len(l.Members))}
	for _, c := range l.Threads {
		out.Threads = append(out.Threads, wire.ChannelFrom(c, nil))
	}
	for _, m := range l.Members {
		out.Members = append(out.Members, wire.ThreadMemberFrom(m))
	}
	if paged {
		more := l.HasMore
		out.HasMore = &more
	}
	return out
}

// activeThreads is GET /guilds/{g}/threads/active.
func (h *threadHandler) activeThreads(w http.ResponseWriter, r *http.Request, user snowflake.ID) error {
	guildID, err := pathID(r, "guild", guild.ErrUnknownGuild)
	if err != nil {
		return err
	}
	l, err := h.threads.Active(r.Context(), user, guildID)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, threadList(l, false))
	return nil
}

func (h *threadHandler) archived(w http.ResponseWriter, r *http.Request, user snowflake.ID, private, joined bool) error {
	channelID, err := pathID(r, "channel", guild.ErrUnknownChannel)
	if err != nil {
		return err
	}
	limit, err := queryInt(r, "limit", 50, 2, 100)
	if err != nil {
		return err
	}
	var before time.Time
	if s := r.URL.Query().Get("before"); s != "" {
		var ts wire.Timestamp
		if err := ts.UnmarshalJSON([]byte(`"` + s + `"`)); err != nil {
			// A snowflake is accepted too (the joined-private route uses one).
			id, perr := snowflake.Parse(s)
			if perr != nil {
				return formError("before", "DATE_TYPE_PARSE", "Could not parse "+truncate(s, 40)+". Should be ISO8601.")
			}
			before = id.Time()
		} else {
			before = ts.Time()
		}
	}
	l, err := h.threads.Archived(r.Context(), user, guild.ArchivedQuery{
		ParentID: channelID, Private: private, Joined: joined, Before: before, Limit: limit,
	})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, threadList(l, true))
	return nil
}

func (h *threadHandler) archivedPublic(w http.ResponseWriter, r *http.Request, user snowflake.ID) error {
	return h.archived(w, r, user, false, false)
}

func (h *threadHandler) archivedPrivate(w http.ResponseWriter, r *http.Request, user snowflake.ID) error {
	return h.archived(w, r, user, true, false)
}

func (h *threadHandler) archivedJoined(w http.ResponseWriter, r *http.Request, user snowflake.ID) error {
	return h.archived(w, r, user, true, true)
}

// threadMemberTarget reads {channel} and {user} ("@me" is the caller).
func threadMemberTarget(r *http.Request, user snowflake.ID) (snowflake.ID, snowflake.ID, error) {
	threadID, err := pathID(r, "channel", guild.ErrUnknownChannel)
	if err != nil {
		return 0, 0, err
	}
	if r.PathValue("user") == "@me" {
		return threadID, user, nil
	}
	target, err := pathID(r, "user", guild.ErrUnknownMember)
	return threadID, target, err
}

func (h *threadHandler) addThreadMember(w http.ResponseWriter, r *http.Request, user snowflake.ID) error {
	threadID, target, err := threadMemberTarget(r, user)
	if err != nil {
		return err
	}
	if err := h.threads.AddMember(r.Context(), user, threadID, target); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (h *threadHandler) removeThreadMember(w http.ResponseWriter, r *http.Request, user snowflake.ID) error {
	threadID, target, err := threadMemberTarget(r, user)
	if err != nil {
		return err
	}
	if err := h.threads.RemoveMember(r.Context(), user, threadID, target); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (h *threadHandler) getThreadMember(w http.ResponseWriter, r *http.Request, user snowflake.ID) error {
	threadID, target, err := threadMemberTarget(r, user)
	if err != nil {
		return err
	}
	m, err := h.threads.Member(r.Context(), user, threadID, target)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, wire.ThreadMemberFrom(m))
	return nil
}

func (h *threadHandler) listThreadMembers(w http.ResponseWriter, r *http.Request, user snowflake.ID) error {
	threadID, err := pathID(r, "channel", guild.ErrUnknownChannel)
	if err != nil {
		return err
	}
	limit, err := queryInt(r, "limit", 100, 1, 100)
	if err != nil {
		return err
	}
	var after snowflake.ID
	if s := r.URL.Query().Get("after"); s != "" {
		if after, err = snowflake.Parse(s); err != nil {
			return formError("after", "NUMBER_TYPE_COERCE", "Value \""+truncate(s, 30)+"\" is not snowflake.")
		}
	}
	ms, err := h.threads.Members(r.Context(), user, threadID, after, limit)
	if err != nil {
		return err
	}
	out := make([]wire.ThreadMember, 0, len(ms))
	for _, m := range ms {
		out = append(out, wire.ThreadMemberFrom(m))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}
