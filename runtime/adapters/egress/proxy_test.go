package egress_test

import (
	"bufio"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/concord-chat/concord/runtime/adapters/egress"
)

// proxied is an origin (a bot endpoint on loopback), an egress proxy in
// front of it and a Client sending through the proxy. Names resolve only
// at the proxy: bot.example → 127.0.0.1 (allowlisted for the test),
// evil.example → 10.1.2.3, meta.example → the metadata address,
// loop.example → 127.0.0.2 (loopback, not allowlisted).
type proxied struct {
	origin    *httptest.Server
	port      string
	proxy     *httptest.Server
	client    *egress.Client
	clientDNS *resolver
	proxyDNS  *resolver
	reg       *prometheus.Registry
}

func newProxied(t *testing.T, proxyMaxBytes int64) *proxied {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("/hello", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "hi") })
	mux.HandleFunc("/to", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, r.URL.Query().Get("u"), http.StatusFound)
	})
	mux.HandleFunc("/huge", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(egress.ErrorHeader, "forbidden") // an origin cannot speak for the proxy
		for range 64 {
			w.Write([]byte(strings.Repeat("x", 1024)))
			w.(http.Flusher).Flush()
		}
	})
	p := &proxied{origin: httptest.NewServer(mux), reg: prometheus.NewRegistry()}
	t.Cleanup(p.origin.Close)
	_, p.port, _ = net.SplitHostPort(p.origin.Listener.Addr().String())
	p.proxyDNS = &resolver{names: map[string][]string{
		"bot.example": {"127.0.0.1"}, "evil.example": {"10.1.2.3"},
		"meta.example": {"169.254.169.254"}, "loop.example": {"127.0.0.2"},
	}}
	port, _ := strconv.Atoi(p.port)
	px, err := egress.NewProxy(egress.ProxyConfig{
		Client: egress.Config{AllowPrivate: loopback, Resolver: p.proxyDNS, MaxBytes: proxyMaxBytes,
			Logger: slog.New(slog.DiscardHandler), Registerer: p.reg},
		ConnectPorts: []int{port},
	})
	if err != nil {
		t.Fatal(err)
	}
	local := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "local "+r.URL.Path) })
	p.proxy = httptest.NewServer(px.Handler(local))
	t.Cleanup(p.proxy.Close)
	pu, _ := url.Parse(p.proxy.URL)
	p.clientDNS = &resolver{names: map[string][]string{}}
	p.client = newClient(t, egress.Config{Proxy: pu, Resolver: p.clientDNS})
	return p
}

func (p *proxied) url(host, path string) string { return "http://" + host + ":" + p.port + path }

func TestProxyForwardsCheckedRequests(t *testing.T) {
	p := newProxied(t, 1<<20)
	resp, b, err := get(p.client, p.url("bot.example", "/hello"))
	if err != nil || resp.StatusCode != 200 || string(b) != "hi" {
		t.Fatalf("allowed origin through the proxy: %v %v %q", resp, err, b)
	}
	if p.clientDNS.calls != 0 || p.proxyDNS.calls == 0 {
		t.Fatalf("names must resolve at the proxy only: client %d lookups, proxy %d", p.clientDNS.calls, p.proxyDNS.calls)
	}
	for _, target := range []string{
		p.url("evil.example", "/"),
		p.url("meta.example", "/latest/meta-data/"),
		p.url("loop.example", "/hello"),
		// A redirect is returned to the client, whose next hop is checked
		// by the proxy again.
		p.url("bot.example", "/to?u="+url.QueryEscape(p.url("evil.example", "/"))),
	} {
		if _, _, err := get(p.client, target); !errors.Is(err, egress.ErrForbiddenAddress) {
			t.Errorf("%s through the proxy: err = %v, want ErrForbiddenAddress", target, err)
		}
	}
	if got := metricValue(t, p.reg, "concord_egress_proxy_requests_total", "result", "forbidden"); got < 4 {
		t.Errorf("forbidden proxy requests counted %v, want >= 4", got)
	}
}

