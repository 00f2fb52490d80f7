package ratelimit

import (
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/concord-chat/concord/runtime/adapters/tracing"
)

// Middleware limits the requests next serves. identify names the request's
// principal from its credentials (it is the API's token check); when it
// returns false the request is limited as its client address. The route
// A nil identify limits every request by address. The route
// comes from Config.RouteOf: the middleware runs before routing, so by
// default it reads the URL path (PathRoute), not r.Pattern.
//
// Every response gets the X-RateLimit-* headers of its route bucket, set
// before next runs. A refused request is answered with a 429 and never
// reaches next. After next returns, its status is reported (Report), so
// 401s and 403s the API writes count towards a ban.
func (l *Limiter) Middleware(next http.Handler, identify func(*http.Request) (Principal, bool)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		template, major := l.cfg.RouteOf(r)
		req := Request{Method: r.Method, Route: template, Major: major, Token: BearerToken(r), Addr: l.cfg.ClientAddr(r)}
		if l.routes[r.Method+" "+template].OnlyFields != "" {
			req.Body = peekBody(r)
		}
		if p, ok := identifyOrNot(identify, r); ok {
			req.Principal = p
		} else {
			req.Principal = Principal{ID: "addr:" + req.Addr}
		}
		ctx, span := tracing.Start(r.Context(), "ratelimit")
		res := l.Check(ctx, req)
		span.SetAttributes(attribute.Bool("allowed", res.Allowed))
		span.End()
		ctx = r.Context()
		setHeaders(w.Header(), res)
		if !res.Allowed {
			writeTooMany(w, res)
			l.m.observeResponse(r.Method, template, http.StatusTooManyRequests)
			if !res.Banned {
				l.Report(ctx, req, http.StatusTooManyRequests, res.Scope)
			}
			return
		}
		sw := &statusWriter{ResponseWriter: w}
		next.ServeHTTP(sw, r)
		if sw.status == 0 {
			sw.status = http.StatusOK
		}
		l.m.observeResponse(r.Method, template, sw.status)
		var scope Scope
		if v := w.Header()[hScope]; len(v) > 0 {
			scope = Scope(v[0])
		}
		l.Report(ctx, req, sw.status, scope)
	})
}

func identifyOrNot(identify func(*http.Request) (Principal, bool), r *http.Request) (Principal, bool) {
	if identify == nil {
		return Principal{}, false
	}
	return identify(r)
}

// BearerToken returns the credential of r's Authorization header without
// a "Bot " or "Bearer " prefix (discordgo sends "Bot <token>", other
// libraries may send the bare token), "" if there is none.
func BearerToken(r *http.Request) string {
	auth := r.Header.Get("Authorization")
	for _, p := range [...]string{"Bot ", "Bearer "} {
		if len(auth) > len(p) && strings.EqualFold(auth[:len(p)], p) {
			return auth[len(p):]
		}
	}
	return auth
}

// Canonical header keys, so the hot path skips canonicalising them.
var (
	hLimit      = http.CanonicalHeaderKey("X-RateLimit-Limit")
	hRemaining  = http.CanonicalHeaderKey("X-RateLimit-Remaining")
	hReset      = http.CanonicalHeaderKey("X-RateLimit-Reset")
	hResetAfter = http.CanonicalHeaderKey("X-RateLimit-Reset-After")
	hBucket     = http.CanonicalHeaderKey("X-RateLimit-Bucket")
	hScope      = http.CanonicalHeaderKey("X-RateLimit-Scope")
)

// setHeaders writes the route bucket's state.
func setHeaders(h http.Header, res Result) {
	reset := res.Now.Add(res.ResetAfter)
	v := make([]string, 5) // one allocation for the five values
	v[0] = strconv.Itoa(res.Limit)
	v[1] = strconv.Itoa(res.Remaining)
	v[2] = strconv.FormatFloat(float64(reset.UnixMilli())/1000, 'f', 3, 64)
	v[3] = seconds(res.ResetAfter)
	v[4] = res.Bucket
	h[hLimit], h[hRemaining], h[hReset], h[hResetAfter], h[hBucket] = v[0:1:1], v[1:2:2], v[2:3:3], v[3:4:4], v[4:5:5]
}

// writeTooMany writes the 429 Discord clients expect.
func writeTooMany(w http.ResponseWriter, res Result) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	// Retry-After is whole seconds (HTTP); the body has the exact figure.
	h.Set("Retry-After", strconv.FormatInt(int64(math.Ceil(res.RetryAfter.Seconds())), 10))
	h.Set("Via", "1.1 concord")
	h.Set("X-RateLimit-Scope", string(res.Scope))
	if res.Global {
		h.Set("X-RateLimit-Global", "true")
	}
	w.WriteHeader(http.StatusTooManyRequests)
	w.Write([]byte(`{"message":"You are being rate limited.","retry_after":` + seconds(res.RetryAfter) +
		`,"global":` + strconv.FormatBool(res.Global) + `}`))
}

// seconds formats d as fractional seconds with millisecond precision,
// rounded up so a client never retries early.
func seconds(d time.Duration) string {
	ms := (d + time.Millisecond - 1) / time.Millisecond
	return strconv.FormatFloat(float64(ms)/1000, 'f', 3, 64)
}

// statusWriter remembers the status next wrote.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 && code >= 200 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the underlying writer
// (Flush, deadlines, Hijack).
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
