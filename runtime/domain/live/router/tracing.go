package router

import (
	"context"

	"go.opentelemetry.io/otel/trace"

	"github.com/concord-chat/concord/runtime/adapters/tracing"
	"github.com/concord-chat/concord/runtime/domain/live"
)

// traceRoute opens a "live.route" span for each sampled event of a batch
// about to be published — a child of the API's span the event carries —
// and puts the span's own traceparent in the event, so the gateway's
// span continues from the router's across the relay. Unsampled events
// (all of them with tracing off) cost a string comparison.
func traceRoute(ctx context.Context, evs []live.Event) []trace.Span {
	var spans []trace.Span
	for i := range evs {
		if evs[i].Trace == "" {
			continue
		}
		sctx, span := tracing.Start(tracing.WithTraceparent(ctx, evs[i].Trace), "live.route")
		evs[i].Trace = tracing.Traceparent(sctx)
		spans = append(spans, span)
	}
	return spans
}

// endRoute ends traceRoute's spans with the publish's outcome.
func endRoute(spans []trace.Span, err error) {
	for _, s := range spans {
		tracing.End(s, err)
	}
}
