package tracing

import (
	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	otelcodes "go.opentelemetry.io/otel/codes"
	"google.golang.org/grpc"
	"google.golang.org/grpc/stats"
)

// ServerOption traces the calls a gRPC server handles, continuing the
// trace of each call's traceparent metadata. Calls whose full method
// skip reports are not traced: long-lived streams, whose one span would
// last the stream's life (their messages carry Traceparent instead).
func ServerOption(skip func(method string) bool) grpc.ServerOption {
	return grpc.StatsHandler(otelgrpc.NewServerHandler(otelgrpc.WithFilter(filter(skip))))
}

// DialOption traces a gRPC client's calls and sends the caller's span as
// traceparent metadata; skip as for ServerOption.
func DialOption(skip func(method string) bool) grpc.DialOption {
	return grpc.WithStatsHandler(otelgrpc.NewClientHandler(otelgrpc.WithFilter(filter(skip))))
}

func filter(skip func(string) bool) otelgrpc.Filter {
	return func(i *stats.RPCTagInfo) bool { return skip == nil || !skip(i.FullMethodName) }
}

// codes is the span status of a failed operation.
func codes(err error) (otelcodes.Code, string) { return otelcodes.Error, err.Error() }
