// Package egress is the one way Concord calls URLs a bot chose: interaction
// endpoints, webhooks, embed and avatar fetches. Everything such a
// URL names is hostile: the Client resolves the host itself, refuses
// loopback, private, link-local, CGNAT, metadata, multicast and reserved
// addresses (and the IPv6 forms that carry them, see Denied) at connect
// time, re-checks every redirect hop, and caps the time and size of every
// response.
//
// The address validated is the address dialled: names are resolved by the
// Client, every resolved address is checked, and the dialer connects to
// those literal addresses, re-checking each in its Control hook just before
// connect(2). A DNS answer that changes between a check and a connect
// (rebinding) cannot slip through, and no proxy from the environment is
// used. With Config.Proxy the same checks run in the egress deployment's
// Proxy instead, and the Client dials only that proxy. A name that resolves to any forbidden address is refused outright.
//
// This library is the second line. The first is topology: the chart runs
// egress as its own deployment whose NetworkPolicy denies every in-cluster
// and private destination, so a bug here still cannot reach the platform.
//
// Tests that need a local bot endpoint set Config.AllowPrivate to the exact
// prefixes (127.0.0.1/32); New logs a WARN naming them. There is no
// default allowlist and no flag that turns validation off.
package egress

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Resolver looks up the addresses of a host name. *net.Resolver
// implements it; tests substitute their own.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// Config configures a Client.
type Config struct {
	// AllowPrivate exempts these prefixes from the deny list. It is for
	// tests that run a bot endpoint on loopback, must name exact prefixes
	// and is logged at WARN by New. Default none; never set it in
	// production.
	AllowPrivate []netip.Prefix
	// Timeout bounds a whole request: resolving, connecting, every
	// redirect, and reading the body. A shorter context deadline wins.
	// Default 10s.
	Timeout time.Duration
	// DialTimeout bounds one connection attempt. Default 5s.
	DialTimeout time.Duration
	// MaxBytes caps a response body; reading past it fails with
	// ErrResponseTooLarge. Default 8 MiB.
	MaxBytes int64
	// MaxRedirects is how many redirects a request may follow. Default 5;
	// negative follows none (the 3xx response is returned as is).
	MaxRedirects int
	// Resolver resolves host names. Default a pure-Go *net.Resolver.
	Resolver Resolver
	// UserAgent is sent when the request sets none. Default
	// "Concord-Egress/1 (+bot platform)".
	UserAgent string
	// Logger receives diagnostics. Default slog.Default().
	Logger *slog.Logger
	// Registerer receives metrics. Nil registers nothing.
	Registerer prometheus.Registerer
	// Proxy, when set, is the egress deployment (`concord egress`, an
	// http:// URL): every request goes through it and it does the
	// resolving and address checks at connect time; the Client then dials
	// nothing but the proxy. URL checks (scheme, literal addresses) still
	// run here first, and the proxy's refusals come back as this package's
	// errors.
	Proxy *url.URL
}

// Client performs HTTP requests to untrusted URLs. It is safe for
// concurrent use and keeps connections alive between requests.
type Client struct {
	cfg    Config
	http   *http.Client
	dialer *net.Dialer
	m      metrics
}

// New validates cfg, fills its defaults and returns a Client.
func New(cfg Config) (*Client, error) {
	if cfg.Timeout == 0 {
		cfg.Timeout = 10 * time.Second
	}
	if cfg.DialTimeout == 0 {
		cfg.DialTimeout = 5 * time.Second
	}
	if cfg.MaxBytes == 0 {
		cfg.MaxBytes = 8 << 20
	}
	if cfg.MaxRedirects == 0 {
		cfg.MaxRedirects = 5
	}
	if cfg.Resolver == nil {
		cfg.Resolver = &net.Resolver{PreferGo: true}
	}
	if cfg.UserAgent == "" {
		cfg.UserAgent = "Concord-Egress/1 (+bot platform)"
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Timeout < 0 || cfg.DialTimeout < 0 || cfg.MaxBytes < 0 {
		return nil, fmt.Errorf("%w: negative Timeout, DialTimeout or MaxBytes", ErrInvalidConfig)
	}
	for _, p := range cfg.AllowPrivate {
		if !p.IsValid() {
			return nil, fmt.Errorf("%w: AllowPrivate has an invalid prefix", ErrInvalidConfig)
		}
	}
	if len(cfg.AllowPrivate) > 0 {
		names := make([]string, len(cfg.AllowPrivate))
		for i, p := range cfg.AllowPrivate {
			names[i] = p.String()
		}
		cfg.Logger.Warn("egress allowlist active: private addresses reachable, for tests only", "allow_private", strings.Join(names, ","))
	}
	c := &Client{cfg: cfg}
	if err := c.m.init(cfg.Registerer); err != nil {
		return nil, err
	}
	c.dialer = &net.Dialer{Timeout: cfg.DialTimeout, KeepAlive: 30 * time.Second, Control: c.control}
	transport := &http.Transport{
		Proxy:                  nil, // never a proxy from the environment: it would dial for us
		DialContext:            c.dialContext,
		ForceAttemptHTTP2:      true,
		MaxIdleConns:           256,
		MaxIdleConnsPerHost:    4,
		IdleConnTimeout:        90 * time.Second,
		TLSHandshakeTimeout:    cfg.DialTimeout,
		ResponseHeaderTimeout:  cfg.Timeout,
		ExpectContinueTimeout:  time.Second,
		MaxResponseHeaderBytes: 64 << 10,
	}
	c.http = &http.Client{Transport: transport, CheckRedirect: c.checkRedirect}
	if cfg.Proxy != nil {
		rt, err := c.viaProxy(transport, cfg.Proxy)
		if err != nil {
			return nil, err
		}
		c.http.Transport = rt
	}
	return c, nil
}

// Get fetches rawURL.
func (c *Client) Get(ctx context.Context, rawURL string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, rawURL, nil)
	if err != nil {
		return nil, fmt.Errorf("%w: %q: %v", ErrInvalidURL, rawURL, err)
	}
	return c.Do(req)
}

