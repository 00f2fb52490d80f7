package guild

import (
	"context"
	"time"

	"github.com/concord-chat/concord/runtime/base/shed"
	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/event"
	"github.com/concord-chat/concord/runtime/domain/typing"
	"github.com/concord-chat/concord/runtime/domain/wire"
)

// fanoutTyping delivers TYPING_START for a guild channel. With a typing
// tracker it goes only to the user sessions focused on the channel (op
// 14) that can still see it, plus bots with GUILD_MESSAGE_TYPING, at most
// once per typer per throttle window and only for a sample of concurrent
// typers, and is shed before messages under load. Without one, every
// session that sees the channel gets it.
func (a *Actor) fanoutTyping(ctx context.Context, userID, channelID snowflake.ID, now time.Time, m wire.Member, enq time.Time) {
	ap := a.presenceState(ctx)
	if ap == nil || ap.cfg.Tracker == nil {
		a.broadcastChannel(ctx, "TYPING_START", channelID,
			wire.TypingStart{ChannelID: channelID, GuildID: a.id, UserID: userID, Timestamp: now.Unix(), Member: &m}, IntentGuildMessageTyping)
		return
	}
	o, focused := ap.cfg.Tracker.Typing(userID, channelID)
	if o != typing.Delivered {
		return
	}
	b := newBatcher(typing.DispatchType, typing.Event(channelID, a.id, userID, now, mustJSON(m)))
	n := 0
	for _, s := range focused {
		// Focus can outlive membership or a permission change.
		if _, attached := a.subs[s.ID]; attached && !s.Bot && a.canView(s.UserID, channelID) && !a.passiveSkips(s, channelID) {
			b.add(s, 0)
			n++
		}
	}
	for _, sub := range a.sortedSubs() {
		s := sub.s
		if s.Bot && s.UserID != userID && s.Intents&IntentGuildMessageTyping != 0 && a.canView(s.UserID, channelID) {
			b.add(s, 0)
			n++
		}
	}
	if n == 0 || !ap.cfg.Shedder.Admit(shed.Typing, a.pressure(enq), n) {
		return
	}
	b.flushGuild(ctx, a)
}

// SessionEnded forgets a gateway session's channel focus; the gateway
// calls it when the session ended for good.
func (s *Service) SessionEnded(id event.SessionID) {
	if cfg := s.presence.Load(); cfg != nil && cfg.Tracker != nil {
		cfg.Tracker.Disconnect(id)
	}
}
