package httpserve

import (
	"bufio"
	"net"
	"net/http"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/concord-chat/concord/runtime/base/rest"
)

// Front wraps h with what every listener does before routing:
//
//   - a request from a trusted proxy (cfg.TrustedProxies) that carries
//     X-Forwarded-For gets the client's address it names as RemoteAddr
//     (the right-most one that is not a trusted proxy), so every handler
//     behind sees the client;
//   - a path that is not clean (a literal "..", ".", or "//" segment) is
//     answered 404 with Discord's JSON error, where http.ServeMux would
//     answer a text/html redirect to the cleaned path;
//   - a response h (or the ServeMux inside it) starts through net/http's
//     helpers, http.Error (the mux's 404 and 405, library errors) or
//     http.Redirect, is replaced by Discord's JSON error of the same
//     status (a redirect becomes a 404: no Concord route redirects);
//   - a normal request gets per-request read and write deadlines
//     (cfg.ReadTimeout, cfg.WriteTimeout) through http.ResponseController;
//     WebSocket upgrades, CONNECT tunnels and event streams get none.
func Front(h http.Handler, cfg Config) http.Handler {
	cfg = cfg.WithDefaults()
	return &front{next: h, read: positive(cfg.ReadTimeout), write: positive(cfg.WriteTimeout),
		trust: newTrust(cfg.TrustedProxies, cfg.Logger)}
}

type front struct {
	next        http.Handler
	read, write time.Duration
	trust       *trust
}

func (f *front) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if addr := f.trust.clientRemoteAddr(r); addr != r.RemoteAddr {
		// A shallow copy, as http.Request.WithContext makes: the server
		// keeps its own r.
		r2 := new(http.Request)
		*r2 = *r
		r2.RemoteAddr = addr
		r = r2
	}
	// A forward proxy's requests (absolute-form, CONNECT) name another
	// server's path and carry its answers: neither is Concord's to judge.
	origin := strings.HasPrefix(r.RequestURI, "/")
	if origin && !clean(r.URL.Path) {
		writeError(w, http.StatusNotFound)
		return
	}
	if !longLived(r) {
		now := time.Now()
		rc := http.NewResponseController(w)
		if f.read > 0 {
			_ = rc.SetReadDeadline(now.Add(f.read))
		}
		if f.write > 0 {
			_ = rc.SetWriteDeadline(now.Add(f.write))
		}
	}
	if !origin {
		f.next.ServeHTTP(w, r)
		return
	}
	f.next.ServeHTTP(&jsonErrors{ResponseWriter: w}, r)
}

// clean reports whether p is what http.ServeMux would route without a
// redirect: rooted, no ".", ".." or empty segment (a trailing slash is
// fine).
func clean(p string) bool {
	if p == "" || p[0] != '/' {
		return false
	}
	c := path.Clean(p)
	if strings.HasSuffix(p, "/") && c != "/" {
		c += "/"
	}
	return c == p
}

// longLived reports whether r's connection outlives a normal request: a
// WebSocket upgrade, a CONNECT tunnel or an event stream.
func longLived(r *http.Request) bool {
	if r.Method == http.MethodConnect {
		return true
	}
	if headerHas(r.Header, "Connection", "upgrade") && headerHas(r.Header, "Upgrade", "websocket") {
		return true
	}
	return headerHas(r.Header, "Accept", "text/event-stream")
}

// headerHas reports whether a comma-separated header contains token,
// case-insensitively.
func headerHas(h http.Header, name, token string) bool {
	for _, v := range h.Values(name) {
		for _, part := range strings.Split(v, ",") {
			part, _, _ = strings.Cut(part, ";")
			if strings.EqualFold(strings.TrimSpace(part), token) {
				return true
			}
		}
	}
	return false
}

// writeError sends Discord's generic error body for status: {"message":
// "404: Not Found", "code": 0}.
func writeError(w http.ResponseWriter, status int) {
	rest.WriteError(w, &rest.Error{Status: status, Code: 0, Message: statusMessage(status)})
}

// statusMessage is Discord's message of a generic error: "<code>: <text>".
func statusMessage(status int) string {
	return strconv.Itoa(status) + ": " + http.StatusText(status)
}

// jsonErrors replaces a text/plain or text/html error response (one that
// net/http's helpers write) by Discord's JSON error of the same status.
type jsonErrors struct {
	http.ResponseWriter
	wroteHeader bool
	swallow     bool // the body is replaced: drop what the handler writes
}

func (j *jsonErrors) WriteHeader(status int) {
	if j.wroteHeader {
		j.ResponseWriter.WriteHeader(status)
		return
	}
	j.wroteHeader = true
	if status >= 300 && status < 1000 && fromNetHTTP(j.Header(), status) {
		if status < 400 {
			status = http.StatusNotFound
		}
		h := j.Header()
		h.Del("Location")
		h.Del("X-Content-Type-Options")
		h.Del("Content-Length")
		writeError(j.ResponseWriter, status)
		j.swallow = true
		return
	}
	j.ResponseWriter.WriteHeader(status)
}

// fromNetHTTP reports whether a response with header h and status is one
// of net/http's helpers: http.Error (text/plain with nosniff, as the
// ServeMux's 404 and 405 and most libraries' errors) or http.Redirect
// (a 3xx with a Location). Handlers that mean to answer plain text (the
// health endpoints) set no nosniff and pass through.
func fromNetHTTP(h http.Header, status int) bool {
	if status < 400 {
		return h.Get("Location") != ""
	}
	return strings.HasPrefix(h.Get("Content-Type"), "text/plain") && h.Get("X-Content-Type-Options") == "nosniff"
}

func (j *jsonErrors) Write(b []byte) (int, error) {
	if !j.wroteHeader {
		j.WriteHeader(http.StatusOK)
	}
	if j.swallow {
		return len(b), nil
	}
	return j.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection (deadlines,
// Hijack, Flush).
func (j *jsonErrors) Unwrap() http.ResponseWriter { return j.ResponseWriter }

// Flush implements http.Flusher for handlers that assert it.
func (j *jsonErrors) Flush() {
	if !j.wroteHeader {
		j.WriteHeader(http.StatusOK)
	}
	if f, ok := j.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Hijack implements http.Hijacker for handlers that assert it.
func (j *jsonErrors) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	return http.NewResponseController(j.ResponseWriter).Hijack()
}
