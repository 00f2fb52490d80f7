package gateway

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/concord-chat/concord/runtime/adapters/tracing"
)

// traceWrites opens a "live.sse.write" span for each sampled comment of a
// flush — a child of the router's span the comment carried over the
// relay — covering the flush's writes to its viewers (n of them get
// frames): the last hop of a post's trace.
func traceWrites(pend []outFrame, n int) []trace.Span {
	var spans []trace.Span
	for i := range pend {
		if pend[i].trace == "" {
			continue
		}
		_, span := tracing.Start(tracing.WithTraceparent(context.Background(), pend[i].trace), "live.sse.write",
			attribute.Int("viewers", n))
		spans = append(spans, span)
	}
	return spans
}

// endSpans ends spans.
func endSpans(spans []trace.Span) {
	for _, s := range spans {
		s.End()
	}
}
