// Package ratelimit enforces Concord's REST API limits: limits per route
// bucket that tell the client exactly what to do, a global ceiling per bot,
// and timed bans that escalate only for clients that keep sending invalid
// requests.
//
// A request is limited as a Principal (the bot or user its token names, or
// its address when it has none) in three steps:
//
//  1. Bans. A token or client address that sent Config.InvalidLimit invalid
//     requests (responses 401, 403 and 429, except 429s of scope "shared")
//     within Config.InvalidWindow is banned for Config.BanDuration: every
//     request gets a global 429 until the ban runs out.
//  2. Route bucket. The route template and its major parameter (channel_id,
//     guild_id, webhook_id+token; see Template) pick a bucket with the
//     route's Limit (DefaultRoutes, else Config.DefaultLimit). Different
//     channels never share a bucket.
//  3. Global. All of a principal's requests share Config.GlobalBot (50/s)
//     or Config.GlobalUser per second, except interaction routes
//     (Config.GlobalExempt). A request the global limit refuses has
//     already spent its route token.
//
// Every response carries X-RateLimit-Limit, -Remaining, -Reset (epoch
// seconds, fractional), -Reset-After (seconds, fractional) and -Bucket (an
// opaque hash of the bucket's name, without the major parameter, as
// Discord's). A 429 carries the JSON body Discord clients parse,
// Retry-After, Via (discord.py takes a 429 without it for a proxy ban),
// X-RateLimit-Scope, and X-RateLimit-Global when the global limit or a ban
// refused it.
//
// Counts live behind the counters port (counters/redis in production,
// counters/mem in `concord dev`). They are approximate by contract: a lost
// counter lets a client briefly exceed its limit (at most one extra burst per
// bucket, one more window of invalid requests before a ban) and a lost ban
// ends early. If the counters cannot be reached the limiter fails open: the
// request is served, the error is logged and counted in
// concord_ratelimit_counter_errors_total. Refusing every request while Redis
// is down would turn a counters outage into an API outage.
package ratelimit

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/concord-chat/concord/runtime/adapters/counters"
	"github.com/concord-chat/concord/runtime/base/clock"
)

// Principal is who a request is limited as.
type Principal struct {
	// ID names the principal in counter keys: the application or user id.
	ID string
	// Bot selects the global limit: Config.GlobalBot for bots,
	// Config.GlobalUser otherwise.
	Bot bool
}

// Scope is the X-RateLimit-Scope of a 429.
type Scope string

// Scopes of a 429, as Discord names them.
const (
	// ScopeUser is a limit of the principal's own: a route bucket.
	ScopeUser Scope = "user"
	// ScopeGlobal is the principal's global limit, or a ban.
	ScopeGlobal Scope = "global"
	// ScopeShared is a limit of a resource shared by many principals. The
	// limiter never issues it; a handler that does is not counted against
	// the client's invalid requests.
	ScopeShared Scope = "shared"
)

// Config configures a Limiter.
type Config struct {
	// Counters holds buckets, invalid-request tallies and bans. Required.
	Counters counters.Counters
	// Routes maps "METHOD template" (templates as Template writes them) to
	// the route's Limit. Default DefaultRoutes().
	Routes map[string]Limit
	// DefaultLimit applies to every route not in Routes. Default 50 per
	// second.
	DefaultLimit Limit
	// GlobalBot is how many requests a bot may make per GlobalWindow across
	// all routes. Default 50.
	GlobalBot int
	// GlobalUser is the same for user accounts and unauthenticated
	// clients. Default 50.
	GlobalUser int
	// GlobalWindow is the global limit's window. Default 1s.
	GlobalWindow time.Duration
	// GlobalExempt reports routes the global limit does not apply to.
	// Default InteractionRoute.
	GlobalExempt func(template string) bool
	// InvalidLimit is how many invalid requests (401, 403, non-shared 429)
	// a token or address may cause per InvalidWindow before it is banned.
	// Default 10,000, Discord's figure.
	InvalidLimit int
	// InvalidWindow is the fixed window invalid requests are counted in.
	// Default 10 minutes.
	InvalidWindow time.Duration
	// BanDuration is how long a ban lasts. Default 1 hour.
	BanDuration time.Duration
	// RouteOf returns the route template and major parameter of a request.
	// Default PathRoute.
	RouteOf func(*http.Request) (template, major string)
	// ClientAddr returns the client's address, the key of unauthenticated
	// limits and of address bans. Default: the host of r.RemoteAddr,
	// which runtime/edge/httpserve has already set to the client's address
	// when the request came through a trusted proxy (its PROXY header or
	// X-Forwarded-For, --trusted-proxies), so one client behind a load
	// balancer is limited and banned without its neighbours.
	ClientAddr func(*http.Request) string
	// Now is the clock. Default clock.Now (runtime/base/clock).
	Now func() time.Time
	// Logger receives diagnostics. Default slog.Default().
	Logger *slog.Logger
	// Registerer receives metrics. Nil registers nothing.
	Registerer prometheus.Registerer
}

