package egress_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/concord-chat/concord/runtime/adapters/egress"
)

// resolver answers from a table; any other name fails the lookup. calls
// counts lookups.
type resolver struct {
	names map[string][]string
	calls int
}

func (r *resolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	r.calls++
	as, ok := r.names[host]
	if !ok {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	out := make([]netip.Addr, len(as))
	for i, a := range as {
		out[i] = netip.MustParseAddr(a)
	}
	return out, nil
}

var loopback = []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}

func newClient(t *testing.T, cfg egress.Config) *egress.Client {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	c, err := egress.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// get fetches url and reads the whole body.
func get(c *egress.Client, url string) (*http.Response, []byte, error) {
	resp, err := c.Get(context.Background(), url)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp, b, err
}

func TestForbiddenURLs(t *testing.T) {
	reg := prometheus.NewRegistry()
	res := &resolver{}
	c := newClient(t, egress.Config{Resolver: res, Registerer: reg})
	for _, c2 := range []struct{ url, reason string }{
		{"http://127.0.0.1/", "loopback"},
		{"http://127.0.0.1:8080/x", "loopback"},
		{"http://[::1]/", "loopback"},
		{"http://[::ffff:127.0.0.1]/", "loopback"},
		{"http://[::ffff:10.0.0.1]/", "private"},
		{"http://[0:0:0:0:0:ffff:a00:1]/", "private"},
		{"http://[64:ff9b::a00:1]/", "private"},
		{"http://[::]/", "unspecified"},
		{"http://0.0.0.0/", "unspecified"},
		{"http://10.0.0.1/", "private"},
		{"http://192.168.0.1/", "private"},
		{"http://100.64.0.1/", "cgnat"},
		{"http://169.254.169.254/latest/meta-data/", "metadata"},
		{"http://[fd00:ec2::254]/", "metadata"},
		{"http://[fe80::1%25eth0]/", "zone"},
		{"http://[fc00::1]/", "ula"},
		{"https://[ff02::1]/", "multicast"},
		{"http://255.255.255.255/", "reserved"},
		// Numeric forms inet_aton and some URL parsers accept: refused
		// before any resolver can turn them into 127.0.0.1.
		{"http://2130706433/", "noncanonical"},
		{"http://0177.0.0.1/", "noncanonical"},
		{"http://017700000001/", "noncanonical"},
		{"http://0x7f000001/", "noncanonical"},
		{"http://0x7f.1/", "noncanonical"},
		{"http://127.1/", "noncanonical"},
		{"http://127.0.1/", "noncanonical"},
		{"http://127.000.000.001/", "noncanonical"},
		{"http://134744072/", "noncanonical"}, // 8.8.8.8, still ambiguous
	} {
		_, _, err := get(c, c2.url)
		if !errors.Is(err, egress.ErrForbiddenAddress) {
			t.Errorf("Get(%s): err = %v, want ErrForbiddenAddress", c2.url, err)
			continue
		}
		if !strings.Contains(err.Error(), "("+c2.reason+")") || !strings.Contains(err.Error(), "egress: GET ") {
			t.Errorf("Get(%s): error %q does not name the request and the reason %q", c2.url, err, c2.reason)
		}
	}
	if res.calls != 0 {
		t.Fatalf("numeric hosts reached the resolver %d times", res.calls)
	}
	if got := metricValue(t, reg, "concord_egress_denials_total", "reason", "noncanonical"); got != 9 {
		t.Fatalf("noncanonical denials = %v, want 9", got)
	}
	if got := metricValue(t, reg, "concord_egress_requests_total", "result", "forbidden"); got != 27 {
		t.Fatalf("forbidden requests = %v, want 27", got)
	}
}

func TestNameResolvingToPrivate(t *testing.T) {
	res := &resolver{names: map[string][]string{
		"bot.example":    {"10.0.0.5"},
		"meta.example":   {"169.254.169.254"},
		"mixed.example":  {"93.184.216.34", "127.0.0.1"},
		"mapped.example": {"::ffff:127.0.0.1"},
		"nat64.example":  {"64:ff9b::c0a8:1"},
		"ula.example":    {"fd00::1"},
	}}
	c := newClient(t, egress.Config{Resolver: res})
	for host, want := range map[string]string{
		"bot.example":    "resolves to 10.0.0.5 (private)",
		"meta.example":   "resolves to 169.254.169.254 (metadata)",
		"mixed.example":  "resolves to 127.0.0.1 (loopback)",
		"mapped.example": "resolves to ::ffff:127.0.0.1 (loopback)",
		"nat64.example":  "resolves to 64:ff9b::c0a8:1 (private)",
		"ula.example":    "resolves to fd00::1 (ula)",
	} {
		url := "https://" + host + "/interactions"
		_, _, err := get(c, url)
		if !errors.Is(err, egress.ErrForbiddenAddress) || !strings.Contains(err.Error(), url) || !strings.Contains(err.Error(), host+" "+want) {
			t.Errorf("Get(%s): err = %v; want ErrForbiddenAddress naming the url and %q", url, err, host+" "+want)
		}
	}
	if _, _, err := get(c, "http://unknown.example/"); err == nil || errors.Is(err, egress.ErrForbiddenAddress) {
		t.Errorf("unresolvable name: err = %v; want a lookup error", err)
	}
}

// TestDialsResolvedAddress shows the Client connects to the address its
// resolver returned and checked, not to whatever the name means elsewhere:
// "bot.test" exists only in the test resolver.
func TestDialsResolvedAddress(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "host=%s", r.Host)
	}))
	defer srv.Close()
	port := srv.Listener.Addr().(*net.TCPAddr).Port
	c := newClient(t, egress.Config{AllowPrivate: loopback, Resolver: &resolver{names: map[string][]string{"bot.test": {"127.0.0.1"}}}})
	_, body, err := get(c, fmt.Sprintf("http://bot.test:%d/", port))
	if err != nil || string(body) != fmt.Sprintf("host=bot.test:%d", port) {
		t.Fatalf("Get via test resolver: %q, %v", body, err)
	}
}

