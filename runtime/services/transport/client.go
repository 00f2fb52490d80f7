package transport

import (
	"log/slog"
	"time"
)

// ClientConfig configures the transport's clients. Zero fields take the
// stated defaults.
type ClientConfig struct {
	// CallTimeout bounds a guild call whose context has no deadline
	// (default 5s).
	CallTimeout time.Duration
	// MaxMsgSize bounds messages in both directions (default
	// DefaultMaxMsgSize).
	MaxMsgSize int
	// Errors is the domain part of the error table; give servers and
	// clients the same one.
	Errors []ErrorCode
	// Logger receives the client's log lines (default: discard).
	Logger *slog.Logger
}

func (cfg *ClientConfig) fill() {
	if cfg.CallTimeout <= 0 {
		cfg.CallTimeout = 5 * time.Second
	}
	if cfg.MaxMsgSize <= 0 {
		cfg.MaxMsgSize = DefaultMaxMsgSize
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
}
