package auth

import "errors"

// Errors returned by the package, wrapped with context.
var (
	// ErrInvalidToken means the token is malformed, forged, or revoked, or
	// its user no longer exists.
	ErrInvalidToken = errors.New("auth: invalid token")
	// ErrWrongPassword means a password does not match its hash.
	ErrWrongPassword = errors.New("auth: wrong password")
	// ErrBadHash means a stored password hash cannot be parsed.
	ErrBadHash = errors.New("auth: malformed password hash")
	// ErrConfig means the Config is unusable.
	ErrConfig = errors.New("auth: invalid config")
)
