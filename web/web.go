// Package web serves Concord's browser client: the TypeScript sources in
// web/src, bundled by esbuild into web/dist (committed, and embedded in
// the binary here), so running Concord needs no Node.
//
// Handler answers GET and HEAD. Files under /assets/ carry a content hash
// in their names and are cached for a year; every other path is the
// single-page app's index.html, never cached, so a new build reaches the
// browser on the next load. Every answer carries a strict
// Content-Security-Policy: scripts and styles from this origin only, no
// inline code but index.html's boot script (allowed by its hash), no
// frames; connections to this origin, the gateway, the
// listed origins and secure WebSockets to this host's other ports (voice).
//
// Rebuild after changing web/src with `go generate ./web` (or `make
// web`); a test fails when web/dist is stale.
package web

//go:generate go run ./internal/gen

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"embed"
	"encoding/base64"
	"fmt"
	"io/fs"
	"mime"
	"net"
	"net/http"
	"net/url"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

//go:embed dist
var dist embed.FS

// Options configures Handler.
type Options struct {
	// GatewayURL is the gateway URL handed to clients when it is not on
	// this origin (concord's --public-url); its origin joins connect-src.
	GatewayURL string
	// ConnectSrc lists origins besides this one that the client may open
	// connections to (fetch, WebSocket, EventSource): a gateway or voice
	// endpoint on another host, for example "wss://gateway.example.com".
	// The page's own origin is always allowed ('self' covers ws: and wss:
	// to the same host and port).
	ConnectSrc []string
	// MediaSrc lists origins besides this one that <video> and <audio>
	// may load from: where streams' stream_url points (a CDN, a media
	// server), as "https://media.example.com", "https://*.cdn.example.com"
	// or "https://media.example.com:8443". Default none: a stream_url on
	// another origin does not play. Entries that are not such an origin
	// are left out (ParseOrigins reports them, for flags).
	MediaSrc []string
	// NoSameHostVoice drops the default wss://<page host>:* source (voice
	// servers on the page's own host at another port, as `concord dev`
	// and single-host installs run them): set it when every voice
	// endpoint is listed in ConnectSrc.
	NoSameHostVoice bool
	// VoiceEndpoints, when set, is asked on every page load for the voice
	// servers' endpoints as VOICE_SERVER_UPDATE hands them out (host:port);
	// each becomes wss://host:port in connect-src, and the same-host
	// wildcard is left out: the page may open the servers that exist, and
	// nothing else. A page loaded before a server joined reaches it after
	// a reload; when servers come and go under one domain, list
	// wss://*.<domain> in ConnectSrc instead.
	VoiceEndpoints func() []string
}

// asset is one embedded file, with its gzipped form when that is smaller.
type asset struct {
	body, gz    []byte
	contentType string
	etag        string
}

type handler struct {
	assets   map[string]*asset // by path below /, e.g. "assets/main-X.js"
	index    *asset
	csp      string // with connect-src last, open for the same-host source
	sameHost bool
	voice    func() []string
}

// Handler returns the web client's handler. It panics when the embedded
// bundle is incomplete, which is a build error.
func Handler(opts Options) http.Handler {
	h := &handler{assets: make(map[string]*asset), sameHost: !opts.NoSameHostVoice && opts.VoiceEndpoints == nil,
		voice: opts.VoiceEndpoints}
	err := fs.WalkDir(dist, "dist", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := dist.ReadFile(p)
		if err != nil {
			return err
		}
		name := strings.TrimPrefix(p, "dist/")
		h.assets[name] = newAsset(name, b)
		return nil
	})
	if err != nil {
		panic("web: embedded bundle: " + err.Error())
	}
	if h.index = h.assets["index.html"]; h.index == nil {
		panic("web: embedded bundle has no index.html; run go generate ./web")
	}
	delete(h.assets, "index.html")
	h.csp = policy(opts, inlineScriptHashes(h.index.body))
	return h
}

// inlineScript matches index.html's inline scripts (the boot script that
// starts the first REST reads before the bundle runs).
var inlineScript = regexp.MustCompile(`(?s)<script>(.*?)</script>`)

