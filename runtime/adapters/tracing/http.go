package tracing

import (
	"net/http"
	"strings"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	otelcodes "go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// Handler traces the requests next serves: each continues the trace of
// its traceparent header (or starts one, as the sampler decides) in a
// server span named for its method and path. WebSocket upgrades and event
// streams are left alone: a span that lasts a connection's life says
// nothing about one request; so are the probes and scrapes (/metrics,
// /healthz, /readyz, /livez), which would fill the sampled share with
// traces of nothing.
func Handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Upgrade") != "" || strings.Contains(r.Header.Get("Accept"), "text/event-stream") || operational(r.URL.Path) {
			next.ServeHTTP(w, r)
			return
		}
		ctx := otel.GetTextMapPropagator().Extract(r.Context(), propagation.HeaderCarrier(r.Header))
		ctx, span := otel.Tracer(tracerName).Start(ctx, r.Method+" "+route(r.URL.Path),
			trace.WithSpanKind(trace.SpanKindServer),
			trace.WithAttributes(attribute.String("http.request.method", r.Method), attribute.String("url.path", redact(r.URL.Path))))
		defer span.End()
		sw := &statusWriter{ResponseWriter: w}
		next.ServeHTTP(sw, r.WithContext(ctx))
		span.SetAttributes(attribute.Int("http.response.status_code", sw.code()))
		if sw.code() >= 500 {
			span.SetStatus(otelcodes.Error, http.StatusText(sw.code()))
		}
	})
}

// operational reports the paths of probes and scrapes.
func operational(p string) bool {
	switch p {
	case "/metrics", "/healthz", "/readyz", "/livez":
		return true
	}
	return false
}

// route names a path in a span's name without its ids or tokens, so
// spans of one route share a name: every all-digit segment becomes {id}
// (and tokens {token}, as redact does).
func route(p string) string {
	segs := strings.Split(redact(p), "/")
	for i, s := range segs {
		if s != "" && strings.Trim(s, "0123456789") == "" {
			segs[i] = "{id}"
		}
	}
	return strings.Join(segs, "/")
}

// redact replaces the secrets paths carry with {token}: the token after
// /webhooks/{id}/ and /interactions/{id}/ (a webhook's or an
// interaction's token is its whole credential, and spans are exported to
// a collector others read).
func redact(p string) string {
	segs := strings.Split(p, "/")
	changed := false
	for i := 2; i < len(segs); i++ {
		if (segs[i-2] == "webhooks" || segs[i-2] == "interactions") && segs[i] != "" {
			segs[i] = "{token}"
			changed = true
		}
	}
	if !changed {
		return p
	}
	return strings.Join(segs, "/")
}

// Transport returns rt (http.DefaultTransport when nil) with the caller's
// span injected into every request as traceparent: for the hops a process
// makes over HTTP (the api nodes' proxy to guild nodes).
func Transport(rt http.RoundTripper) http.RoundTripper {
	if rt == nil {
		rt = http.DefaultTransport
	}
	return roundTripper{rt}
}

type roundTripper struct{ next http.RoundTripper }

func (t roundTripper) RoundTrip(r *http.Request) (*http.Response, error) {
	if !trace.SpanContextFromContext(r.Context()).IsValid() {
		return t.next.RoundTrip(r)
	}
	r = r.Clone(r.Context())
	otel.GetTextMapPropagator().Inject(r.Context(), propagation.HeaderCarrier(r.Header))
	return t.next.RoundTrip(r)
}

// statusWriter remembers the status written.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) code() int {
	if w.status == 0 {
		return http.StatusOK
	}
	return w.status
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Flush passes flushes on (streaming answers).
func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}
