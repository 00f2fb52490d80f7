package egress

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// ErrorHeader is the response header in which a Proxy names why it refused
// or failed a request (forbidden, invalid_url, timeout, too_large, error).
// A Client sending through a proxy turns it back into this package's
// sentinel errors, so callers see the same errors with or without one.
const ErrorHeader = "Concord-Egress-Error"

// tunnelOverhead is what a CONNECT tunnel may carry downstream beyond
// MaxBytes: TLS handshake, certificates and record framing.
const tunnelOverhead = 256 << 10

// ProxyConfig configures a Proxy.
type ProxyConfig struct {
	// Client holds the validation, caps and timeouts applied to every
	// destination (see Config). MaxRedirects is ignored: the proxy never
	// follows a redirect, it returns it to its caller, whose next request
	// through the proxy is checked again.
	Client Config
	// ConnectPorts are the ports a CONNECT tunnel may reach. Default 443.
	ConnectPorts []int
}

// Proxy is the egress deployment's server (`concord egress`): an HTTP
// forward proxy that the pods of the platform send their calls to
// bot-chosen URLs through. CONNECT tunnels (https) and absolute-form
// requests (http) are checked exactly like the Client checks them: the
// destination is resolved by the proxy, every address is validated at
// connect time, time and bytes are capped. Other requests are passed to
// the handler given to Handler (health and metrics).
//
// The proxy is the platform's second process boundary around hostile URLs:
// its pods run with a NetworkPolicy that allows only public destinations,
// and the pods that run bots have no route to the internet but this.
type Proxy struct {
	c       *Client
	ports   map[int]bool
	log     *slog.Logger
	results *prometheus.CounterVec
	tunnels prometheus.Gauge
	wg      sync.WaitGroup
}

// NewProxy validates cfg and returns a Proxy. Its metrics (and the
// Client's) are registered on cfg.Client.Registerer.
func NewProxy(cfg ProxyConfig) (*Proxy, error) {
	cc := cfg.Client
	cc.MaxRedirects = -1
	if cc.Proxy != nil {
		return nil, fmt.Errorf("%w: a proxy does not chain to another proxy", ErrInvalidConfig)
	}
	c, err := New(cc)
	if err != nil {
		return nil, err
	}
	p := &Proxy{c: c, ports: map[int]bool{}, log: c.cfg.Logger}
	if len(cfg.ConnectPorts) == 0 {
		cfg.ConnectPorts = []int{443}
	}
	for _, port := range cfg.ConnectPorts {
		if port < 1 || port > 65535 {
			return nil, fmt.Errorf("%w: CONNECT port %d", ErrInvalidConfig, port)
		}
		p.ports[port] = true
	}
	p.results = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "concord_egress_proxy_requests_total",
		Help: "Requests served by the egress proxy, by kind (connect, forward) and result (ok, forbidden, invalid_url, timeout, too_large, error)."},
		[]string{"kind", "result"})
	p.tunnels = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "concord_egress_proxy_tunnels", Help: "Open CONNECT tunnels."})
	if reg := cc.Registerer; reg != nil {
		for _, col := range []prometheus.Collector{p.results, p.tunnels} {
			if err := reg.Register(col); err != nil {
				return nil, fmt.Errorf("egress: register proxy metrics: %w", err)
			}
		}
	}
	return p, nil
}

// Handler serves proxy requests and passes every other request (origin-form:
// /healthz, /metrics, ...) to local.
func (p *Proxy) Handler(local http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Method == http.MethodConnect:
			p.connect(w, r)
		case r.URL.IsAbs():
			p.forward(w, r)
		default:
			local.ServeHTTP(w, r)
		}
	})
}

// Wait blocks until every open tunnel has closed.
func (p *Proxy) Wait() { p.wg.Wait() }

// connect opens a checked tunnel to r.Host.
func (p *Proxy) connect(w http.ResponseWriter, r *http.Request) {
	target := r.Host
	_, portText, err := net.SplitHostPort(target)
	port, perr := strconv.Atoi(portText)
	if err != nil || perr != nil {
		p.refuse(w, "connect", target, fmt.Errorf("%w: CONNECT target %q", ErrInvalidURL, target))
		return
	}
	if !p.ports[port] {
		p.refuse(w, "connect", target, fmt.Errorf("%w: port %d is not open to tunnels", ErrForbiddenAddress, port))
		return
	}
	if err := p.c.checkURL(&url.URL{Scheme: "https", Host: target}); err != nil {
		p.refuse(w, "connect", target, err)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), p.c.cfg.DialTimeout)
	upstream, err := p.c.dialContext(ctx, "tcp", target)
	cancel()
	if err != nil {
		p.refuse(w, "connect", target, err)
		return
	}
	hj, ok := w.(http.Hijacker)
	if !ok {
		upstream.Close()
		p.refuse(w, "connect", target, errors.New("connection cannot be hijacked"))
		return
	}
	client, buf, err := hj.Hijack()
	if err != nil {
		upstream.Close()
		p.log.Warn("egress proxy: hijack", "target", target, "err", err)
		return
	}
	deadline := time.Now().Add(p.c.cfg.Timeout)
	_ = client.SetDeadline(deadline)
	_ = upstream.SetDeadline(deadline)
	if _, err := client.Write([]byte("HTTP/1.1 200 Connection Established\r\n\r\n")); err != nil {
		client.Close()
		upstream.Close()
		return
	}
	p.results.WithLabelValues("connect", "ok").Inc()
	p.tunnels.Inc()
	p.wg.Add(1)
	go p.pipe(client, io.MultiReader(buf.Reader, client), upstream)
}

