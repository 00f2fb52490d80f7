package guild

import (
	"context"
	"slices"
	"time"

	"github.com/concord-chat/concord/runtime/base/snowflake"
)

// Voice failover and drain: a call lives on one voice server; when the
// allocator stops calling that server healthy (its load reports stopped:
// it died; or it reports draining: an operator is taking it away), the
// guild places the call on another server of the same region (any region
// when it has none left) and sends every session in the call a new
// VOICE_SERVER_UPDATE.
// The libraries follow it by opening a voice connection to the new
// endpoint with the new token, as they do when Discord moves a call.

// runVoiceFailover checks the guilds with calls every FailoverInterval
// until the service closes.
func (s *Service) runVoiceFailover(v *voiceEnabled) {
	defer s.wg.Done()
	t := time.NewTicker(v.FailoverInterval)
	defer t.Stop()
	ctx := context.Background()
	for {
		select {
		case <-s.done:
			return
		case <-t.C:
		}
		v.guilds.Range(func(k, _ any) bool {
			_ = s.post(ctx, k.(snowflake.ID), func(a *Actor) { a.voiceFailover(ctx, v) })
			return true
		})
	}
}

// voiceFailover moves the actor's calls off servers that are no longer
// healthy.
func (a *Actor) voiceFailover(ctx context.Context, v *voiceEnabled) {
	if a.voice == nil {
		return
	}
	a.voiceReconcile(ctx, v)
	channels := make([]snowflake.ID, 0, len(a.voice.calls))
	for ch, srv := range a.voice.calls {
		if !v.Allocator.Healthy(srv.ID) {
			channels = append(channels, ch)
		}
	}
	slices.Sort(channels)
	for _, ch := range channels {
		old := a.voice.calls[ch]
		delete(a.voice.calls, ch)
		// The call stays in its channel's region, or its server's when
		// the channel's is automatic (a drained server's calls go to its
		// peers there), while the region has a server; else anywhere.
		region := old.Region
		if c := a.channels[ch]; c != nil && c.RTCRegion != "" {
			region = c.RTCRegion
		}
		srv, err := a.placeCall(ctx, v, ch, region)
		if err != nil {
			// No healthy server: the call stays unplaced; the next check
			// or a rejoin places it once one reports.
			a.voice.calls[ch] = old
			a.svc.log.Warn("voice failover: no server", "guild_id", a.id, "channel_id", ch, "err", err)
			continue
		}
		v.failovers.Inc()
		a.svc.log.Info("voice call moved to another server", "guild_id", a.id, "channel_id", ch, "from", old.ID, "to", srv.ID)
		a.sendCallServer(ctx, v, ch, srv)
	}
}

// sendCallServer points every session in channelID's call at srv with a
// new VOICE_SERVER_UPDATE.
func (a *Actor) sendCallServer(ctx context.Context, v *voiceEnabled, channelID snowflake.ID, srv VoiceServer) {
	for _, st := range a.voice.states {
		if st.channelID != channelID {
			continue
		}
		st.server = srv.ID
		if sub := a.subs[st.session]; sub != nil {
			if err := a.sendVoiceServer(ctx, v, sub.s, st, srv); err != nil {
				a.svc.log.Warn("voice server update", "guild_id", a.id, "user_id", st.userID, "err", err)
			}
		}
	}
}