// inlineScriptHashes returns the CSP sources allowing exactly the inline
// scripts of page: 'sha256-<base64>' of each one's text.
func inlineScriptHashes(page []byte) []string {
	var srcs []string
	for _, m := range inlineScript.FindAllSubmatch(page, -1) {
		sum := sha256.Sum256(m[1])
		srcs = append(srcs, "'sha256-"+base64.StdEncoding.EncodeToString(sum[:])+"'")
	}
	return srcs
}

func newAsset(name string, b []byte) *asset {
	ct := mime.TypeByExtension(path.Ext(name))
	switch path.Ext(name) {
	case ".map":
		ct = "application/json"
	case ".js":
		ct = "text/javascript; charset=utf-8"
	}
	if ct == "" {
		ct = "application/octet-stream"
	}
	a := &asset{body: b, contentType: ct}
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	zw.Write(b)
	zw.Close()
	if buf.Len() < len(b) {
		a.gz = buf.Bytes()
	}
	a.etag = `"` + strconv.FormatUint(fnv64(b), 36) + `"`
	return a
}

// policy is the Content-Security-Policy of every answer, but for the
// same-host voice source that ServeHTTP appends to its last directive,
// connect-src.
func policy(opts Options, scriptHashes []string) string {
	connect := append([]string{"'self'"}, origins(opts.ConnectSrc, "http", "https", "ws", "wss")...)
	if u, err := url.Parse(opts.GatewayURL); err == nil && u.Host != "" && (u.Scheme == "ws" || u.Scheme == "wss") {
		connect = append(connect, u.Scheme+"://"+u.Host)
	}
	media := append([]string{"'self'", "blob:"}, origins(opts.MediaSrc, "http", "https")...)
	return strings.Join([]string{
		"default-src 'none'",
		"script-src " + strings.Join(append([]string{"'self'"}, scriptHashes...), " "),
		"style-src 'self'",
		"img-src 'self' data: blob:",
		"font-src 'self'",
		"media-src " + strings.Join(media, " "),
		"manifest-src 'self'",
		"base-uri 'none'",
		"form-action 'none'",
		"frame-ancestors 'none'",
		"connect-src " + strings.Join(connect, " "),
	}, "; ")
}

// ParseOrigins splits a comma-separated list of origins (a flag's value)
// and checks that each is scheme://host[:port] with one of the schemes,
// a leading "*." allowed in the host: what Options.MediaSrc and
// Options.ConnectSrc take. Blanks are skipped; anything else is an error
// naming the entry.
func ParseOrigins(list string, schemes ...string) ([]string, error) {
	var out []string
	for _, e := range strings.Split(list, ",") {
		e = strings.TrimSpace(e)
		if e == "" {
			continue
		}
		o, ok := origin(e, schemes)
		if !ok {
			return nil, fmt.Errorf("web: %q is not an origin (%s://host[:port], no path): a Content-Security-Policy source must be exactly that", e, strings.Join(schemes, "|"))
		}
		out = append(out, o)
	}
	return out, nil
}

// origins keeps the entries of list that are origins with one of the
// schemes, so that no entry can widen or end a CSP directive.
func origins(list []string, schemes ...string) []string {
	var out []string
	for _, e := range list {
		if o, ok := origin(e, schemes); ok {
			out = append(out, o)
		}
	}
	return out
}

// hostLabels is a host name (optionally "*." first), an IPv4 address or a
// bracketed IPv6 address.
var hostLabels = regexp.MustCompile(`^(?:\*\.)?[A-Za-z0-9](?:[A-Za-z0-9.-]*[A-Za-z0-9])?$|^\[[0-9A-Fa-f:.]+\]$`)

// origin checks one entry and returns it lower-cased, without a trailing
// slash.
func origin(e string, schemes []string) (string, bool) {
	e = strings.TrimSuffix(strings.TrimSpace(e), "/")
	scheme, rest, ok := strings.Cut(e, "://")
	if !ok || !slices.Contains(schemes, strings.ToLower(scheme)) || rest == "" {
		return "", false
	}
	host, port := rest, ""
	if i := strings.LastIndex(rest, ":"); i >= 0 && !strings.HasSuffix(rest, "]") {
		host, port = rest[:i], rest[i+1:]
		if n, err := strconv.Atoi(port); err != nil || n <= 0 || n > 65535 || strconv.Itoa(n) != port {
			return "", false
		}
	}
	if !hostLabels.MatchString(host) {
		return "", false
	}
	return strings.ToLower(e), true
}

