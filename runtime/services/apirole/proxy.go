package apirole

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"time"

	"github.com/concord-chat/concord/runtime/adapters/registry"
	"github.com/concord-chat/concord/runtime/adapters/tracing"
	"github.com/concord-chat/concord/runtime/base/rest"
)

// Headers between API nodes and guild nodes.
const (
	// forwardedHeader marks a request an API node forwarded; a node
	// running both roles serves it from its own guild role instead of
	// forwarding it again.
	forwardedHeader = "X-Concord-Forwarded"
	// notOwnerHeader is set on the 503 a guild node answers for a guild it
	// does not own; the request was not processed, so the API node may
	// retry it on the owner.
	notOwnerHeader = "X-Concord-Not-Owner"
)

// maxProxyBody bounds request bodies the API node buffers for a retry;
// the guild node applies the REST API's own, smaller limit.
const maxProxyBody = 8 << 20

// proxy is the api role of `concord serve`: it forwards each REST request to the HTTP
// address of the guild node owning the request's guild (route.go).
//
// Retries. When the owner cannot be reached (connection refused: it died
// and the registry has not dropped it yet) the proxy waits for the ring
// to change, at most maxWait (about two lease TTLs), and sends the
// request to the new owner; a 503 marked with notOwnerHeader (the owner's
// ring and ours disagree for a moment) is retried the same way. Neither
// case reached the REST handler, so any method is safe to resend. A
// connection lost after the request was sent (the owner died while
// serving it) is retried once too, after the ring changed: the request
// may then have been applied twice (at-least-once); it carries
// retryHeader, and a message send with nonce + enforce_nonce is then
// answered with the message the dead node wrote, if any (retry.go). A request that cannot be served
// ends with 503, never with a made-up success.
type proxy struct {
	ring    *registry.LocalRing
	res     *resolver
	maxWait time.Duration
	log     *slog.Logger
	base    http.RoundTripper
	rp      *httputil.ReverseProxy
	metrics *proxyMetrics
	// maxUpload bounds an upload's body (spool.go); 0 is
	// defaultMaxUpload.
	maxUpload int64
}

type proxyCtxKey struct{}

// proxyReq is what ServeHTTP hands the transport through the context.
type proxyReq struct {
	target target
	body   *replayBody
}

func newProxy(ring *registry.LocalRing, res *resolver, maxWait time.Duration, m *proxyMetrics, log *slog.Logger) *proxy {
	p := &proxy{
		metrics: m,
		ring:    ring,
		res:     res,
		maxWait: maxWait,
		log:     log,
		base: &http.Transport{
			DialContext:         (&net.Dialer{Timeout: 2 * time.Second, KeepAlive: 15 * time.Second}).DialContext,
			MaxIdleConnsPerHost: 64,
			IdleConnTimeout:     90 * time.Second,
		},
	}
	p.rp = &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL.Scheme = "http"
			pr.Out.Host = pr.In.Host
			pr.SetXForwarded()
			pr.Out.Header.Set(forwardedHeader, "1")
			// Only this proxy marks a retry (roundTrip, on a copy): a
			// client's own header would make the guild node scan history
			// for a send that was never cut off.
			pr.Out.Header.Del(retryHeader)
		},
		// The guild node continues the request's trace.
		Transport:    tracing.Transport(roundTripFunc(p.roundTrip)),
		ErrorHandler: p.fail,
	}
	return p
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func (p *proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	maxUpload := p.maxUpload
	if maxUpload <= 0 {
		maxUpload = defaultMaxUpload
	}
	body, err := replayableBody(w, r, maxUpload)
	if err != nil {
		var tooBig *http.MaxBytesError
		if !errors.As(err, &tooBig) {
			p.log.Warn("read request body", "path", r.URL.Path, "err", err)
			writeError(w, http.StatusBadRequest, "Could not read the request body")
			return
		}
		writeTooLarge(w)
		return
	}
	defer body.Close()
	rt, err := p.res.route(r.Context(), r, body.routing())
	if err != nil {
		p.fail(w, r, err)
		return
	}
	ctx := context.WithValue(r.Context(), proxyCtxKey{}, &proxyReq{target: rt, body: body})
	p.rp.ServeHTTP(w, r.WithContext(ctx))
}

