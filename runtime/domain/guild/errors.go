package guild

import (
	"errors"
	"fmt"
	"time"
)

// Errors returned by the guild tier, wrapped with context. The REST layer
// maps them to Discord error codes in one table.
var (
	// ErrUnknownGuild means the guild does not exist.
	ErrUnknownGuild = errors.New("guild: unknown guild")
	// ErrUnknownChannel means the channel does not exist.
	ErrUnknownChannel = errors.New("guild: unknown channel")
	// ErrUnknownRole means the role does not exist in the guild.
	ErrUnknownRole = errors.New("guild: unknown role")
	// ErrUnknownMember means the user is not a member of the guild.
	ErrUnknownMember = errors.New("guild: unknown member")
	// ErrUnknownUser means the account does not exist.
	ErrUnknownUser = errors.New("guild: unknown user")
	// ErrMissingAccess means the user cannot see the guild or channel.
	ErrMissingAccess = errors.New("guild: missing access")
	// ErrMissingPermissions means the user sees it but may not do this.
	ErrMissingPermissions = errors.New("guild: missing permissions")
	// ErrNotText means the channel cannot hold messages.
	ErrNotText = errors.New("guild: not a text channel")
	// ErrInvalid means the request's arguments are not acceptable.
	ErrInvalid = errors.New("guild: invalid request")
	// ErrSlowmode is matched by *SlowmodeError.
	ErrSlowmode = errors.New("guild: slowmode")
	// ErrUnavailable means the guild tier cannot take the request now
	// (mailbox full, store down, shutting down).
	ErrUnavailable = errors.New("guild: unavailable")
	// ErrAuthenticationFailed is returned by Identify for bad tokens.
	ErrAuthenticationFailed = errors.New("guild: authentication failed")
	// ErrInvalidIntents is returned by Identify for undefined intent bits.
	ErrInvalidIntents = errors.New("guild: invalid intents")
	// ErrInvalidShard is returned by Identify for a shard outside its count.
	ErrInvalidShard = errors.New("guild: invalid shard")
)

// SlowmodeError is returned when slowmode forbids a send; RetryAfter says
// when the user may send again.
type SlowmodeError struct {
	RetryAfter time.Duration
}

// Error describes the refusal.
func (e *SlowmodeError) Error() string {
	return fmt.Sprintf("guild: slowmode, retry after %s", e.RetryAfter)
}

// Is makes errors.Is(err, ErrSlowmode) true.
func (e *SlowmodeError) Is(target error) bool { return target == ErrSlowmode }