// Do sends req, following redirects, within Config.Timeout. Hop-by-hop and
// identity headers (Authorization, Cookie, Forwarded, X-Forwarded-*,
// X-Real-IP, Proxy-*, Connection, ...) are removed from it first: nothing
// of the platform's or its callers' identity reaches a bot. The caller
// closes the returned body; reading it fails with ErrResponseTooLarge past
// Config.MaxBytes and ErrTimeout past the deadline. Errors wrap this
// package's sentinels and name the URL.
func (c *Client) Do(req *http.Request) (*http.Response, error) {
	start := time.Now()
	if err := c.checkURL(req.URL); err != nil {
		return nil, c.fail(req.Method, req.URL.String(), err)
	}
	ctx, cancel := context.WithTimeout(req.Context(), c.cfg.Timeout)
	out := req.Clone(ctx)
	stripHeaders(out.Header)
	if out.Header.Get("User-Agent") == "" {
		out.Header.Set("User-Agent", c.cfg.UserAgent)
	}
	resp, err := c.http.Do(out)
	if err != nil {
		cancel()
		target := req.URL.String()
		var ue *url.Error
		if errors.As(err, &ue) {
			target, err = ue.URL, ue.Err
		}
		return nil, c.fail(req.Method, target, err)
	}
	target := resp.Request.URL.String()
	if resp.ContentLength > c.cfg.MaxBytes {
		resp.Body.Close()
		cancel()
		return nil, c.fail(req.Method, target, fmt.Errorf("%w: Content-Length %d > %d bytes", ErrResponseTooLarge, resp.ContentLength, c.cfg.MaxBytes))
	}
	resp.Body = &body{rc: resp.Body, left: c.cfg.MaxBytes, c: c, method: req.Method, url: target, cancel: cancel}
	c.m.requests.WithLabelValues("ok").Inc()
	c.m.duration.Observe(time.Since(start).Seconds())
	return resp, nil
}

// checkURL refuses what can never be fetched, and numeric hosts that are
// denied or non-canonical, before anything is dialled.
func (c *Client) checkURL(u *url.URL) error {
	if u.Scheme != "http" && u.Scheme != "https" {
		return fmt.Errorf("%w: scheme %q (only http and https)", ErrInvalidURL, u.Scheme)
	}
	if u.User != nil {
		return fmt.Errorf("%w: credentials in the url", ErrInvalidURL)
	}
	host := u.Hostname()
	if host == "" {
		return fmt.Errorf("%w: no host", ErrInvalidURL)
	}
	if port := u.Port(); port != "" {
		if n, err := net.LookupPort("tcp", port); err != nil || n < 1 {
			return fmt.Errorf("%w: port %q", ErrInvalidURL, port)
		}
	}
	addr, literal, noncanonical := parseHost(host)
	if noncanonical {
		return c.denied(netip.Addr{}, host, ReasonNonCanonical)
	}
	if literal {
		return c.allowed(addr, host)
	}
	return nil
}

// checkRedirect is http.Client.CheckRedirect: a bounded chain of http(s)
// hops, each checked like the first (its address is checked again when it
// is dialled). Identity headers Go would copy to the next hop are dropped.
func (c *Client) checkRedirect(req *http.Request, via []*http.Request) error {
	if c.cfg.MaxRedirects < 0 {
		return http.ErrUseLastResponse
	}
	if len(via) > c.cfg.MaxRedirects {
		return fmt.Errorf("%w: more than %d", ErrTooManyRedirects, c.cfg.MaxRedirects)
	}
	if err := c.checkURL(req.URL); err != nil {
		return err
	}
	stripHeaders(req.Header)
	return nil
}

// dialContext resolves address's host, checks every address it resolves
// to and dials the checked literals in turn.
func (c *Client) dialContext(ctx context.Context, network, address string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(address)
	if err != nil {
		return nil, fmt.Errorf("%w: %q: %v", ErrInvalidURL, address, err)
	}
	addrs, err := c.resolve(ctx, host)
	if err != nil {
		return nil, err
	}
	var lastErr error
	for _, a := range addrs {
		conn, err := c.dialer.DialContext(ctx, network, net.JoinHostPort(a.String(), port))
		if err == nil {
			return conn, nil
		}
		if errors.Is(err, ErrForbiddenAddress) || ctx.Err() != nil {
			return nil, err
		}
		lastErr = err
	}
	return nil, lastErr
}

