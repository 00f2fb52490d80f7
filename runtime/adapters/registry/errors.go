package registry

import "errors"

// Errors returned by Registry implementations, wrapped with context.
var (
	// ErrNotFound means the key or node does not exist.
	ErrNotFound = errors.New("registry: not found")
	// ErrExists means a live node already has the name.
	ErrExists = errors.New("registry: node already registered")
	// ErrInvalid means an argument is malformed (empty name, bad key).
	ErrInvalid = errors.New("registry: invalid argument")
	// ErrClosed means the Registry was closed.
	ErrClosed = errors.New("registry: closed")
)
