package web

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/base64"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/concord-chat/concord/web/internal/bundle"
)

// TestBundleFresh rebuilds web/dist in memory from web/src and fails when
// the committed files differ: run `go generate ./web` after editing src.
func TestBundleFresh(t *testing.T) {
	files, err := bundle.Build(".")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]byte{}
	for _, f := range files {
		want[f.Name] = f.Contents
	}
	got := map[string][]byte{}
	err = filepath.WalkDir("dist", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		rel, _ := filepath.Rel("dist", p)
		got[filepath.ToSlash(rel)] = b
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	for name, b := range want {
		if g, ok := got[name]; !ok {
			t.Errorf("web/dist/%s is missing", name)
		} else if !bytes.Equal(g, b) {
			t.Errorf("web/dist/%s is stale", name)
		}
	}
	for name := range got {
		if _, ok := want[name]; !ok {
			t.Errorf("web/dist/%s is not produced by the build any more", name)
		}
	}
	if t.Failed() {
		t.Log("the committed bundle does not match web/src: run `go generate ./web` (or `make web`) and commit web/dist")
	}
}

func get(t *testing.T, h http.Handler, path string, hdr ...string) *http.Response {
	t.Helper()
	r := httptest.NewRequest("GET", path, nil)
	for i := 0; i+1 < len(hdr); i += 2 {
		r.Header.Set(hdr[i], hdr[i+1])
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w.Result()
}

func TestHandler(t *testing.T) {
	h := Handler(Options{GatewayURL: "wss://gw.example.com/gateway"})
	res := get(t, h, "/")
	body, _ := io.ReadAll(res.Body)
	if res.StatusCode != 200 || !strings.Contains(res.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("GET /: %d %s", res.StatusCode, res.Header.Get("Content-Type"))
	}
	if cc := res.Header.Get("Cache-Control"); cc != "no-store" {
		t.Errorf("index.html Cache-Control %q, want no-store", cc)
	}
	csp := res.Header.Get("Content-Security-Policy")
	for _, want := range []string{"default-src 'none'", "script-src 'self'", "style-src 'self'", "frame-ancestors 'none'", "connect-src 'self' wss://gw.example.com"} {
		if !strings.Contains(csp, want) {
			t.Errorf("CSP %q lacks %q", csp, want)
		}
	}
	if strings.Contains(csp, "unsafe-inline") || strings.Contains(csp, "unsafe-eval") {
		t.Errorf("CSP allows inline code: %q", csp)
	}
	// Voice servers on the page's host, any port, over wss only.
	if !strings.HasSuffix(csp, "connect-src 'self' wss://gw.example.com wss://example.com:*") {
		t.Errorf("CSP connect-src lacks the same-host voice source: %q", csp)
	}
	r6 := httptest.NewRequest("GET", "/", nil)
	r6.Host = "[::1]:8080"
	if got := sameHostVoice(r6); got != " wss://[::1]:*" {
		t.Errorf("same-host source for [::1]:8080 = %q", got)
	}
	if got := Handler(Options{NoSameHostVoice: true}).(*handler).csp; strings.Contains(got, ":*") {
		t.Errorf("NoSameHostVoice kept a wildcard port: %q", got)
	}
	// index.html loads hashed bundles and has no inline script or style.
	refs := regexp.MustCompile(`(?:src|href)="/(assets/main-[A-Z0-9]+\.(?:js|css))"`).FindAllStringSubmatch(string(body), -1)
	if len(refs) != 2 {
		t.Fatalf("index.html references %d hashed bundles, want 2:\n%s", len(refs), body)
	}
	if regexp.MustCompile(`<script type="module">|<style|style="|<[^>]* on[a-z]+=`).Match(body) {
		t.Errorf("index.html has inline code:\n%s", body)
	}
	// Its one inline script, the boot script, is allowed by its hash, and
	// nothing else inline is: a changed byte would be refused.
	inline := regexp.MustCompile(`(?s)<script>(.*?)</script>`).FindAllSubmatch(body, -1)
	if len(inline) != 1 || !bytes.Contains(inline[0][1], []byte("concordBoot")) {
		t.Fatalf("index.html has %d inline scripts, want the boot script alone:\n%s", len(inline), body)
	}
	sum := sha256.Sum256(inline[0][1])
	script := regexp.MustCompile(`script-src ([^;]*)`).FindStringSubmatch(csp)
	if want := "'self' 'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'"; script == nil || script[1] != want {
		t.Errorf("CSP script-src = %q, want %q", script, want)
	}
	// SPA routes get the same page.
	if res := get(t, h, "/channels/1/2"); res.StatusCode != 200 || res.Header.Get("Cache-Control") != "no-store" {
		t.Errorf("GET /channels/1/2: %d %q", res.StatusCode, res.Header.Get("Cache-Control"))
	}
	for _, ref := range refs {
		res := get(t, h, "/"+ref[1], "Accept-Encoding", "gzip, br")
		if res.StatusCode != 200 || !strings.Contains(res.Header.Get("Cache-Control"), "immutable") {
			t.Errorf("%s: %d %q", ref[1], res.StatusCode, res.Header.Get("Cache-Control"))
		}
		if res.Header.Get("Content-Encoding") != "gzip" {
			t.Errorf("%s not gzipped", ref[1])
			continue
		}
		zr, err := gzip.NewReader(res.Body)
		if err != nil {
			t.Fatal(err)
		}
		plain, _ := io.ReadAll(zr)
		if strings.HasSuffix(ref[1], ".js") && !bytes.Contains(plain, []byte("sourceMappingURL=main-")) {
			t.Errorf("%s has no source map link", ref[1])
		}
		if res := get(t, h, "/"+ref[1]+".map"); res.StatusCode != 200 {
			t.Errorf("source map of %s: %d", ref[1], res.StatusCode)
		}
	}
	if res := get(t, h, "/assets/nope.js"); res.StatusCode != 404 {
		t.Errorf("missing asset: %d, want 404", res.StatusCode)
	}
	r := httptest.NewRequest("POST", "/", nil)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if w.Code != 405 {
		t.Errorf("POST /: %d, want 405", w.Code)
	}
}

// TestVoiceEndpointsCSP: with the voice servers' endpoints known, the page
// may connect to exactly those (and no other port of its host); endpoints
// that are not host:port never reach the policy.
func TestVoiceEndpointsCSP(t *testing.T) {
	endpoints := []string{"sfu-1.voice.example.com:443"}
	h := Handler(Options{VoiceEndpoints: func() []string { return endpoints }, MediaSrc: []string{"https://media.example.com"}})
	csp := get(t, h, "/live/1").Header.Get("Content-Security-Policy")
	if !strings.HasSuffix(csp, "connect-src 'self' wss://sfu-1.voice.example.com:443") {
		t.Errorf("connect-src of one voice server: %q", csp)
	}
	if !strings.Contains(csp, "media-src 'self' blob: https://media.example.com;") {
		t.Errorf("media-src lacks the configured media origin: %q", csp)
	}
	// A server joins: the next page load may reach it.
	endpoints = append(endpoints, "10.0.0.7:40000", "[2001:db8::1]:443", "10.0.0.7:40000",
		"evil.example.com:443; script-src *", "*.example.com:443", "no-port", "h:0", "h:99999", ":443")
	csp = get(t, h, "/").Header.Get("Content-Security-Policy")
	if !strings.HasSuffix(csp, "connect-src 'self' wss://sfu-1.voice.example.com:443 wss://10.0.0.7:40000 wss://[2001:db8::1]:443") {
		t.Errorf("connect-src after a server joined: %q", csp)
	}
	if strings.Contains(csp, ":*") || strings.Count(csp, "script-src") != 1 {
		t.Errorf("policy widened: %q", csp)
	}
}

// TestMediaOrigins: by default <video> plays from this origin (and blob:)
// only; the configured media origins join media-src, and nothing that is
// not an origin reaches the policy.
func TestMediaOrigins(t *testing.T) {
	media := func(opts Options) string {
		csp := get(t, Handler(opts), "/live/1").Header.Get("Content-Security-Policy")
		for _, d := range strings.Split(csp, "; ") {
			if strings.HasPrefix(d, "media-src ") {
				return d
			}
		}
		t.Fatalf("no media-src in %q", csp)
		return ""
	}
	if got := media(Options{}); got != "media-src 'self' blob:" {
		t.Errorf("default %q, want this origin and blob: only", got)
	}
	got := media(Options{MediaSrc: []string{"https://cdn.example.com", "https://*.media.example.com:8443/", "HTTP://10.0.0.9:8080",
		"https://evil.example.com; script-src *", "cdn.example.com", "https://x.example.com/path", "javascript://x", "*", "'unsafe-inline'",
		"https://[2001:db8::2]", "https://h:0", "https://h:08"}})
	if want := "media-src 'self' blob: https://cdn.example.com https://*.media.example.com:8443 http://10.0.0.9:8080 https://[2001:db8::2]"; got != want {
		t.Errorf("media-src = %q, want %q", got, want)
	}

	list, err := ParseOrigins(" https://cdn.example.com, ,https://*.cdn.example.com:8443 ", "http", "https")
	if err != nil || strings.Join(list, " ") != "https://cdn.example.com https://*.cdn.example.com:8443" {
		t.Errorf("ParseOrigins = %q, %v", list, err)
	}
	for _, bad := range []string{"cdn.example.com", "https://cdn.example.com/videos", "wss://cdn.example.com", "https://a b", "https://x;y", "https://*"} {
		if _, err := ParseOrigins("https://ok.example.com,"+bad, "http", "https"); err == nil || !strings.Contains(err.Error(), bad) {
			t.Errorf("ParseOrigins accepted %q (err %v)", bad, err)
		}
	}
}

// TestBundleSize keeps the shipped JavaScript under the budget.
func TestBundleSize(t *testing.T) {
	h := Handler(Options{}).(*handler)
	total := 0
	for name, a := range h.assets {
		if strings.HasSuffix(name, ".js") {
			total += len(a.gz)
		}
	}
	if total == 0 || total > 150<<10 {
		t.Fatalf("gzipped JavaScript is %d bytes; budget 150 KiB", total)
	}
	t.Logf("gzipped JavaScript: %d bytes", total)
}
