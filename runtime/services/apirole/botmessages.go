package apirole

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/concord-chat/concord/runtime/adapters/store"
	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/bots"
	"github.com/concord-chat/concord/runtime/domain/guild"
	"github.com/concord-chat/concord/runtime/domain/mention"
	"github.com/concord-chat/concord/runtime/domain/wire"
	"github.com/concord-chat/concord/runtime/edge/api/uploads"
)

// botMessages posts interaction responses through the guild service's
// message write path, as the REST API does: one call into the guild's
// actor resolves the mentions (guild.CheckApp), writes the message with
// its event (the process's outbox.Writer: a crash cannot lose the event
// mention counting needs) and fans it out. Ephemeral messages are not
// stored, have no event and go to their recipient's sessions only. Embeds and
// components are stored with the message (the bot platform validated
// them), so a later component interaction can be checked against them.
type botMessages struct {
	store  store.Store
	guilds *guild.Service
	ids    bots.IDSource
	log    *slog.Logger
	// uploads signs the attachment URLs of answers.
	uploads *uploads.Store
}

var _ bots.Messages = (*botMessages)(nil)

// botUploads gives the bot platform the REST API's attachment store.
type botUploads struct{ s *uploads.Store }

// ReadPayload implements bots.Uploads.
func (u botUploads) ReadPayload(w http.ResponseWriter, r *http.Request) ([]byte, bots.PendingFiles, error) {
	body, files, err := u.s.ReadPayload(w, r)
	if err != nil || len(files) == 0 {
		return body, nil, err
	}
	return body, u.s.Pending(files), nil
}

// render converts a stored message with its author and mentioned users.
func (b *botMessages) render(ctx context.Context, m store.Message) wire.Message {
	author, err := b.guilds.User(ctx, m.AuthorID)
	if err != nil {
		author = wire.User{ID: m.AuthorID, Username: "Deleted User", Discriminator: "0"}
	}
	mentions := make([]wire.User, 0, len(m.Mentions))
	for _, id := range m.Mentions {
		if u, err := b.guilds.User(ctx, id); err == nil {
			mentions = append(mentions, u)
		}
	}
	out := wire.MessageFrom(m, author, nil, mentions, nil)
	if b.uploads != nil {
		b.uploads.Sign(ctx, out.Attachments)
	}
	return out
}

// appMentions are the mentions content asks for under allowed_mentions,
// for the actor to keep those the guild allows (guild.CheckApp), so the
// event carries the users, roles and @everyone the read-state consumer
// counts.
func appMentions(content string, am *mention.Allowed) *guild.Mentions {
	p := mention.Parse(content, am)
	return &guild.Mentions{Everyone: p.Everyone, Users: p.Users, Roles: p.Roles}
}

// renderer is the Render of a bot message write: render, which asks the
// guild nothing, and extras on top.
func (b *botMessages) renderer(extras func(wire.Message) wire.Message) func(context.Context, guild.Written) (wire.Message, error) {
	return func(ctx context.Context, w guild.Written) (wire.Message, error) {
		return extras(b.render(ctx, w.Message)), nil
	}
}

// writeErr maps a failed write: a store failure is bots.ErrUnavailable.
func writeErr(err error) error {
	if errors.Is(err, guild.ErrUnavailable) {
		return fmt.Errorf("%w: store message: %w", bots.ErrUnavailable, err)
	}
	return botErr(err)
}

// CreateMessage implements bots.Messages.
func (b *botMessages) CreateMessage(ctx context.Context, nm bots.NewMessage) (wire.Message, error) {
	id, err := b.ids.Next()
	if err != nil {
		return wire.Message{}, fmt.Errorf("%w: message id: %w", bots.ErrUnavailable, err)
	}
	m := store.Message{ID: id, ChannelID: nm.ChannelID, GuildID: nm.GuildID, AuthorID: nm.AuthorID,
		Content: nm.Content, Type: nm.Type, Flags: nm.Flags, TTS: nm.TTS,
		Embeds: wire.JoinRaw(nm.Embeds), Components: wire.JoinRaw(nm.Components), Attachments: nm.Attachments}
	if nm.EphemeralTo != 0 {
		m.Flags |= bots.MessageFlagEphemeral
		out := b.withExtras(b.render(ctx, m), nm.Embeds, nm.Components)
		b.guilds.Bots.DispatchToUserShard(ctx, nm.EphemeralTo, 0, "MESSAGE_CREATE", mustJSON(out))
		return out, nil
	}
	written, err := b.guilds.Messages.Create(ctx, guild.MessageWrite{Check: guild.CheckApp, UserID: nm.AuthorID, Message: m,
		Mentions: appMentions(nm.Content, nm.AllowedMentions),
		Render:   b.renderer(func(out wire.Message) wire.Message { return b.withExtras(out, nm.Embeds, nm.Components) })})
	if err != nil {
		return wire.Message{}, writeErr(err)
	}
	return written.Wire, nil
}

