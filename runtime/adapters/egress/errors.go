package egress

import "errors"

// Sentinel errors. Every error the Client returns for a request wraps one of
// them or the transport's own error, and names the URL (the redirect hop's,
// when a hop failed).
var (
	// ErrForbiddenAddress means the URL's host is, or resolves to, an
	// address egress must never connect to (loopback, private, link-local,
	// metadata, ...), or is a numeric host in a non-canonical form.
	ErrForbiddenAddress = errors.New("egress: forbidden address")
	// ErrInvalidURL means the URL cannot be fetched at all: not http or
	// https, no host, or credentials in it.
	ErrInvalidURL = errors.New("egress: invalid url")
	// ErrTooManyRedirects means the redirect chain was longer than
	// Config.MaxRedirects.
	ErrTooManyRedirects = errors.New("egress: too many redirects")
	// ErrResponseTooLarge means the response body exceeded Config.MaxBytes.
	ErrResponseTooLarge = errors.New("egress: response too large")
	// ErrTimeout means the request, including reading its body, took longer
	// than Config.Timeout or its context's deadline.
	ErrTimeout = errors.New("egress: timeout")
	// ErrInvalidConfig reports a Config that New cannot use.
	ErrInvalidConfig = errors.New("egress: invalid config")
)
