package transport_test

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/concord-chat/concord/runtime/adapters/tracing"
	"github.com/concord-chat/concord/runtime/domain/event"
	"github.com/concord-chat/concord/runtime/services/transport"
)

// A sampled batch keeps its trace across the long-lived streams: the
// relay's relay.forward span is the sender's child, and the gateway
// node's gateway.write span is the relay's, though both streams were
// opened before the trace began.
func TestStreamsCarryTheTrace(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	prev, prevProp := otel.GetTracerProvider(), otel.GetTextMapPropagator()
	otel.SetTracerProvider(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)))
	otel.SetTextMapPropagator(propagation.TraceContext{})
	t.Cleanup(func() { otel.SetTracerProvider(prev); otel.SetTextMapPropagator(prevProp) })

	a, sink, _ := gatewayNode(t, "gw-a")
	dir := &staticDir{}
	dir.set(a)
	relay := relayNode(t, dir)
	rc := transport.NewRelayClient(transport.ClientConfig{})
	defer rc.Close()
	targets := map[string][]event.Target{"gw-a": {{Session: "s1"}}}
	payload := []json.RawMessage{json.RawMessage(`{}`)}
	// An untraced batch first opens both streams.
	if err := rc.Relay(context.Background(), relay, "WARM", payload, targets); err != nil {
		t.Fatal(err)
	}
	sink.next(t)
	ctx, send := tracing.Start(context.Background(), "send")
	if err := rc.Relay(ctx, relay, "MESSAGE_CREATE", payload, targets); err != nil {
		t.Fatal(err)
	}
	send.End()
	sink.next(t)

	// gateway.write ends just after the sink returns, on the server's
	// goroutine: wait for it to be recorded.
	deadline := time.Now().Add(10 * time.Second)
	for {
		spans := rec.Ended()
		i := slices.IndexFunc(spans, func(s sdktrace.ReadOnlySpan) bool { return s.Name() == "gateway.write" })
		j := slices.IndexFunc(spans, func(s sdktrace.ReadOnlySpan) bool { return s.Name() == "relay.forward" })
		if i >= 0 && j >= 0 {
			fwd, write := spans[j], spans[i]
			if fwd.Parent().SpanID() != send.SpanContext().SpanID() || fwd.SpanContext().TraceID() != send.SpanContext().TraceID() {
				t.Errorf("relay.forward's parent %v, want the sender's span %v", fwd.Parent(), send.SpanContext())
			}
			if write.Parent().SpanID() != fwd.SpanContext().SpanID() || write.SpanContext().TraceID() != send.SpanContext().TraceID() {
				t.Errorf("gateway.write's parent %v, want relay.forward %v", write.Parent(), fwd.SpanContext())
			}
			for _, s := range spans {
				if s.Name() != "send" && s.SpanContext().TraceID() != send.SpanContext().TraceID() {
					t.Errorf("span %q of the untraced batch or the streams was recorded in trace %s", s.Name(), s.SpanContext().TraceID())
				}
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("spans recorded: %d, no relay.forward and gateway.write", len(spans))
		}
		time.Sleep(10 * time.Millisecond)
	}
}