func TestAllowPrivateIsExplicitAndLogged(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "pong") }))
	defer srv.Close()

	if _, _, err := get(newClient(t, egress.Config{}), srv.URL); !errors.Is(err, egress.ErrForbiddenAddress) {
		t.Fatalf("loopback test server without an allowlist: err = %v, want ErrForbiddenAddress", err)
	}
	var logs bytes.Buffer
	c := newClient(t, egress.Config{AllowPrivate: loopback, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if !strings.Contains(logs.String(), "level=WARN") || !strings.Contains(logs.String(), "egress allowlist active") || !strings.Contains(logs.String(), "127.0.0.1/32") {
		t.Fatalf("New with AllowPrivate logged %q; want a WARN naming the prefixes", logs.String())
	}
	if _, body, err := get(c, srv.URL); err != nil || string(body) != "pong" {
		t.Fatalf("allowlisted loopback server: %q, %v", body, err)
	}
	// The allowlist is exact: ::1 and the rest of 127/8 stay denied.
	for _, u := range []string{"http://[::1]:1/", "http://127.0.0.2:1/"} {
		if _, _, err := get(c, u); !errors.Is(err, egress.ErrForbiddenAddress) {
			t.Errorf("Get(%s) with 127.0.0.1/32 allowed: err = %v, want ErrForbiddenAddress", u, err)
		}
	}
	if _, err := egress.New(egress.Config{AllowPrivate: []netip.Prefix{{}}}); !errors.Is(err, egress.ErrInvalidConfig) {
		t.Fatalf("invalid AllowPrivate prefix: err = %v", err)
	}
}

func TestRedirects(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("/to", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, r.URL.Query().Get("u"), http.StatusFound)
	})
	mux.HandleFunc("/chain/{n}", func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(r.PathValue("n"))
		if n == 0 {
			io.WriteString(w, "end")
			return
		}
		http.Redirect(w, r, fmt.Sprintf("/chain/%d", n-1), http.StatusTemporaryRedirect)
	})
	mux.HandleFunc("/headers", func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(r.Header)
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	res := &resolver{names: map[string][]string{"internal.example": {"10.1.2.3"}}}
	c := newClient(t, egress.Config{AllowPrivate: loopback, Resolver: res, MaxRedirects: 3})

	for target, want := range map[string]error{
		"http://10.0.0.1/":                         egress.ErrForbiddenAddress,
		"http://169.254.169.254/latest/meta-data/": egress.ErrForbiddenAddress,
		"http://[::1]/":                            egress.ErrForbiddenAddress,
		"http://2130706433/":                       egress.ErrForbiddenAddress,
		"http://internal.example/":                 egress.ErrForbiddenAddress,
		"file:///etc/passwd":                       egress.ErrInvalidURL,
		"gopher://127.0.0.1:70/":                   egress.ErrInvalidURL,
	} {
		_, _, err := get(c, srv.URL+"/to?u="+target)
		if !errors.Is(err, want) {
			t.Errorf("redirect to %s: err = %v, want %v", target, err, want)
			continue
		}
		if !strings.Contains(err.Error(), strings.TrimSuffix(target, "/")) {
			t.Errorf("redirect to %s: error %q does not name the hop", target, err)
		}
	}
	if _, body, err := get(c, srv.URL+"/chain/3"); err != nil || string(body) != "end" {
		t.Fatalf("3 redirects with MaxRedirects 3: %q, %v", body, err)
	}
	if _, _, err := get(c, srv.URL+"/chain/4"); !errors.Is(err, egress.ErrTooManyRedirects) {
		t.Fatalf("4 redirects with MaxRedirects 3: err = %v, want ErrTooManyRedirects", err)
	}
	if _, _, err := get(c, srv.URL+"/chain/1000"); !errors.Is(err, egress.ErrTooManyRedirects) {
		t.Fatalf("endless chain: err = %v, want ErrTooManyRedirects", err)
	}
	none := newClient(t, egress.Config{AllowPrivate: loopback, MaxRedirects: -1})
	if resp, _, err := get(none, srv.URL+"/chain/1"); err != nil || resp.StatusCode != http.StatusTemporaryRedirect {
		t.Fatalf("MaxRedirects -1: %v, %v; want the 307 itself", resp, err)
	}
	// Identity headers never leave, on the first hop or after a redirect.
	req, _ := http.NewRequest("POST", srv.URL+"/headers", strings.NewReader("{}"))
	req.Header.Set("Authorization", "Bot secret")
	req.Header.Set("Cookie", "session=1")
	req.Header.Set("X-Forwarded-For", "10.0.0.9")
	req.Header.Set("Connection", "X-Internal")
	req.Header.Set("X-Internal", "1")
	req.Header.Set("X-Signature-Ed25519", "abcd")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var got http.Header
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil {
		t.Fatal(err)
	}
	for _, h := range []string{"Authorization", "Cookie", "X-Forwarded-For", "X-Internal"} {
		if got.Get(h) != "" {
			t.Errorf("header %s reached the bot: %q", h, got.Get(h))
		}
	}
	if got.Get("X-Signature-Ed25519") != "abcd" || !strings.HasPrefix(got.Get("User-Agent"), "Concord-Egress/") {
		t.Errorf("signature or user agent lost: %v", got)
	}
	if req.Header.Get("Authorization") == "" {
		t.Error("Do modified the caller's request headers")
	}
}

