package memberlist

import "errors"

// Errors. ErrBadRequest (an op 14 or op 8 that does not decode) closes the
// connection with 4002; for the others the request is clamped or the
// channel skipped, and the error is logged.
var (
	// ErrBadRequest is an op 14 or op 8 payload that does not decode or
	// breaks the protocol's rules.
	ErrBadRequest = errors.New("memberlist: bad request")
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