// sameHostVoice is the connect-src source for voice servers on the page's
// host: secure WebSockets to any port of the host the page was loaded
// from (its name from the Host header, which only the browser that loads
// the page sets), nothing else.
func sameHostVoice(r *http.Request) string {
	host := r.Host
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	if host == "" || strings.ContainsAny(host, " ;,'\"\\") {
		return ""
	}
	if strings.Contains(host, ":") {
		host = "[" + host + "]" // IPv6 literal
	}
	return " wss://" + host + ":*"
}

// voiceSources is the connect-src sources of the voice endpoints:
// " wss://host:port" each, skipping anything that is not a host and a
// port (a source must not be able to widen or end the directive).
func voiceSources(endpoints []string) string {
	var b strings.Builder
	seen := map[string]bool{}
	for _, e := range endpoints {
		host, port, err := net.SplitHostPort(e)
		if err != nil || host == "" || strings.ContainsAny(host, " ;,'\"\\*/") {
			continue
		}
		if n, err := strconv.Atoi(port); err != nil || n <= 0 || n > 65535 {
			continue
		}
		src := "wss://" + net.JoinHostPort(host, port)
		if !seen[src] {
			seen[src] = true
			b.WriteString(" " + src)
		}
	}
	return b.String()
}

// ServeHTTP implements http.Handler.
func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hdr := w.Header()
	csp := h.csp
	if h.sameHost {
		csp += sameHostVoice(r)
	}
	if h.voice != nil {
		csp += voiceSources(h.voice())
	}
	hdr.Set("Content-Security-Policy", csp)
	hdr.Set("X-Content-Type-Options", "nosniff")
	hdr.Set("Referrer-Policy", "no-referrer")
	hdr.Set("Cross-Origin-Opener-Policy", "same-origin")
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		hdr.Set("Allow", "GET, HEAD")
		http.Error(w, "405 method not allowed", http.StatusMethodNotAllowed)
		return
	}
	name := strings.TrimPrefix(path.Clean("/"+r.URL.Path), "/")
	if strings.HasPrefix(name, "assets/") {
		a := h.assets[name]
		if a == nil {
			http.Error(w, "404 page not found", http.StatusNotFound)
			return
		}
		// The name changes whenever the content does.
		hdr.Set("Cache-Control", "public, max-age=31536000, immutable")
		serve(w, r, a)
		return
	}
	// Every other path is a route of the app (/channels/..., /invite/...,
	// /live/...): the same index.html, revalidated on every load.
	hdr.Set("Cache-Control", "no-store")
	serve(w, r, h.index)
}

func serve(w http.ResponseWriter, r *http.Request, a *asset) {
	hdr := w.Header()
	hdr.Set("Content-Type", a.contentType)
	hdr.Set("ETag", a.etag)
	hdr.Add("Vary", "Accept-Encoding")
	if match := r.Header.Get("If-None-Match"); match != "" && match == a.etag {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	body := a.body
	if a.gz != nil && acceptsGzip(r) {
		hdr.Set("Content-Encoding", "gzip")
		body = a.gz
	}
	hdr.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		w.Write(body)
	}
}

func acceptsGzip(r *http.Request) bool {
	for _, part := range strings.Split(r.Header.Get("Accept-Encoding"), ",") {
		enc, q, _ := strings.Cut(strings.TrimSpace(part), ";")
		if strings.EqualFold(strings.TrimSpace(enc), "gzip") {
			return strings.TrimSpace(q) != "q=0"
		}
	}
	return false
}

// fnv64 is FNV-1a, enough for an ETag of an embedded file.
func fnv64(b []byte) uint64 {
	h := uint64(14695981039346656037)
	for _, c := range b {
		h ^= uint64(c)
		h *= 1099511628211
	}
	return h
}
