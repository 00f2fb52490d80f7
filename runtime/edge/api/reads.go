package api

import (
	"context"
	"errors"
	"fmt"

	"github.com/concord-chat/concord/runtime/adapters/store"
	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/guild"
	"github.com/concord-chat/concord/runtime/domain/permissions"
	"github.com/concord-chat/concord/runtime/domain/wire"
)

// reader is the only way a handler turns stored messages into a response:
// it renders for one viewer, within one request, and asks the guild
// tier's Visibility decision — taken now, not remembered from an earlier
// request — for every channel it renders from, the channels of referenced
// messages included. Each channel is decided once per request.
//
// Paths that use it: message history and single-message reads
// (history.go), the send response and the enforce_nonce replay
// (messages.go), edit responses (edits.go). A message whose channel the
// viewer cannot see fails with guild.ErrMissingAccess; a referenced
// message the viewer cannot see is left out (referenced_message absent),
// as Discord leaves out what it cannot show.
type reader struct {
	v       *views
	viewer  snowflake.ID
	decided map[snowflake.ID]readDecision
	// sealed is set while the reader renders inside the guild's actor
	// (written): it may not ask Visibility there, so a channel not
	// decided before the write is an error, not a question.
	sealed bool
}

// errUndecided is a render inside the guild's actor that needed a
// decision nobody took before the write: a bug of the handler.
var errUndecided = errors.New("api: render needs a visibility decision taken before the write")

type readDecision struct {
	view guild.ReadView
	err  error
}

func (v *views) reader(viewer snowflake.ID) *reader {
	return &reader{v: v, viewer: viewer, decided: make(map[snowflake.ID]readDecision, 1)}
}

// access returns the viewer's decision for a channel, asking Visibility
// the first time in this request.
func (r *reader) access(ctx context.Context, channelID snowflake.ID) (guild.ReadView, error) {
	if d, ok := r.decided[channelID]; ok {
		return d.view, d.err
	}
	if r.sealed {
		return guild.ReadView{}, errors.Join(guild.ErrUnavailable, fmt.Errorf("channel %d: %w", channelID, errUndecided))
	}
	v, err := r.v.guilds.Visibility(ctx, r.viewer, channelID)
	r.decided[channelID] = readDecision{v, err}
	return v, err
}

// history returns the decision for a history read: the channel must be
// visible; History tells whether its messages may be listed.
func (r *reader) history(ctx context.Context, channelID snowflake.ID) (guild.ReadGrant, error) {
	v, err := r.access(ctx, channelID)
	if err != nil {
		return guild.ReadGrant{}, err
	}
	return guild.ReadGrant{Channel: v.Channel, History: v.Access.CanReadHistory()}, nil
}

// load reads one stored message the viewer may see now and renders it
// with its referenced message (when visible).
func (r *reader) load(ctx context.Context, channelID, messageID snowflake.ID) (wire.Message, error) {
	if _, err := r.access(ctx, channelID); err != nil {
		return wire.Message{}, err
	}
	m, err := r.v.store.GetMessage(ctx, channelID, messageID)
	if err != nil {
		return wire.Message{}, messageErr(err)
	}
	return r.render(ctx, m, nil, nil)
}

// render converts a stored message for the viewer. member is the author's
// partial member when known (sends, edits). ref, when given, is the
// replied-to message already loaded; otherwise it is loaded from the
// store. Either way it is included only if the viewer sees its channel now.
func (r *reader) render(ctx context.Context, m store.Message, member *wire.Member, ref *store.Message) (wire.Message, error) {
	v, err := r.access(ctx, m.ChannelID)
	if err != nil {
		return wire.Message{}, err
	}
	// A reference names a message of the same channel (replies cannot
	// cross channels), except a thread's starter message, which lives in
	// the thread's parent; a THREAD_CREATED message names a thread, not a
	// message.
	refChannel := m.ChannelID
	if m.Type == wire.MessageThreadStarter {
		refChannel = v.Channel.ParentID
	}
	if ref == nil && m.ReferenceID != 0 && m.Type != wire.MessageThreadCreated {
		got, err := r.v.store.GetMessage(ctx, refChannel, m.ReferenceID)
		switch {
		case err == nil:
			ref = &got
		case !errors.Is(err, store.ErrNotFound):
			return wire.Message{}, errors.Join(guild.ErrUnavailable, err)
		}
	}
	var refMsg *wire.Message
	if ref != nil {
		_, err := r.access(ctx, ref.ChannelID)
		switch {
		case err == nil:
			rm := r.v.wireMessage(ctx, *ref, nil, nil)
			if err := r.withThread(ctx, ref, &rm); err != nil {
				return wire.Message{}, err
			}
			refMsg = &rm
		case errors.Is(err, guild.ErrUnavailable):
			return wire.Message{}, err
		}
	}
	out := r.v.wireMessage(ctx, m, member, refMsg)
	switch m.Type {
	case wire.MessageThreadCreated:
		out.MessageReference = &wire.MessageReference{ChannelID: m.ReferenceID, GuildID: m.GuildID}
	case wire.MessageThreadStarter:
		out.MessageReference = &wire.MessageReference{MessageID: m.ReferenceID, ChannelID: refChannel, GuildID: m.GuildID}
	}
	if err := r.withThread(ctx, &m, &out); err != nil {
		return wire.Message{}, err
	}
	return out, nil
}

