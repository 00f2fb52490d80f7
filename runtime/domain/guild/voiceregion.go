package guild

import (
	"context"

	"github.com/concord-chat/concord/runtime/adapters/store"
	"github.com/concord-chat/concord/runtime/base/snowflake"
)

// Voice regions of calls.
//
// A voice or stage channel's rtc_region names the region its call runs
// in; null (stored empty) is automatic. The call is placed when the first
// member joins: in the channel's region when it has one, else in the
// region nearest that joiner. Concord knows no client locations (no
// geo-IP): the nearest region is the one of the gateway node holding the
// joiner's session, as the fleet knows it from a voice server reporting
// from that node (VoiceNearest), else this guild node's own region
// (VoiceConfig.Region), else any region. In every case the allocator
// falls back to the least-loaded healthy server of any region when the
// region has none, so a call is never refused while any server lives.

// VoiceNearest is the optional ability of an allocator to name the region
// of a gateway node: the region of the voice servers that run on it.
type VoiceNearest interface {
	// NodeRegion returns node's region, or "" when no voice server
	// reports from it.
	NodeRegion(node string) string
}

// callRegion is the region channelID's call is placed in when node's
// session joins it first.
func (a *Actor) callRegion(v *voiceEnabled, channelID snowflake.ID, node string) string {
	if c := a.channels[channelID]; c != nil && c.RTCRegion != "" {
		return c.RTCRegion
	}
	if n, ok := v.Allocator.(VoiceNearest); ok && node != "" {
		if r := n.NodeRegion(node); r != "" {
			return r
		}
	}
	return v.Region
}

// voiceRegionChanged moves the live call of c, whose rtc_region was old,
// to a server of its new region, as Discord does: every session in the
// call gets a VOICE_SERVER_UPDATE for the new server and the libraries
// reconnect to it. A change to automatic leaves the call where it is (it
// is in some region already), and a region with no healthy server leaves
// it on its server.
func (a *Actor) voiceRegionChanged(ctx context.Context, old string, c store.Channel) {
	v := a.svc.voice.Load()
	if v == nil || a.voice == nil || c.RTCRegion == old || c.RTCRegion == "" {
		return
	}
	cur, ok := a.voice.calls[c.ID]
	if !ok || cur.Region == c.RTCRegion {
		return
	}
	srv, err := v.Allocator.Pick(ctx, c.RTCRegion)
	if err != nil || srv.Region != c.RTCRegion || srv.ID == cur.ID {
		a.svc.log.Info("voice call stays on its server: its new region has none", "guild_id", a.id,
			"channel_id", c.ID, "rtc_region", c.RTCRegion, "server", cur.ID, "err", err)
		return
	}
	a.voice.calls[c.ID] = srv
	a.svc.log.Info("voice call moved to its channel's new region", "guild_id", a.id, "channel_id", c.ID,
		"rtc_region", c.RTCRegion, "from", cur.ID, "to", srv.ID)
	a.sendCallServer(ctx, v, c.ID, srv)
}
