package apirole

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/concord-chat/concord/runtime/api/uploads"
	"github.com/concord-chat/concord/runtime/bots"
	"github.com/concord-chat/concord/runtime/eventlog"
	"github.com/concord-chat/concord/runtime/eventlog/outbox"
	"github.com/concord-chat/concord/runtime/guild"
	"github.com/concord-chat/concord/runtime/mention"
	"github.com/concord-chat/concord/runtime/snowflake"
	"github.com/concord-chat/concord/runtime/store"
	"github.com/concord-chat/concord/runtime/wire"
)

// botMessages posts interaction responses through the REST API's path:
// mentions resolved as for a send, the store write with its event in the
// same atomic write (outbox.PutMessage: a crash between the write and a
// separate publish cannot lose the event mention counting needs), then
// guild fan-out. Ephemeral messages are not stored, have no event and go
// to their recipient's sessions only. Embeds and
// components are stored with the message (the bot platform validated
// them), so a later component interaction can be checked against them.
type botMessages struct {
	store  store.Store
	guilds *guild.Service
	ids    bots.IDSource
	events MessageEvents
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

// eventsOrNil is the publisher as an untyped value, nil when there is
// none (a nil MessageEvents must not look like a relay).
func (b *botMessages) eventsOrNil() any {
	if b.events == nil {
		return nil
	}
	return b.events
}

// mentions resolves the mentions of content, written by authorID in
// channelID, into m: parsed under allowed_mentions, then kept only as the
// guild allows them (guild.ResolveAppMentions), so the event carries the
// users, roles and @everyone the read-state consumer counts.
func (b *botMessages) mentions(ctx context.Context, m *store.Message, authorID snowflake.ID, content string, am *mention.Allowed) error {
	p := mention.Parse(content, am)
	got, err := b.guilds.ResolveAppMentions(ctx, authorID, m.ChannelID, p.Everyone, p.Users, p.Roles)
	if err != nil {
		return botErr(err)
	}
	m.Mentions, m.MentionRoles, m.MentionEveryone = got.Users, got.Roles, got.Everyone
	return nil
}

// put writes m with its typ event in one atomic write when the store's
// outbox is relayed, else alone followed by a separate publish.
func (b *botMessages) put(ctx context.Context, typ string, m store.Message) error {
	logged, err := outbox.PutMessage(ctx, b.store, b.eventsOrNil(), typ, m)
	if err != nil {
		return fmt.Errorf("%w: store message: %w", bots.ErrUnavailable, err)
	}
	if !logged && b.events != nil {
		if err := b.events.Publish(ctx, outbox.StoredEvent(typ, m)); err != nil {
			b.log.Warn("bot message event not logged", "message_id", m.ID, "err", err)
		}
	}
	return nil
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
		b.guilds.DispatchToUserShard(ctx, nm.EphemeralTo, 0, "MESSAGE_CREATE", mustJSON(out))
		return out, nil
	}
	if err := b.mentions(ctx, &m, nm.AuthorID, nm.Content, nm.AllowedMentions); err != nil {
		return wire.Message{}, err
	}
	if err := b.put(ctx, eventlog.MessageCreate, m); err != nil {
		return wire.Message{}, err
	}
	out := b.withExtras(b.render(ctx, m), nm.Embeds, nm.Components)
	if err := b.guilds.PublishMessage(ctx, "MESSAGE_CREATE", out); err != nil {
		b.log.Warn("bot message not published", "message_id", id, "err", err)
	}
	return out, nil
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
		b.guilds.DispatchToUserShard(ctx, e.EphemeralTo, 0, "MESSAGE_UPDATE", mustJSON(out))
		return out, nil
	}
	m, err := b.store.GetMessage(ctx, e.ChannelID, e.MessageID)
	if err != nil {
		return wire.Message{}, botErr(err)
	}
	if err := b.frozen(ctx, e.ChannelID); err != nil {
		return wire.Message{}, err
	}
	applyEdit(&m, e)
	if e.Content != nil {
		// New content, new mentions, as a REST edit resolves them.
		if err := b.mentions(ctx, &m, m.AuthorID, m.Content, e.AllowedMentions); err != nil {
			return wire.Message{}, err
		}
	}
	m.EditedAt = time.Now()
	if err := b.put(ctx, eventlog.MessageUpdate, m); err != nil {
		return wire.Message{}, err
	}
	out := b.editExtras(b.render(ctx, m), e)
	if err := b.guilds.PublishMessage(ctx, "MESSAGE_UPDATE", out); err != nil {
		b.log.Warn("bot message edit not published", "message_id", m.ID, "err", err)
	}
	return out, nil
}

// frozen refuses a change to a message of an archived thread, as the
// REST API does: nobody, moderators included, edits or deletes the
// messages of an archived thread. A channel the store does not hold as a
// thread (a DM, a guild channel) is never frozen.
func (b *botMessages) frozen(ctx context.Context, channelID snowflake.ID) error {
	c, err := b.store.GetChannel(ctx, channelID)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return nil
	case err != nil:
		return fmt.Errorf("%w: channel %d: %w", bots.ErrUnavailable, channelID, err)
	case c.Thread != nil && c.Thread.Archived:
		return fmt.Errorf("%w: channel %d", bots.ErrThreadArchived, channelID)
	}
	return nil
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
		b.guilds.DispatchToUserShard(ctx, ephemeralTo, 0, "MESSAGE_DELETE",
			mustJSON(wire.MessageDelete{ID: messageID, ChannelID: channelID, GuildID: guildID}))
		return nil
	}
	m, err := b.store.GetMessage(ctx, channelID, messageID)
	if err != nil {
		return botErr(err)
	}
	if err := b.frozen(ctx, channelID); err != nil {
		return err
	}
	// With the store's outbox the delete and its MESSAGE_DELETE are one
	// write (a concurrent delete that got there first makes a duplicate
	// event, which consumers dedupe).
	logged, err := outbox.DeleteMessage(ctx, b.store, b.eventsOrNil(), guildID, m)
	if err != nil {
		return fmt.Errorf("%w: delete message: %w", bots.ErrUnavailable, err)
	}
	if !logged && b.events != nil {
		ev := eventlog.MessageEvent{Type: eventlog.MessageDelete, GuildID: guildID, ChannelID: channelID, MessageID: messageID}
		if err := b.events.Publish(ctx, ev); err != nil {
			b.log.Warn("bot message delete not logged", "message_id", messageID, "err", err)
		}
	}
	if err := b.guilds.PublishDelete(ctx, guildID, channelID, []snowflake.ID{messageID}); err != nil {
		b.log.Warn("bot message delete not published", "message_id", messageID, "err", err)
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
// service guilds, publishing through events (nil: none); for tools and
// tests that write as the bot platform does.
func NewMessages(st store.Store, guilds *guild.Service, ids bots.IDSource, events MessageEvents, log *slog.Logger) bots.Messages {
	return &botMessages{store: st, guilds: guilds, ids: ids, events: events, log: log}
}