// roundTrip sends the request to the route's owner, retrying as the type
// comment says.
func (p *proxy) roundTrip(req *http.Request) (*http.Response, error) {
	pr, _ := req.Context().Value(proxyCtxKey{}).(*proxyReq)
	if pr == nil {
		return nil, errors.New("apirole: proxied request without a route")
	}
	ctx := req.Context()
	deadline := time.Now().Add(p.maxWait)
	unsafeRetried := false
	backoff := 20 * time.Millisecond
	for {
		view := p.ring.View()
		n, ok := view.Owner(pr.target.ringKey())
		if !ok || n.HTTPAddr == "" {
			if !p.awaitChange(ctx, view, deadline) {
				return nil, errNoGuildNode
			}
			continue
		}
		out := req.Clone(ctx)
		out.URL.Host = n.HTTPAddr
		if unsafeRetried {
			out.Header.Set(retryHeader, "1")
		}
		out.Body, out.ContentLength, out.GetBody = http.NoBody, 0, nil
		if pr.body.size > 0 {
			out.Body = pr.body.reader()
			out.ContentLength = pr.body.size
			out.GetBody = func() (io.ReadCloser, error) { return pr.body.reader(), nil }
		}
		resp, err := p.base.RoundTrip(out)
		switch {
		case err == nil && !(resp.StatusCode == http.StatusServiceUnavailable && resp.Header.Get(notOwnerHeader) != ""):
			return resp, nil
		case err == nil:
			// The node does not own the guild (yet): one of the two
			// rings is behind. Retry shortly; ours may change meanwhile.
			if time.Now().Add(backoff).After(deadline) {
				return resp, nil
			}
			resp.Body.Close()
			p.metrics.proxyRetries.WithLabelValues("not_owner").Inc()
			p.log.Debug("guild node is not the owner, retrying", "node", n.Name, "guild_id", pr.target.Guild)
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, 500*time.Millisecond)
			continue
		case ctx.Err() != nil:
			return nil, err
		case !isDialError(err):
			// The owner took the request and died: it may have been
			// applied. Retry once on the next owner (at-least-once).
			if unsafeRetried {
				return nil, err
			}
			unsafeRetried = true
			p.metrics.proxyRetries.WithLabelValues("lost").Inc()
			p.log.Warn("guild node lost mid-request, retrying once on the next owner",
				"node", n.Name, "method", req.Method, "path", req.URL.Path, "err", err)
			// Only a different owner may take the one retry.
			for {
				if next, ok := p.ring.Owner(pr.target.ringKey()); ok && (next.Name != n.Name || next.HTTPAddr != n.HTTPAddr) {
					break
				}
				if !p.awaitChange(ctx, view, deadline) {
					return nil, err
				}
				view = p.ring.View()
			}
			continue
		default:
			p.metrics.proxyRetries.WithLabelValues("unreachable").Inc()
			p.log.Info("guild node unreachable, waiting for the ring", "node", n.Name, "err", err)
		}
		if !p.awaitChange(ctx, view, deadline) {
			return nil, err
		}
	}
}

// awaitChange waits until the ring is newer than seen, the deadline passes
// (false) or ctx ends (false).
func (p *proxy) awaitChange(ctx context.Context, seen *registry.View, deadline time.Time) bool {
	wctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	changes := p.ring.Changes(wctx)
	if p.ring.View() != seen {
		return true
	}
	select {
	case _, ok := <-changes:
		return ok && wctx.Err() == nil
	case <-wctx.Done():
		return false
	}
}

// isDialError reports whether err happened before the request reached
// the server (the connection could not be opened).
func isDialError(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

var errNoGuildNode = errors.New("apirole: no live guild node")

// fail answers a request the proxy could not forward with a 503 in
// Discord's error shape.
func (p *proxy) fail(w http.ResponseWriter, r *http.Request, err error) {
	p.metrics.proxyFailures.Inc()
	p.log.Warn("request not forwarded", "method", r.Method, "path", r.URL.Path, "err", err)
	writeError(w, http.StatusServiceUnavailable, "Service unavailable: guild node unreachable")
}

// writeTooLarge answers Discord's 413 for a body over the limits.
func writeTooLarge(w http.ResponseWriter) {
	rest.WriteError(w, &rest.Error{Status: http.StatusRequestEntityTooLarge, Code: 40005, Message: "Request entity too large"})
}

// writeError answers status with msg in Discord's error shape.
func writeError(w http.ResponseWriter, status int, msg string) {
	rest.WriteError(w, &rest.Error{Status: status, Message: msg})
}