// pipe copies both ways until either side ends, the deadline passes or
// the downstream cap is reached; then both connections close.
func (p *Proxy) pipe(client net.Conn, fromClient io.Reader, upstream net.Conn) {
	defer p.wg.Done()
	defer p.tunnels.Dec()
	done := make(chan struct{}, 2)
	go func() {
		_, _ = io.Copy(upstream, fromClient)
		done <- struct{}{}
	}()
	go func() {
		limit := p.c.cfg.MaxBytes + tunnelOverhead
		n, _ := io.Copy(client, io.LimitReader(upstream, limit))
		if n >= limit {
			p.c.m.bodyErrors.WithLabelValues("too_large").Inc()
		}
		done <- struct{}{}
	}()
	<-done
	client.Close()
	upstream.Close()
	<-done
}

// forward sends an absolute-form request to its origin and streams the
// response back, capped.
func (p *Proxy) forward(w http.ResponseWriter, r *http.Request) {
	target := r.URL.String()
	out, err := http.NewRequestWithContext(r.Context(), r.Method, target, http.MaxBytesReader(w, r.Body, p.c.cfg.MaxBytes))
	if err != nil {
		p.refuse(w, "forward", target, fmt.Errorf("%w: %v", ErrInvalidURL, err))
		return
	}
	out.Header = r.Header.Clone()
	out.ContentLength = r.ContentLength
	resp, err := p.c.Do(out)
	if err != nil {
		p.refuse(w, "forward", target, err)
		return
	}
	defer resp.Body.Close()
	h := w.Header()
	for k, vs := range resp.Header {
		h[k] = vs
	}
	stripHeaders(h)
	h.Del(ErrorHeader) // only the proxy speaks in it
	w.WriteHeader(resp.StatusCode)
	if _, err := io.Copy(w, resp.Body); err != nil {
		p.results.WithLabelValues("forward", result(err)).Inc()
		p.log.Info("egress proxy: response cut", "target", target, "err", err)
		// Headers are out: cutting the connection is the only way to
		// tell the caller the body is incomplete.
		panic(http.ErrAbortHandler)
	}
	p.results.WithLabelValues("forward", "ok").Inc()
}

// refuse answers a request the proxy will not or could not serve.
func (p *Proxy) refuse(w http.ResponseWriter, kind, target string, err error) {
	res := result(err)
	p.results.WithLabelValues(kind, res).Inc()
	p.log.Info("egress proxy: refused", "kind", kind, "target", target, "result", res, "err", err)
	code := http.StatusBadGateway
	switch res {
	case "forbidden":
		code = http.StatusForbidden
	case "invalid_url":
		code = http.StatusBadRequest
	case "timeout":
		code = http.StatusGatewayTimeout
	}
	w.Header().Set(ErrorHeader, res)
	http.Error(w, err.Error(), code)
}

// result names the class of an egress error.
func result(err error) string {
	switch {
	case errors.Is(err, ErrForbiddenAddress):
		return "forbidden"
	case errors.Is(err, ErrInvalidURL):
		return "invalid_url"
	case errors.Is(err, ErrResponseTooLarge):
		return "too_large"
	case errors.Is(err, ErrTooManyRedirects):
		return "too_many_redirects"
	case isTimeout(err):
		return "timeout"
	}
	return "error"
}

// proxyError turns a proxy's refusal back into the sentinel it stands for.
func proxyError(kind, status string) error {
	var base error
	switch kind {
	case "forbidden":
		base = ErrForbiddenAddress
	case "invalid_url":
		base = ErrInvalidURL
	case "too_large":
		base = ErrResponseTooLarge
	case "timeout":
		base = ErrTimeout
	default:
		return fmt.Errorf("egress proxy: %s", status)
	}
	return fmt.Errorf("%w (egress proxy: %s)", base, status)
}

// viaProxy makes the transport send everything through the egress proxy
// at u and dial nothing else.
func (c *Client) viaProxy(t *http.Transport, u *url.URL) (http.RoundTripper, error) {
	if u.Scheme != "http" || u.Hostname() == "" || u.User != nil || (u.Path != "" && u.Path != "/") {
		return nil, fmt.Errorf("%w: Proxy must be http://host[:port], got %q", ErrInvalidConfig, u.Redacted())
	}
	port := u.Port()
	if port == "" {
		port = "80"
	}
	proxyAddr := net.JoinHostPort(u.Hostname(), port)
	plain := &net.Dialer{Timeout: c.cfg.DialTimeout, KeepAlive: 30 * time.Second}
	t.Proxy = http.ProxyURL(u)
	t.DialContext = func(ctx context.Context, network, address string) (net.Conn, error) {
		if address != proxyAddr {
			return nil, fmt.Errorf("%w: %s is not the egress proxy %s", ErrForbiddenAddress, address, proxyAddr)
		}
		return plain.DialContext(ctx, network, address)
	}
	t.OnProxyConnectResponse = func(_ context.Context, _ *url.URL, _ *http.Request, res *http.Response) error {
		if res.StatusCode != http.StatusOK {
			return proxyError(res.Header.Get(ErrorHeader), res.Status)
		}
		return nil
	}
	return proxyErrors{t}, nil
}

// proxyErrors turns the proxy's refusals of forwarded (http) requests into
// errors.
type proxyErrors struct{ rt http.RoundTripper }

func (p proxyErrors) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := p.rt.RoundTrip(r)
	if err != nil {
		return nil, err
	}
	if kind := resp.Header.Get(ErrorHeader); kind != "" {
		resp.Body.Close()
		return nil, proxyError(kind, resp.Status)
	}
	return resp, nil
}
