package guild

import "errors"

// Errors of webhooks and threads, mapped to Discord's codes by the REST
// layer like the others.
var (
	// ErrWrongChannelType means the action does not apply to this type
	// of channel (Discord's 50024).
	ErrWrongChannelType = errors.New("guild: cannot execute action on this channel type")
	// ErrThreadArchived means the thread is archived (and locked, or the
	// action cannot unarchive it): Discord's 50083.
	ErrThreadArchived = errors.New("guild: thread is archived")
	// ErrUnknownThreadMember means the user has not joined the thread.
	ErrUnknownThreadMember = errors.New("guild: unknown thread member")
)

// ErrThreadExists means the message already started a thread (160004).
var ErrThreadExists = errors.New("guild: a thread was already created for this message")

// ErrThreadLocked means the thread is locked and the caller lacks
// MANAGE_THREADS (160005).
var ErrThreadLocked = errors.New("guild: thread is locked")
