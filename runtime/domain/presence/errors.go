package presence

import (
	"errors"
)

// Errors returned for client presence updates. CloseCode maps them to
// gateway close codes.
var (
	// ErrInvalid is the parent of every malformed update: an unknown
	// status, an activity too long or of an unknown type, too many
	// activities, or JSON that does not decode.
	ErrInvalid = errors.New("presence: invalid update")
	// ErrUnknownStatus is a status other than online, idle, dnd,
	// invisible or offline.
	ErrUnknownStatus = errors.New("presence: unknown status")
	// ErrBadActivity is an activity with an unknown type or a field over
	// its length limit, or more than MaxActivities activities.
	ErrBadActivity = errors.New("presence: bad activity")
	// ErrRateLimited is a session sending updates faster than its limit.
	ErrRateLimited = errors.New("presence: rate limited")
	// ErrUnknownSession is an update for a session the service does not
	// know (not connected, or already gone).
	ErrUnknownSession = errors.New("presence: unknown session")
)

// Gateway close codes used for presence errors.
const (
	CloseDecodeError = 4002
	CloseRateLimited = 4008
)

// CloseCode returns the gateway close code for an error from Update or
// ParseUpdate: 4002 (decode error) for invalid updates, 4008 (rate
// limited) for floods, 0 for errors that should not close the connection.
func CloseCode(err error) int {
	switch {
	case errors.Is(err, ErrInvalid):
		return CloseDecodeError
	case errors.Is(err, ErrRateLimited):
		return CloseRateLimited
	}
	return 0
}