// withExtras sets embeds and components on an answer.
func (b *botMessages) withExtras(m wire.Message, embeds, components []json.RawMessage) wire.Message {
	if embeds != nil {
		m.Embeds = embeds
	}
	if components != nil {
		m.Components = components
	}
	return m
}

// EditMessage implements bots.Messages.
func (b *botMessages) EditMessage(ctx context.Context, e bots.MessageEdit) (wire.Message, error) {
	if e.EphemeralTo != 0 {
		guildID, err := b.guilds.ChannelGuild(ctx, e.ChannelID)
		if err != nil {
			return wire.Message{}, botErr(err)
		}
		m := store.Message{ID: e.MessageID, ChannelID: e.ChannelID, GuildID: guildID, Flags: bots.MessageFlagEphemeral, EditedAt: time.Now()}
		applyEdit(&m, e)
		m.Flags |= bots.MessageFlagEphemeral
		out := b.render(ctx, m)
		out = b.editExtras(out, e)
		b.guilds.Bots.DispatchToUserShard(ctx, e.EphemeralTo, 0, "MESSAGE_UPDATE", mustJSON(out))
		return out, nil
	}
	m, err := b.store.GetMessage(ctx, e.ChannelID, e.MessageID)
	if err != nil {
		return wire.Message{}, botErr(err)
	}
	applyEdit(&m, e)
	var mentions *guild.Mentions
	if e.Content != nil {
		// New content, new mentions, as a REST edit resolves them.
		mentions = appMentions(m.Content, e.AllowedMentions)
	}
	m.EditedAt = time.Now()
	// The actor refuses a change to a message of an archived thread, as
	// the REST API does: nobody, moderators included, edits or deletes
	// the messages of an archived thread.
	written, err := b.guilds.Messages.Update(ctx, guild.MessageWrite{Check: guild.CheckApp, UserID: m.AuthorID, Message: m,
		Mentions: mentions, Render: b.renderer(func(out wire.Message) wire.Message { return b.editExtras(out, e) })})
	if err != nil {
		return wire.Message{}, writeErr(err)
	}
	return written.Wire, nil
}

// applyEdit applies the stored fields of an edit.
func applyEdit(m *store.Message, e bots.MessageEdit) {
	if e.Content != nil {
		m.Content = *e.Content
	}
	if e.Flags != nil {
		m.Flags = *e.Flags
	}
	if e.Embeds != nil {
		m.Embeds = wire.JoinRaw(*e.Embeds)
	}
	if e.Components != nil {
		m.Components = wire.JoinRaw(*e.Components)
	}
	if e.Attachments != nil {
		m.Attachments = *e.Attachments
	}
}

// editExtras sets the edit's embeds and components on an answer.
func (b *botMessages) editExtras(m wire.Message, e bots.MessageEdit) wire.Message {
	if e.Embeds != nil {
		m.Embeds = *e.Embeds
	}
	if e.Components != nil {
		m.Components = *e.Components
	}
	return m
}

// GetMessage implements bots.Messages.
func (b *botMessages) GetMessage(ctx context.Context, channelID, messageID snowflake.ID) (wire.Message, error) {
	m, err := b.store.GetMessage(ctx, channelID, messageID)
	if err != nil {
		return wire.Message{}, botErr(err)
	}
	return b.render(ctx, m), nil
}

// DeleteMessage implements bots.Messages.
func (b *botMessages) DeleteMessage(ctx context.Context, channelID, messageID, ephemeralTo snowflake.ID) error {
	guildID, err := b.guilds.ChannelGuild(ctx, channelID)
	if err != nil {
		return botErr(err)
	}
	if ephemeralTo != 0 {
		b.guilds.Bots.DispatchToUserShard(ctx, ephemeralTo, 0, "MESSAGE_DELETE",
			mustJSON(wire.MessageDelete{ID: messageID, ChannelID: channelID, GuildID: guildID}))
		return nil
	}
	m, err := b.store.GetMessage(ctx, channelID, messageID)
	if err != nil {
		return botErr(err)
	}
	// One call into the guild's actor refuses an archived thread's
	// message, deletes it with its MESSAGE_DELETE (with the store's
	// outbox a concurrent delete that got there first makes a duplicate
	// event, which consumers dedupe) and fans the deletion out.
	if err := b.guilds.Messages.Delete(ctx, guild.MessageDelete{ChannelID: channelID, Messages: []store.Message{m}}); err != nil {
		return writeErr(err)
	}
	return nil
}

// mustJSON marshals a value the wire package defines.
func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("apirole: marshal %T: %v", v, err))
	}
	return b
}

// NewMessages returns the bots.Messages the bot platform posts
// interaction answers through (botMessages), over st and the guild
// service guilds, which writes them with their events; for tools and
// tests that write as the bot platform does.
func NewMessages(st store.Store, guilds *guild.Service, ids bots.IDSource, log *slog.Logger) bots.Messages {
	return &botMessages{store: st, guilds: guilds, ids: ids, log: log}
}
