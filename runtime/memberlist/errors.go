package memberlist

import "errors"

// Errors returned by subscriptions. A gateway maps none of them to a
// close: the request is clamped or the channel skipped, and the error is
// logged.
var (
	// ErrBadRange is an inverted range or one starting beyond the list.
	ErrBadRange = errors.New("memberlist: bad range")
	// ErrTooManyRanges is more ranges than Config.MaxRanges.
	ErrTooManyRanges = errors.New("memberlist: too many ranges")
	// ErrTooManyChannels is more channels in one request than
	// GuildConfig.MaxChannels.
	ErrTooManyChannels = errors.New("memberlist: too many channels")
	// ErrUnknownChannel is a channel the guild's lists do not know.
	ErrUnknownChannel = errors.New("memberlist: unknown channel")
	// ErrHiddenChannel is a channel the session's user cannot view.
	ErrHiddenChannel = errors.New("memberlist: channel not visible")
)
