// Package httpserve builds the HTTP servers of every Concord listener with
// the same bounds, so that no client can hold a socket or a goroutine
// without limit:
//
//   - the request line and headers must arrive within ReadHeaderTimeout
//     (a connection that never finishes them is closed);
//   - a normal request's body must arrive within ReadTimeout and its
//     response be written within WriteTimeout; both are per-request
//     deadlines set through http.ResponseController, skipped for WebSocket
//     upgrades, CONNECT tunnels and event streams, which live as long as
//     their own protocol allows;
//   - a keep-alive connection may stay idle for IdleTimeout;
//   - headers are at most MaxHeaderBytes;
//   - one client address holds at most MaxConnsPerAddr connections and
//     the listener at most MaxConns (Listener), counted from accept until
//     close, so a WebSocket counts before and after its upgrade;
//   - behind a load balancer the client's address is the one the
//     balancer reports, believed only from TrustedProxies: a PROXY
//     protocol (v1 or v2) header on the connection (Listener), or the
//     X-Forwarded-For header of a request (Front); everything that keys
//     on the address (the cap above, rate limits, bans, logs) sees the
//     client rather than the balancer;
//   - errors net/http writes on its own (a malformed request line, a bad
//     escape, an unclean path's redirect, 405s) go out as Discord's JSON
//     error body instead of text/plain or text/html (Front).
//
// Use NewServer for the *http.Server and Listener for the net.Listener
// it serves.
package httpserve

import (
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/concord-chat/concord/runtime/adapters/tracing"
)

// Defaults of Config's zero fields.
const (
	DefaultReadHeaderTimeout = 10 * time.Second
	DefaultReadTimeout       = 30 * time.Second
	DefaultWriteTimeout      = 60 * time.Second
	DefaultIdleTimeout       = 120 * time.Second
	DefaultMaxHeaderBytes    = 64 << 10
	DefaultMaxConnsPerAddr   = 256
	DefaultMaxConns          = 16384
)

// Config bounds one listener. Zero fields take the defaults above; a
// negative duration or count turns that bound off (tests only).
type Config struct {
	// ReadHeaderTimeout bounds the request line and headers of each
	// request, measured from its first byte (from accept for the first).
	ReadHeaderTimeout time.Duration
	// ReadTimeout bounds reading a normal request's body, measured from
	// the end of its headers.
	ReadTimeout time.Duration
	// WriteTimeout bounds a normal request's handling and response.
	WriteTimeout time.Duration
	// IdleTimeout is how long a keep-alive connection may wait for its
	// next request.
	IdleTimeout time.Duration
	// MaxHeaderBytes caps the request line and headers.
	MaxHeaderBytes int
	// MaxConnsPerAddr caps the open connections of one remote IP address.
	MaxConnsPerAddr int
	// MaxConns caps the open connections of the listener.
	MaxConns int
	// TrustedProxies are the load balancers and proxies (IP addresses
	// or CIDR ranges) whose word about the client's address is believed.
	// A connection from one of them may open with a PROXY protocol v1 or
	// v2 header, whose source address then is the connection's remote
	// address (and the key of MaxConnsPerAddr); without a header the
	// proxy's own address counts. A request from one of them (after the
	// PROXY header, if any) may carry X-Forwarded-For, whose right-most
	// address that is not itself a trusted proxy becomes the request's
	// RemoteAddr. Anyone else's PROXY header closes the connection and
	// anyone else's X-Forwarded-For is ignored. Empty (the default)
	// trusts nobody: the peer's address is the client's.
	TrustedProxies []string
	// Logger receives net/http's own error log (TLS and accept errors,
	// handler panics) at warn level. Default slog.Default().
	Logger *slog.Logger
}

// WithDefaults returns cfg with its zero fields set to the defaults.
func (cfg Config) WithDefaults() Config {
	dur := func(p *time.Duration, def time.Duration) {
		if *p == 0 {
			*p = def
		}
	}
	num := func(p *int, def int) {
		if *p == 0 {
			*p = def
		}
	}
	dur(&cfg.ReadHeaderTimeout, DefaultReadHeaderTimeout)
	dur(&cfg.ReadTimeout, DefaultReadTimeout)
	dur(&cfg.WriteTimeout, DefaultWriteTimeout)
	dur(&cfg.IdleTimeout, DefaultIdleTimeout)
	num(&cfg.MaxHeaderBytes, DefaultMaxHeaderBytes)
	num(&cfg.MaxConnsPerAddr, DefaultMaxConnsPerAddr)
	num(&cfg.MaxConns, DefaultMaxConns)
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return cfg
}

// Validate reports a setting of cfg no listener can use: a
// TrustedProxies entry that is neither an IP address nor a CIDR range.
func (cfg Config) Validate() error {
	if _, err := ParseTrustedProxies(cfg.TrustedProxies); err != nil {
		return fmt.Errorf("httpserve: %w", err)
	}
	return nil
}

// positive returns d, or 0 (no bound) for a negative d.
func positive(d time.Duration) time.Duration { return max(d, 0) }

// NewServer returns a server for h with cfg's timeouts and header limit,
// h behind Front. It sets no server-wide ReadTimeout or WriteTimeout:
// those would cut WebSocket and streaming connections, so Front sets them
// per request instead. Serve it on Listener(l, cfg).
//
// The server speaks HTTP/1.1 and unencrypted HTTP/2 with prior knowledge
// (h2c, as a TLS-terminating proxy forwards it): an HTTP/2 client
// multiplexes its event streams and requests over one connection, which
// counts once against the connection caps. WebSocket upgrades stay on
// HTTP/1.1.
func NewServer(h http.Handler, cfg Config) *http.Server {
	cfg = cfg.WithDefaults()
	var protocols http.Protocols
	protocols.SetHTTP1(true)
	protocols.SetUnencryptedHTTP2(true)
	return &http.Server{
		Handler:           Front(tracing.Handler(h), cfg),
		ReadHeaderTimeout: positive(cfg.ReadHeaderTimeout),
		IdleTimeout:       positive(cfg.IdleTimeout),
		MaxHeaderBytes:    max(cfg.MaxHeaderBytes, 0),
		ErrorLog:          slog.NewLogLogger(cfg.Logger.Handler(), slog.LevelWarn),
		Protocols:         &protocols,
	}
}

// Serve serves srv (from NewServer) on l behind Listener(l, cfg): the
// one-line form of srv.Serve(Listener(l, cfg)).
func Serve(srv *http.Server, l net.Listener, cfg Config) error {
	return srv.Serve(Listener(l, cfg))
}
