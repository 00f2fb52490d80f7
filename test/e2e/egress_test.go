package e2e

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"testing"

	"github.com/concord-chat/concord/runtime/adapters/egress"
)

// TestEgressProxyProcess runs `concord egress` as the chart runs it and
// sends a Client's requests through it: a bot endpoint the test allowlists
// (127.0.0.1, the logged test-only allowlist) answers; loopback outside the
// allowlist, private, metadata and a redirect into them are refused by the
// proxy process and surface as egress.ErrForbiddenAddress.
func TestEgressProxyProcess(t *testing.T) {
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u := r.URL.Query().Get("to"); u != "" {
			http.Redirect(w, r, u, http.StatusFound)
			return
		}
		io.WriteString(w, "pong")
	}))
	defer origin.Close()
	_, port, _ := net.SplitHostPort(origin.Listener.Addr().String())

	addr := freeAddr(t)
	p := startConcord(t, addr, "egress", "--http="+addr, "--connect-ports="+port, "--egress-allow-private=127.0.0.1/32")
	if got := p.logs(); !strings.Contains(got, "egress allowlist active") {
		t.Fatalf("the test-only allowlist was not logged:\n%s", got)
	}
	proxyURL, _ := url.Parse("http://" + addr)
	c, err := egress.New(egress.Config{Proxy: proxyURL, Logger: slog.New(slog.DiscardHandler),
		AllowPrivate: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	resp, err := c.Get(ctx, origin.URL+"/")
	if err != nil {
		t.Fatalf("allowed endpoint through concord egress: %v\n%s", err, p.logs())
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "pong" {
		t.Fatalf("body %q", b)
	}
	// Requests the proxy alone must refuse: a plain proxy client that checks
	// nothing itself.
	raw := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(proxyURL)},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for _, target := range []string{
		"http://127.0.0.2:" + port + "/",
		"http://10.0.0.1/",
		"http://169.254.169.254/latest/meta-data/",
		"http://[::ffff:169.254.169.254]/",
		"http://2130706433:" + port + "/",
	} {
		resp, err := raw.Get(target)
		if err != nil {
			t.Errorf("%s: %v", target, err)
			continue
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden || resp.Header.Get(egress.ErrorHeader) != "forbidden" {
			t.Errorf("%s through concord egress: %s (%s %q), want 403 forbidden", target, resp.Status, egress.ErrorHeader, resp.Header.Get(egress.ErrorHeader))
		}
	}
	if _, err := raw.Get("https://10.0.0.1/"); err == nil {
		t.Errorf("CONNECT to a private address was tunnelled")
	}
	// A redirect is handed back, and the Client's next hop through the
	// proxy is refused like the first.
	if _, err := c.Get(ctx, origin.URL+"/?to="+url.QueryEscape("http://169.254.169.254/")); !errors.Is(err, egress.ErrForbiddenAddress) {
		t.Errorf("redirect to metadata through concord egress: %v", err)
	}
	if err := p.stop(); err != nil {
		t.Fatalf("SIGTERM: %v\n%s", err, p.logs())
	}
}