// resolve returns the addresses to dial for host, all of them allowed.
func (c *Client) resolve(ctx context.Context, host string) ([]netip.Addr, error) {
	addr, literal, noncanonical := parseHost(host)
	if noncanonical {
		return nil, c.denied(netip.Addr{}, host, ReasonNonCanonical)
	}
	if literal {
		if err := c.allowed(addr, host); err != nil {
			return nil, err
		}
		return []netip.Addr{addr}, nil
	}
	addrs, err := c.cfg.Resolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return nil, fmt.Errorf("egress: resolve %q: %w", host, err)
	}
	if len(addrs) == 0 {
		return nil, fmt.Errorf("egress: resolve %q: no addresses", host)
	}
	for _, a := range addrs {
		if err := c.allowed(a, host); err != nil {
			return nil, err
		}
	}
	return addrs, nil
}

// control runs just before connect(2) on the address actually dialled.
func (c *Client) control(network, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return c.denied(netip.Addr{}, address, ReasonUnspecified)
	}
	return c.allowed(ap.Addr(), address)
}

// allowed checks addr against the deny list and the allowlist.
func (c *Client) allowed(addr netip.Addr, host string) error {
	reason, denied := Denied(addr)
	if !denied {
		return nil
	}
	for _, p := range c.cfg.AllowPrivate {
		if p.Contains(addr) || (addr.Is4In6() && p.Contains(addr.Unmap())) {
			return nil
		}
	}
	return c.denied(addr, host, reason)
}

func (c *Client) denied(addr netip.Addr, host, reason string) error {
	c.m.denials.WithLabelValues(reason).Inc()
	if addr.IsValid() && addr.String() != host {
		return fmt.Errorf("%w: %s resolves to %s (%s)", ErrForbiddenAddress, host, addr, reason)
	}
	return fmt.Errorf("%w: %s (%s)", ErrForbiddenAddress, host, reason)
}

// fail classifies err, counts it and names the request.
func (c *Client) fail(method, target string, err error) error {
	res := result(err)
	if res == "timeout" && !errors.Is(err, ErrTimeout) {
		err = fmt.Errorf("%w: %v", ErrTimeout, err)
	}
	c.m.requests.WithLabelValues(res).Inc()
	return fmt.Errorf("egress: %s %s: %w", method, target, err)
}

func isTimeout(err error) bool {
	if errors.Is(err, ErrTimeout) || errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// stripped are the request headers egress never forwards: hop-by-hop
// headers (RFC 9110 §7.6.1) and anything that identifies the platform, a
// user or the path a request took.
var stripped = []string{
	"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate", "Proxy-Authorization",
	"Te", "Trailer", "Transfer-Encoding", "Upgrade",
	"Authorization", "Cookie", "Forwarded", "Via", "X-Forwarded-For", "X-Forwarded-Host",
	"X-Forwarded-Proto", "X-Real-Ip", "X-Client-Ip", "True-Client-Ip", "Cf-Connecting-Ip",
}

func stripHeaders(h http.Header) {
	for _, name := range h.Values("Connection") {
		for _, f := range strings.Split(name, ",") {
			h.Del(strings.TrimSpace(f))
		}
	}
	for _, name := range stripped {
		h.Del(name)
	}
}

// body caps and times a response body.
type body struct {
	rc     io.ReadCloser
	left   int64
	c      *Client
	method string
	url    string
	cancel context.CancelFunc
	failed bool
}

func (b *body) Read(p []byte) (int, error) {
	if b.left < 0 {
		return 0, b.fail(fmt.Errorf("%w: more than %d bytes", ErrResponseTooLarge, b.c.cfg.MaxBytes))
	}
	// Read one byte beyond the cap, so a body of exactly MaxBytes ends
	// cleanly and a longer one is caught.
	if int64(len(p)) > b.left+1 {
		p = p[:b.left+1]
	}
	n, err := b.rc.Read(p)
	b.left -= int64(n)
	if b.left < 0 {
		return n + int(b.left), b.fail(fmt.Errorf("%w: more than %d bytes", ErrResponseTooLarge, b.c.cfg.MaxBytes))
	}
	if err != nil && err != io.EOF {
		return n, b.fail(err)
	}
	return n, err
}

// fail classifies a body error, counts it once, and names the request.
func (b *body) fail(err error) error {
	res := result(err)
	if res == "timeout" && !errors.Is(err, ErrTimeout) {
		err = fmt.Errorf("%w: %v", ErrTimeout, err)
	}
	if !b.failed {
		b.failed = true
		b.c.m.bodyErrors.WithLabelValues(res).Inc()
	}
	return fmt.Errorf("egress: %s %s: reading body: %w", b.method, b.url, err)
}

func (b *body) Close() error {
	err := b.rc.Close()
	b.cancel()
	return err
}