// withThread sets the thread a message started (flag HAS_THREAD; the
// thread has the message's id) when the viewer sees that thread now.
func (r *reader) withThread(ctx context.Context, m *store.Message, out *wire.Message) error {
	if m.Flags&messageFlagHasThread == 0 {
		return nil
	}
	v, err := r.access(ctx, m.ID)
	switch {
	case err == nil && v.Channel.Thread != nil:
		th := wire.ChannelFrom(v.Channel, nil)
		out.Thread = &th
	case errors.Is(err, guild.ErrUnavailable):
		return err
	}
	return nil
}

// wireMessage converts a stored message with its author, mentions and an
// already-decided referenced message; only reader calls it.
func (v *views) wireMessage(ctx context.Context, m store.Message, member *wire.Member, ref *wire.Message) wire.Message {
	var author wire.User
	if m.WebhookID != 0 {
		author, member = webhookAuthor(m), nil
	} else {
		author = v.userOrGhost(ctx, m.AuthorID)
	}
	mentions := make([]wire.User, 0, len(m.Mentions))
	for _, id := range m.Mentions {
		if u, err := v.guilds.User(ctx, id); err == nil {
			mentions = append(mentions, u)
		}
	}
	out := wire.MessageFrom(m, author, member, mentions, ref)
	out.WebhookID = m.WebhookID
	v.attachmentURLs(ctx, out.Attachments)
	return out
}

// prepare readies the reader to render m inside the guild's actor after
// its write (written): it loads m's referenced message when ref is nil
// (a reply's, in m's channel) and decides now every channel the render
// will ask about besides m's own, whose decision the write's check takes:
// the thread m started, ref's channel and the thread ref started. It
// returns the referenced message to render with.
func (r *reader) prepare(ctx context.Context, m store.Message, ref *store.Message) (*store.Message, error) {
	if ref == nil && m.ReferenceID != 0 && m.Type != wire.MessageThreadCreated && m.Type != wire.MessageThreadStarter {
		got, err := r.v.store.GetMessage(ctx, m.ChannelID, m.ReferenceID)
		switch {
		case err == nil:
			ref = &got
		case !errors.Is(err, store.ErrNotFound):
			return nil, errors.Join(guild.ErrUnavailable, err)
		}
	}
	var ids []snowflake.ID
	if m.ID != 0 && m.Flags&messageFlagHasThread != 0 {
		ids = append(ids, m.ID)
	}
	if ref != nil {
		ids = append(ids, ref.ChannelID)
		if ref.Flags&messageFlagHasThread != 0 {
			ids = append(ids, ref.ID)
		}
	}
	for _, id := range ids {
		if _, err := r.access(ctx, id); errors.Is(err, guild.ErrUnavailable) {
			return nil, err
		}
	}
	return ref, nil
}

// written is the Render of a message write by this reader's viewer
// (guild.MessageWrite): the write's check decided the channel for the
// viewer, who wrote in it; everything else was decided by prepare. With
// member the answer carries the author's member the check resolved.
func (r *reader) written(ref *store.Message, member bool) func(context.Context, guild.Written) (wire.Message, error) {
	return func(ctx context.Context, w guild.Written) (wire.Message, error) {
		r.decided[w.Channel.ID] = readDecision{view: guild.ReadView{Channel: w.Channel, Access: permissions.Visible}}
		r.sealed = true
		defer func() { r.sealed = false }()
		var mem *wire.Member
		if member {
			mem = w.Member
		}
		return r.render(ctx, w.Message, mem, ref)
	}
}
