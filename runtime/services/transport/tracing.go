package transport

import (
	"context"

	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"

	"github.com/concord-chat/concord/runtime/services/transport/transportpb"
)

// streamMethods are the full names of the streaming methods: they live
// as long as the connection between two nodes, so they get no span of
// their own; what crosses them carries the sender's span in the message
// (DeliverRequest.traceparent).
var streamMethods = func() map[string]bool {
	m := map[string]bool{}
	for _, d := range []grpc.ServiceDesc{transportpb.GatewayNode_ServiceDesc, transportpb.GuildNode_ServiceDesc,
		transportpb.DataNode_ServiceDesc, transportpb.RelayNode_ServiceDesc, transportpb.PresenceNode_ServiceDesc,
		transportpb.ReadStateNode_ServiceDesc} {
		for _, s := range d.Streams {
			m["/"+d.ServiceName+"/"+s.StreamName] = true
		}
	}
	return m
}()

// noSpan is the span of a request that carries no trace.
var noSpan = trace.SpanFromContext(context.Background())

// untraced reports the methods the gRPC stats handlers leave alone.
func untraced(method string) bool { return streamMethods[method] }
