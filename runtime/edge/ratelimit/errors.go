package ratelimit

import "errors"

// ErrInvalidConfig reports a Config that New cannot use.
var ErrInvalidConfig = errors.New("ratelimit: invalid config")
