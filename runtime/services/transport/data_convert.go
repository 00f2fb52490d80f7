package transport

import (
	"fmt"
	"time"

	"github.com/concord-chat/concord/runtime/adapters/store"
	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/services/transport/transportpb"
)

// messageToPB encodes m.
func messageToPB(m store.Message) *transportpb.Message {
	p := &transportpb.Message{
		Id:              uint64(m.ID),
		ChannelId:       uint64(m.ChannelID),
		GuildId:         uint64(m.GuildID),
		AuthorId:        uint64(m.AuthorID),
		Content:         m.Content,
		Type:            int32(m.Type),
		Flags:           int32(m.Flags),
		Tts:             m.TTS,
		Pinned:          m.Pinned,
		ReferenceId:     uint64(m.ReferenceID),
		MentionEveryone: m.MentionEveryone,
		Mentions:        idsToPB(m.Mentions),
		MentionRoles:    idsToPB(m.MentionRoles),
		Nonce:           m.Nonce,
		Embeds:          m.Embeds,
		Components:      m.Components,
		WebhookId:       uint64(m.WebhookID),
		WebhookName:     m.WebhookName,
		WebhookAvatar:   m.WebhookAvatar,
	}
	if !m.EditedAt.IsZero() {
		p.EditedAtUnixNano = m.EditedAt.UnixNano()
	}
	for _, a := range m.Attachments {
		p.Attachments = append(p.Attachments, &transportpb.Attachment{
			Id: uint64(a.ID), Filename: a.Filename, Size: int64(a.Size), Url: a.URL, ContentType: a.ContentType,
		})
	}
	return p
}

// messageFromPB decodes p.
func messageFromPB(p *transportpb.Message) store.Message {
	m := store.Message{
		ID:              snowflake.ID(p.Id),
		ChannelID:       snowflake.ID(p.ChannelId),
		GuildID:         snowflake.ID(p.GuildId),
		AuthorID:        snowflake.ID(p.AuthorId),
		Content:         p.Content,
		Type:            int(p.Type),
		Flags:           int(p.Flags),
		TTS:             p.Tts,
		Pinned:          p.Pinned,
		ReferenceID:     snowflake.ID(p.ReferenceId),
		MentionEveryone: p.MentionEveryone,
		Mentions:        idsFromPB(p.Mentions),
		MentionRoles:    idsFromPB(p.MentionRoles),
		Nonce:           p.Nonce,
		Embeds:          p.Embeds,
		Components:      p.Components,
		WebhookID:       snowflake.ID(p.WebhookId),
		WebhookName:     p.WebhookName,
		WebhookAvatar:   p.WebhookAvatar,
	}
	if p.EditedAtUnixNano != 0 {
		m.EditedAt = time.Unix(0, p.EditedAtUnixNano).UTC()
	}
	for _, a := range p.Attachments {
		m.Attachments = append(m.Attachments, store.Attachment{
			ID: snowflake.ID(a.Id), Filename: a.Filename, Size: int(a.Size), URL: a.Url, ContentType: a.ContentType,
		})
	}
	return m
}

func idsToPB(ids []snowflake.ID) []uint64 {
	if len(ids) == 0 {
		return nil
	}
	out := make([]uint64, len(ids))
	for i, id := range ids {
		out[i] = uint64(id)
	}
	return out
}

func idsFromPB(ids []uint64) []snowflake.ID {
	if len(ids) == 0 {
		return nil
	}
	out := make([]snowflake.ID, len(ids))
	for i, id := range ids {
		out[i] = snowflake.ID(id)
	}
	return out
}

func eventsToPB(evs []store.Event) []*transportpb.Event {
	if len(evs) == 0 {
		return nil
	}
	out := make([]*transportpb.Event, len(evs))
	for i, e := range evs {
		out[i] = &transportpb.Event{Topic: e.Topic, Key: e.Key, Value: e.Value}
	}
	return out
}

func eventsFromPB(evs []*transportpb.Event) ([]store.Event, error) {
	if len(evs) == 0 {
		return nil, nil
	}
	out := make([]store.Event, len(evs))
	for i, e := range evs {
		if e.GetTopic() == "" {
			return nil, fmt.Errorf("%w: event %d without topic", ErrInvalid, i)
		}
		out[i] = store.Event{Topic: e.Topic, Key: e.Key, Value: e.Value}
	}
	return out, nil
}