// Limiter applies the limits of its Config. It is safe for concurrent use.
type Limiter struct {
	cfg    Config
	routes map[string]route
	m      metrics
	// lastErrLog is when a counters failure was last logged, unix ns.
	lastErrLog atomic.Int64
}

// route is a Limit with its names worked out once.
type route struct {
	Limit
	hash string
}

// New validates cfg, fills its defaults and returns a Limiter.
func New(cfg Config) (*Limiter, error) {
	if cfg.Counters == nil {
		return nil, fmt.Errorf("%w: Counters is required", ErrInvalidConfig)
	}
	if cfg.Routes == nil {
		cfg.Routes = DefaultRoutes()
	}
	if cfg.DefaultLimit == (Limit{}) {
		cfg.DefaultLimit = Limit{Requests: 50, Window: time.Second}
	}
	if cfg.GlobalBot == 0 {
		cfg.GlobalBot = 50
	}
	if cfg.GlobalUser == 0 {
		cfg.GlobalUser = 50
	}
	if cfg.GlobalWindow == 0 {
		cfg.GlobalWindow = time.Second
	}
	if cfg.GlobalExempt == nil {
		cfg.GlobalExempt = InteractionRoute
	}
	if cfg.InvalidLimit == 0 {
		cfg.InvalidLimit = 10_000
	}
	if cfg.InvalidWindow == 0 {
		cfg.InvalidWindow = 10 * time.Minute
	}
	if cfg.BanDuration == 0 {
		cfg.BanDuration = time.Hour
	}
	if cfg.RouteOf == nil {
		cfg.RouteOf = PathRoute
	}
	if cfg.ClientAddr == nil {
		cfg.ClientAddr = RemoteHost
	}
	if cfg.Now == nil {
		cfg.Now = clock.Now // buckets are shared by the api nodes
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.GlobalBot < 1 || cfg.GlobalUser < 1 || cfg.GlobalWindow < time.Millisecond ||
		cfg.InvalidLimit < 1 || cfg.InvalidWindow < time.Millisecond || cfg.BanDuration < time.Millisecond {
		return nil, fmt.Errorf("%w: global limits, invalid-request limit and durations must be positive", ErrInvalidConfig)
	}
	if err := checkLimit("DefaultLimit", cfg.DefaultLimit); err != nil {
		return nil, err
	}
	l := &Limiter{cfg: cfg, routes: make(map[string]route, len(cfg.Routes))}
	for name, lim := range cfg.Routes {
		if err := checkLimit(name, lim); err != nil {
			return nil, err
		}
		if lim.Bucket == "" {
			lim.Bucket = name
		}
		l.routes[name] = route{Limit: lim, hash: bucketHash(lim.Bucket)}
	}
	if err := l.m.init(cfg.Registerer); err != nil {
		return nil, err
	}
	return l, nil
}

func checkLimit(name string, lim Limit) error {
	if lim.Requests < 1 || lim.Window < time.Millisecond {
		return fmt.Errorf("%w: route %q: limit %d per %v", ErrInvalidConfig, name, lim.Requests, lim.Window)
	}
	return nil
}

// RemoteHost returns the host part of r.RemoteAddr (all of it if it has no
// port); it is the default Config.ClientAddr.
func RemoteHost(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// Request is one API call as the limiter sees it.
type Request struct {
	Principal Principal
	// Method and Route (a template) pick the route's Limit; Major splits
	// its bucket.
	Method, Route, Major string
	// Token is the credential the client presented, "" if none. It is
	// only digested, never stored.
	Token string
	// Addr is the client's address.
	Addr string
	// Body is the request body when the route's Limit has OnlyFields (the
	// middleware fills it); nil otherwise.
	Body []byte
}

// Result is the limiter's answer for one Request.
type Result struct {
	// Allowed reports whether the request may proceed.
	Allowed bool
	// Scope says which limit refused it; empty when allowed.
	Scope Scope
	// Global is true when the global limit or a ban refused it.
	Global bool
	// Banned is true when a ban refused it.
	Banned bool
	// Bucket is the opaque X-RateLimit-Bucket of the route.
	Bucket string
	// Limit, Remaining, ResetAfter describe the route bucket.
	Limit, Remaining int
	ResetAfter       time.Duration
	// RetryAfter is when to retry a refused request.
	RetryAfter time.Duration
	// Now is when the decision was taken; Reset is Now + ResetAfter.
	Now time.Time
}

// Check decides whether req may proceed and takes the tokens it uses. It
// never fails: when the counters cannot answer it allows the request (see
// the package doc).
func (l *Limiter) Check(ctx context.Context, req Request) Result {
	now := l.cfg.Now()
	rt := l.route(req.Method, req.Route)
	if rt.OnlyFields != "" && !hasField(req.Body, rt.OnlyFields) {
		rt = l.defaultRoute(req.Method + " " + req.Route + " (other)")
	}
	res := Result{Now: now, Bucket: rt.hash, Limit: rt.Requests, Remaining: rt.Requests - 1,
		ResetAfter: rt.Window / time.Duration(rt.Requests)}

	tokenKey, addrKey := l.principalKeys(req)
	keys := make([]string, 0, 2)
	for _, k := range [...]string{tokenKey, addrKey} {
		if k != "" {
			keys = append(keys, k)
		}
	}
	if left, err := l.cfg.Counters.Banned(ctx, keys...); err != nil {
		l.counterError(ctx, "banned", err)
	} else if left > 0 {
		l.m.requests.WithLabelValues("banned").Inc()
		res.Scope, res.Global, res.Banned, res.Remaining, res.RetryAfter = ScopeGlobal, true, true, 0, left
		return res
	}

	d, err := l.cfg.Counters.Take(ctx, "rl:"+rt.hash+":"+req.Principal.ID+":"+req.Major, rt.Requests, rt.Window, now)
	if err != nil {
		l.counterError(ctx, "take", err)
		res.Allowed = true
		return res
	}
	res.Remaining, res.ResetAfter, res.RetryAfter = d.Remaining, d.ResetAfter, d.RetryAfter
	if !d.Allowed {
		l.m.requests.WithLabelValues("route_limited").Inc()
		res.Scope = ScopeUser
		return res
	}
	if !l.cfg.GlobalExempt(req.Route) {
		limit := l.cfg.GlobalUser
		if req.Principal.Bot {
			limit = l.cfg.GlobalBot
		}
		g, err := l.cfg.Counters.Take(ctx, "gl:"+req.Principal.ID, limit, l.cfg.GlobalWindow, now)
		if err != nil {
			l.counterError(ctx, "take", err)
		} else if !g.Allowed {
			l.m.requests.WithLabelValues("global_limited").Inc()
			res.Scope, res.Global, res.RetryAfter = ScopeGlobal, true, g.RetryAfter
			return res
		}
	}
	l.m.requests.WithLabelValues("allowed").Inc()
	res.Allowed = true
	return res
}

// Report counts the response to req: a 401, a 403 or a 429 whose scope is
// not "shared" is an invalid request for its token and its address, and
// each one at or beyond Config.InvalidLimit within the window bans them for
// Config.BanDuration. The 429s a ban itself causes are not counted, so a ban
// is not prolonged by the requests it refuses; an offender who goes on after
// it ends, within the same window, is banned again at once.
func (l *Limiter) Report(ctx context.Context, req Request, status int, scope Scope) {
	switch {
	case status == http.StatusUnauthorized, status == http.StatusForbidden:
	case status == http.StatusTooManyRequests && scope != ScopeShared:
	default:
		return
	}
	l.m.invalid.Inc()
	tokenKey, addrKey := l.principalKeys(req)
	for _, k := range [...]struct{ key, kind string }{{tokenKey, "token"}, {addrKey, "address"}} {
		if k.key == "" {
			continue
		}
		n, err := l.cfg.Counters.Incr(ctx, "inv:"+k.key, 1, l.cfg.InvalidWindow)
		if err != nil {
			l.counterError(ctx, "incr", err)
			continue
		}
		if n < int64(l.cfg.InvalidLimit) {
			continue
		}
		if err := l.cfg.Counters.Ban(ctx, k.key, l.cfg.BanDuration); err != nil {
			l.counterError(ctx, "ban", err)
			continue
		}
		l.m.bans.WithLabelValues(k.kind).Inc()
		l.cfg.Logger.WarnContext(ctx, "client banned for invalid requests", "kind", k.kind,
			"principal", req.Principal.ID, "addr", req.Addr, "invalid", n, "window", l.cfg.InvalidWindow, "ban", l.cfg.BanDuration)
	}
}

// principalKeys returns the ban and tally keys of req's token and address;
// either is empty when req has none.
func (l *Limiter) principalKeys(req Request) (tokenKey, addrKey string) {
	if req.Token != "" {
		tokenKey = "t:" + digest(req.Token)
	}
	if req.Addr != "" {
		addrKey = "a:" + req.Addr
	}
	return tokenKey, addrKey
}

func (l *Limiter) route(method, template string) route {
	name := method + " " + template
	if rt, ok := l.routes[name]; ok {
		return rt
	}
	return l.defaultRoute(name)
}

// defaultRoute is Config.DefaultLimit as the bucket name.
func (l *Limiter) defaultRoute(name string) route {
	lim := l.cfg.DefaultLimit
	if lim.Bucket == "" {
		lim.Bucket = name
	}
	return route{Limit: lim, hash: bucketHash(lim.Bucket)}
}

// counterError counts a failed counters call and logs it, at most once a
// second so an outage does not flood the log.
func (l *Limiter) counterError(ctx context.Context, op string, err error) {
	l.m.counterErrors.WithLabelValues(op).Inc()
	now := l.cfg.Now().UnixNano()
	last := l.lastErrLog.Load()
	if now-last < int64(time.Second) || !l.lastErrLog.CompareAndSwap(last, now) {
		return
	}
	l.cfg.Logger.ErrorContext(ctx, "rate limit counters failed, allowing the request", "op", op, "err", err)
}
