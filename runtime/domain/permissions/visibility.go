package permissions

import (
	"time"

	"github.com/concord-chat/concord/runtime/base/snowflake"
)

// Access is the read-time visibility decision for one user and one
// channel: whether the user may see the channel (and so any id, name or
// event of it), and whether they may also read its stored messages.
//
// It is the only place that turns permission bits into "may read": every
// path that returns stored content — REST reads, replies' referenced
// messages, nonce replays, edit responses, gateway fan-out, GUILD_CREATE,
// member lists, read states — asks for an Access computed at the moment
// of reading, never one remembered from an earlier request.
type Access uint8

const (
	// Hidden: the channel does not exist for the user; nothing of it may
	// be returned (REST answers 50001 Missing Access).
	Hidden Access = iota
	// Visible: the user sees the channel and its live events, but not its
	// history (VIEW_CHANNEL without READ_MESSAGE_HISTORY).
	Visible
	// Readable: the user sees the channel and reads its history.
	Readable
)

// AccessOf decides from a user's effective permissions in a channel.
func AccessOf(p Bits) Access {
	switch {
	case !p.Has(ViewChannel):
		return Hidden
	case !p.Has(ReadMessageHistory):
		return Visible
	}
	return Readable
}

// CanView reports whether the access shows the channel at all.
func (a Access) CanView() bool { return a >= Visible }

// CanReadHistory reports whether the access lets stored messages be read.
func (a Access) CanReadHistory() bool { return a == Readable }

// Access returns the user's read-time decision for a channel at now,
// computed by the engine (Hidden for non-members and unknown channels).
func (e *Engine) Access(userID, channelID snowflake.ID, now time.Time) Access {
	return AccessOf(e.Channel(userID, channelID, now))
}

// CanView reports whether the user sees the channel at now.
func (e *Engine) CanView(userID, channelID snowflake.ID, now time.Time) bool {
	return e.Access(userID, channelID, now).CanView()
}
