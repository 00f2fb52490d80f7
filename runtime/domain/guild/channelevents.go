package guild

import (
	"context"

	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/permissions"
)

// Gateway intents of the events in this file.
const (
	IntentGuildModeration        uint64 = 1 << 2
	IntentGuildMessageReactions  uint64 = 1 << 10
	IntentDirectMessageReactions uint64 = 1 << 13
)

// PublishEvent fans out an event about a channel's content
// (reactions, pins) in the actor's order: in a guild to the sessions that
// see the channel now and have intent, in a private channel to its
// recipients' sessions with privateIntent. It does not wait for delivery.
func (ms *Messages) PublishEvent(ctx context.Context, guildID, channelID snowflake.ID, typ string, payload any, intent, privateIntent uint64) error {
	s := ms.s
	if guildID == 0 {
		return s.private.publish(ctx, channelID, typ, payload, privateIntent)
	}
	actx := context.WithoutCancel(ctx)
	return s.post(ctx, guildID, func(a *Actor) {
		if _, ok := a.channels[channelID]; ok {
			a.broadcastChannel(actx, typ, channelID, payload, intent)
		}
	})
}

// PublishModeration fans out a bot-only guild event
// (GUILD_AUDIT_LOG_ENTRY_CREATE) to bot sessions that asked for the
// GUILD_MODERATION intent and whose user holds perms (VIEW_AUDIT_LOG) at
// the guild level now.
func (s *Service) PublishModeration(ctx context.Context, guildID snowflake.ID, typ string, payload any, perms permissions.Bits) error {
	actx := context.WithoutCancel(ctx)
	return s.post(ctx, guildID, func(a *Actor) {
		a.toHolders(actx, typ, payload, perms, true)
	})
}

// toHolders delivers an event to GUILD_MODERATION sessions of users who
// hold perms at the guild level now; botsOnly leaves user sessions out.
func (a *Actor) toHolders(ctx context.Context, typ string, payload any, perms permissions.Bits, botsOnly bool) {
	raw := mustJSON(payload)
	a.record(backlogEntry{kind: backlogHolders, typ: typ, payload: raw, perms: perms, botsOnly: botsOnly})
	b := newBatcher(typ, raw)
	b.replayable = true
	now := a.svc.cfg.Now()
	for _, sub := range a.sortedSubs() {
		if (sub.s.Bot || !botsOnly) && wants(sub.s, IntentGuildModeration) && a.engine.Base(sub.s.UserID, now).Has(perms) {
			b.add(sub.s, 0)
		}
	}
	b.flushGuild(ctx, a)
}
