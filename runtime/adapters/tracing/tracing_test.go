package tracing

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// record installs a provider sampling everything into a recorder for the
// test, and the W3C propagator Setup installs.
func record(t *testing.T) *tracetest.SpanRecorder {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	prev, prevProp := otel.GetTracerProvider(), otel.GetTextMapPropagator()
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.TraceContext{})
	t.Cleanup(func() { otel.SetTracerProvider(prev); otel.SetTextMapPropagator(prevProp) })
	return rec
}

// A request carrying a traceparent continues that trace across the hop:
// the server span is the remote span's child, its name has no ids, and
// Transport hands the handler's span on to the next hop.
func TestHandlerContinuesTrace(t *testing.T) {
	rec := record(t)
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	var next string
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		next = r.Header.Get("traceparent")
	}))
	defer upstream.Close()
	h := Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req, _ := http.NewRequestWithContext(r.Context(), "GET", upstream.URL, nil)
		resp, err := (&http.Client{Transport: Transport(nil)}).Do(req)
		if err != nil {
			t.Error(err)
			return
		}
		resp.Body.Close()
		w.WriteHeader(http.StatusTeapot)
	}))
	req := httptest.NewRequest("POST", "/api/v10/channels/123456789012345678/messages", nil)
	req.Header.Set("traceparent", tp)
	h.ServeHTTP(httptest.NewRecorder(), req)

	spans := rec.Ended()
	if len(spans) != 1 {
		t.Fatalf("%d spans, want the server span", len(spans))
	}
	s := spans[0]
	if got := s.SpanContext().TraceID().String(); got != "4bf92f3577b34da6a3ce929d0e0e4736" {
		t.Errorf("trace id %s, want the traceparent's", got)
	}
	if got := s.Parent().SpanID().String(); got != "00f067aa0ba902b7" || !s.Parent().IsRemote() {
		t.Errorf("parent %s (remote %v), want the traceparent's span", got, s.Parent().IsRemote())
	}
	if s.Name() != "POST /api/v10/channels/{id}/messages" || s.SpanKind() != trace.SpanKindServer {
		t.Errorf("span %q kind %v", s.Name(), s.SpanKind())
	}
	want := "00-4bf92f3577b34da6a3ce929d0e0e4736-" + s.SpanContext().SpanID().String() + "-01"
	if next != want {
		t.Errorf("next hop got traceparent %q, want %q (the server span)", next, want)
	}
}

// WebSocket upgrades get no span (one would last the connection), nor
// do probes and scrapes.
func TestHandlerSkips(t *testing.T) {
	rec := record(t)
	upgrade := httptest.NewRequest("GET", "/gateway", nil)
	upgrade.Header.Set("Upgrade", "websocket")
	for _, req := range []*http.Request{upgrade, httptest.NewRequest("GET", "/metrics", nil), httptest.NewRequest("GET", "/readyz", nil)} {
		Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})).ServeHTTP(httptest.NewRecorder(), req)
	}
	if n := len(rec.Ended()); n != 0 {
		t.Fatalf("%d spans for an upgrade and probes", n)
	}
}

// Traceparent carries a sampled span over a message and WithTraceparent
// restores it; an unsampled context carries nothing.
func TestTraceparentRoundTrip(t *testing.T) {
	record(t)
	if got := Traceparent(context.Background()); got != "" {
		t.Fatalf("Traceparent without a span = %q", got)
	}
	ctx, span := Start(context.Background(), "send")
	defer span.End()
	tp := Traceparent(ctx)
	back := trace.SpanContextFromContext(WithTraceparent(context.Background(), tp))
	if back.TraceID() != span.SpanContext().TraceID() || back.SpanID() != span.SpanContext().SpanID() || !back.IsRemote() {
		t.Fatalf("round trip of %q gave %v", tp, back)
	}
	if got := WithTraceparent(context.Background(), "garbage"); trace.SpanContextFromContext(got).IsValid() {
		t.Fatal("an invalid traceparent gave a span")
	}
}

func TestConfig(t *testing.T) {
	if (Config{Endpoint: "x:4317"}).On() || (Config{Sample: 1}).On() || !(Config{Endpoint: "x:4317", Sample: 0.1}).On() {
		t.Fatal("On: want both an endpoint and a sample share")
	}
	if _, err := Setup(context.Background(), Config{Endpoint: "x:4317", Sample: 1.5}, "n", nil); err == nil {
		t.Fatal("Setup took a sample share above 1")
	}
	stop, err := Setup(context.Background(), Config{}, "n", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := stop(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func TestRoute(t *testing.T) {
	for in, want := range map[string]string{
		"/api/v10/channels/123/messages/456": "/api/v10/channels/{id}/messages/{id}",
		"/healthz":                           "/healthz",
		"/v1/streams/abc/comments":           "/v1/streams/abc/comments",
		// Tokens are credentials: never in a span.
		"/api/v10/interactions/123/aW50ZXJhY3Rpb24/callback": "/api/v10/interactions/{id}/{token}/callback",
		"/api/v10/webhooks/123/tok_en/messages/@original":    "/api/v10/webhooks/{id}/{token}/messages/@original",
		"/api/v10/webhooks/123":                              "/api/v10/webhooks/{id}",
	} {
		if got := route(in); got != want {
			t.Errorf("route(%q) = %q, want %q", in, got, want)
		}
	}
}