func TestHugeResponses(t *testing.T) {
	const max = 64 << 10
	mux := http.NewServeMux()
	mux.HandleFunc("/exact", func(w http.ResponseWriter, r *http.Request) { w.Write(make([]byte, max)) })
	mux.HandleFunc("/declared", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", strconv.Itoa(10*max))
		w.Write(make([]byte, 10*max))
	})
	mux.HandleFunc("/chunked", func(w http.ResponseWriter, r *http.Request) {
		for range 100 {
			w.Write(make([]byte, 4096))
			w.(http.Flusher).Flush()
		}
	})
	mux.HandleFunc("/gzip", func(w http.ResponseWriter, r *http.Request) {
		var b bytes.Buffer
		z := gzip.NewWriter(&b)
		z.Write(make([]byte, 100*max))
		z.Close()
		w.Header().Set("Content-Encoding", "gzip")
		w.Header().Set("Content-Length", strconv.Itoa(b.Len()))
		w.Write(b.Bytes())
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	reg := prometheus.NewRegistry()
	c := newClient(t, egress.Config{AllowPrivate: loopback, MaxBytes: max, Registerer: reg})

	if _, body, err := get(c, srv.URL+"/exact"); err != nil || len(body) != max {
		t.Fatalf("body of exactly MaxBytes: %d bytes, %v", len(body), err)
	}
	if _, _, err := get(c, srv.URL+"/declared"); !errors.Is(err, egress.ErrResponseTooLarge) || !strings.Contains(err.Error(), srv.URL+"/declared") {
		t.Fatalf("Content-Length beyond MaxBytes: err = %v, want ErrResponseTooLarge naming the url", err)
	}
	for _, path := range []string{"/chunked", "/gzip"} {
		_, body, err := get(c, srv.URL+path)
		if !errors.Is(err, egress.ErrResponseTooLarge) || !strings.Contains(err.Error(), srv.URL+path) {
			t.Fatalf("%s: err = %v, want ErrResponseTooLarge naming the url", path, err)
		}
		if len(body) != max {
			t.Fatalf("%s: read %d bytes before the error, want exactly %d", path, len(body), max)
		}
	}
	if got := metricValue(t, reg, "concord_egress_body_errors_total", "result", "too_large"); got != 2 {
		t.Fatalf("too_large body errors = %v, want 2", got)
	}
}

func TestSlowResponses(t *testing.T) {
	release := make(chan struct{})
	mux := http.NewServeMux()
	mux.HandleFunc("/headers", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	})
	mux.HandleFunc("/body", func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("partial"))
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
		case <-release:
		}
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	defer close(release)
	c := newClient(t, egress.Config{AllowPrivate: loopback, Timeout: 200 * time.Millisecond})

	start := time.Now()
	if _, _, err := get(c, srv.URL+"/headers"); !errors.Is(err, egress.ErrTimeout) || !strings.Contains(err.Error(), srv.URL+"/headers") {
		t.Fatalf("server that never answers: err = %v, want ErrTimeout naming the url", err)
	}
	if _, body, err := get(c, srv.URL+"/body"); !errors.Is(err, egress.ErrTimeout) || string(body) != "partial" {
		t.Fatalf("server that stalls mid-body: %q, %v; want the partial body and ErrTimeout", body, err)
	}
	if el := time.Since(start); el > 5*time.Second {
		t.Fatalf("two 200ms timeouts took %v", el)
	}
	// A shorter context deadline wins (the 3-second interaction window).
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	long := newClient(t, egress.Config{AllowPrivate: loopback, Timeout: time.Hour})
	if _, err := long.Get(ctx, srv.URL+"/headers"); !errors.Is(err, egress.ErrTimeout) {
		t.Fatalf("context deadline: err = %v, want ErrTimeout", err)
	}
}

func TestInvalidURLs(t *testing.T) {
	c := newClient(t, egress.Config{})
	for _, u := range []string{"ftp://example.com/", "http:///path", "http://user:pass@example.com/", "javascript:alert(1)", "example.com", "http://example.com:0/", "http://example.com:99999/", "http://exa mple.com/"} {
		if _, err := c.Get(context.Background(), u); !errors.Is(err, egress.ErrInvalidURL) {
			t.Errorf("Get(%q): err = %v, want ErrInvalidURL", u, err)
		}
	}
}

// metricValue reads one labelled counter from reg, zero if it is absent.
func metricValue(t testing.TB, reg *prometheus.Registry, name, label, value string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetName() == label && lp.GetValue() == value {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}
