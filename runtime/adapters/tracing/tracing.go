// Package tracing is Concord's OpenTelemetry tracing: one tracer provider
// per process exporting over OTLP/gRPC, W3C traceparent propagation over
// HTTP (Handler, Transport) and gRPC (the transport package's stats
// handlers), and helpers for the spans the send path opens.
//
// The provider is installed as OpenTelemetry's global one (Setup), once,
// by the process wiring (runtime/app): the send path crosses a dozen
// packages, and handing a tracer to each would thread a parameter through
// every constructor for what is, like the default Prometheus registry, a
// process-wide sink. Packages call Start with their own span names. With
// tracing off (the default of `concord dev`, or no endpoint) the global
// provider stays OpenTelemetry's no-op one and Start costs a context
// lookup.
package tracing

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.26.0"
	"go.opentelemetry.io/otel/trace"
)

// Config chooses whether and where spans go.
type Config struct {
	// Endpoint is the OTLP/gRPC collector (host:port, plaintext). Empty
	// turns tracing off.
	Endpoint string
	// Sample is the share of new traces recorded, 0 to 1; a request that
	// arrives with a sampled traceparent is recorded whatever it is. 0
	// turns tracing off.
	Sample float64
}

// Validate checks cfg.
func (c Config) Validate() error {
	if c.Sample < 0 || c.Sample > 1 {
		return fmt.Errorf("tracing: sample %v is not between 0 and 1", c.Sample)
	}
	return nil
}

// On reports whether cfg records spans.
func (c Config) On() bool { return c.Endpoint != "" && c.Sample > 0 }

// Setup installs the process's tracer provider and the W3C trace-context
// propagator as OpenTelemetry's globals, naming the process by node and
// roles in every span's resource. The returned shutdown flushes the
// spans still queued. With cfg off it installs only the propagator, so a
// process that does not record still passes traceparent on.
func Setup(ctx context.Context, cfg Config, node string, roles []string) (shutdown func(context.Context) error, err error) {
	otel.SetTextMapPropagator(propagation.TraceContext{})
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if !cfg.On() {
		return func(context.Context) error { return nil }, nil
	}
	exp, err := otlptracegrpc.New(ctx, otlptracegrpc.WithEndpoint(strings.TrimPrefix(cfg.Endpoint, "http://")), otlptracegrpc.WithInsecure())
	if err != nil {
		return nil, fmt.Errorf("tracing: OTLP exporter for %s: %w", cfg.Endpoint, err)
	}
	res, err := resource.Merge(resource.Default(), resource.NewWithAttributes(semconv.SchemaURL,
		semconv.ServiceName("concord"),
		semconv.ServiceInstanceID(node),
		attribute.StringSlice("concord.roles", roles),
	))
	if err != nil && !errors.Is(err, resource.ErrSchemaURLConflict) {
		return nil, fmt.Errorf("tracing: resource: %w", err)
	}
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exp),
		sdktrace.WithResource(res),
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(cfg.Sample))),
	)
	otel.SetTracerProvider(tp)
	return tp.Shutdown, nil
}

// tracerName is the instrumentation scope of Concord's own spans.
const tracerName = "github.com/concord-chat/concord"

// Start opens a span named name under ctx's span (a root when there is
// none), with attrs. End it with End.
func Start(ctx context.Context, name string, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	return otel.Tracer(tracerName).Start(ctx, name, trace.WithAttributes(attrs...))
}

// StartFollowing opens a span named name that continues the trace of the
// remote span tp names (from Traceparent) — its parent — and links to
// ctx's own span: for a request that answers earlier work, such as a
// bot's interaction callback answering the invocation, so the round trip
// is one trace and the answering request's own trace stays reachable.
// With tp empty (the earlier work was not sampled, or is unknown here)
// it is Start.
func StartFollowing(ctx context.Context, tp, name string, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	if tp == "" {
		return Start(ctx, name, attrs...)
	}
	opts := []trace.SpanStartOption{trace.WithAttributes(attrs...)}
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		opts = append(opts, trace.WithLinks(trace.Link{SpanContext: sc}))
	}
	return otel.Tracer(tracerName).Start(WithTraceparent(ctx, tp), name, opts...)
}

// End ends span, recording err (when not nil) as its status.
func End(span trace.Span, err error) {
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes(err))
	}
	span.End()
}

// Traceparent is ctx's span as a W3C traceparent header value, "" when
// ctx carries no sampled span: for messages that cross a long-lived
// stream, whose metadata was sent once for many (the gateway Deliver
// stream).
func Traceparent(ctx context.Context) string {
	if !trace.SpanContextFromContext(ctx).IsSampled() {
		return ""
	}
	c := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(ctx, c)
	return c["traceparent"]
}

// WithTraceparent returns ctx carrying the remote span tp names (from
// Traceparent); ctx unchanged when tp is empty or invalid.
func WithTraceparent(ctx context.Context, tp string) context.Context {
	if tp == "" {
		return ctx
	}
	return propagation.TraceContext{}.Extract(ctx, propagation.MapCarrier{"traceparent": tp})
}