func TestProxyCapsResponses(t *testing.T) {
	p := newProxied(t, 4<<10)
	resp, b, err := get(p.client, p.url("bot.example", "/huge"))
	if err == nil {
		t.Fatalf("a 64 KiB body through a proxy capped at 4 KiB read fully (%d bytes, status %v)", len(b), resp.Status)
	}
	if errors.Is(err, egress.ErrForbiddenAddress) {
		t.Fatalf("the origin's %s header was taken for the proxy's: %v", egress.ErrorHeader, err)
	}
	if len(b) > 8<<10 {
		t.Fatalf("read %d bytes past the proxy's cap", len(b))
	}
}

func TestProxyConnectTunnels(t *testing.T) {
	p := newProxied(t, 1<<20)
	connect := func(target string) (*http.Response, net.Conn, *bufio.Reader) {
		t.Helper()
		conn, err := net.Dial("tcp", p.proxy.Listener.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		io.WriteString(conn, "CONNECT "+target+" HTTP/1.1\r\nHost: "+target+"\r\n\r\n")
		br := bufio.NewReader(conn)
		resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
		if err != nil {
			t.Fatal(err)
		}
		return resp, conn, br
	}
	resp, conn, br := connect("bot.example:" + p.port)
	if resp.StatusCode != 200 {
		t.Fatalf("CONNECT to an allowed origin: %s", resp.Status)
	}
	io.WriteString(conn, "GET /hello HTTP/1.1\r\nHost: bot.example\r\n\r\n")
	inner, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := io.ReadAll(io.LimitReader(inner.Body, 16)); string(b) != "hi" {
		t.Fatalf("through the tunnel: %q", b)
	}
	for target, want := range map[string]int{
		"evil.example:" + p.port: http.StatusForbidden,
		"meta.example:" + p.port: http.StatusForbidden,
		"bot.example:22":         http.StatusForbidden, // not a tunnel port
		"127.0.0.1:" + p.port:    http.StatusOK,        // allowlisted literal
		"[::1]:" + p.port:        http.StatusForbidden,
		"2130706433:" + p.port:   http.StatusForbidden, // non-canonical 127.0.0.1
	} {
		resp, _, _ := connect(target)
		if resp.StatusCode != want {
			t.Errorf("CONNECT %s: %s, want %d", target, resp.Status, want)
		}
		if want == http.StatusForbidden && resp.Header.Get(egress.ErrorHeader) != "forbidden" {
			t.Errorf("CONNECT %s: %s header %q", target, egress.ErrorHeader, resp.Header.Get(egress.ErrorHeader))
		}
	}
	// A Client's https request whose CONNECT is refused fails with the
	// same sentinel as without a proxy.
	if _, _, err := get(p.client, "https://evil.example:"+p.port+"/"); !errors.Is(err, egress.ErrForbiddenAddress) {
		t.Fatalf("https through the proxy to a private name: %v", err)
	}
}

func TestProxyServesLocalRequests(t *testing.T) {
	p := newProxied(t, 1<<20)
	resp, err := http.Get(p.proxy.URL + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "local /healthz" {
		t.Fatalf("origin-form request: %q", b)
	}
}

func TestProxyConfigRefusals(t *testing.T) {
	for _, raw := range []string{"https://egress:8080", "http://user:pw@egress:8080", "http://egress:8080/x"} {
		u, _ := url.Parse(raw)
		if _, err := egress.New(egress.Config{Proxy: u, Logger: slog.New(slog.DiscardHandler)}); !errors.Is(err, egress.ErrInvalidConfig) {
			t.Errorf("Proxy %s: err = %v, want ErrInvalidConfig", raw, err)
		}
	}
	u, _ := url.Parse("http://egress:8080")
	if _, err := egress.NewProxy(egress.ProxyConfig{Client: egress.Config{Proxy: u}}); !errors.Is(err, egress.ErrInvalidConfig) {
		t.Errorf("chained proxy: err = %v", err)
	}
	if _, err := egress.NewProxy(egress.ProxyConfig{ConnectPorts: []int{70000}}); !errors.Is(err, egress.ErrInvalidConfig) {
		t.Errorf("bad port: err = %v", err)
	}
}
