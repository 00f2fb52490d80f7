package transport_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/concord-chat/concord/runtime/domain/event"
	"github.com/concord-chat/concord/runtime/services/transport"
	"github.com/concord-chat/concord/runtime/services/transport/transportpb"
)

// relayNode starts a relay whose batches go to the gateway nodes in dir.
func relayNode(t *testing.T, dir *staticDir) string {
	t.Helper()
	gc := transport.NewGatewayClient(transport.ClientConfig{}, dir)
	t.Cleanup(func() { gc.Close() })
	srv, err := transport.NewServer(transport.ServerConfig{}, transport.Services{Relay: gc})
	if err != nil {
		t.Fatal(err)
	}
	return serve(t, srv)
}

func TestRelaySplitsPerGatewayNodeInOrder(t *testing.T) {
	a, sinkA, _ := gatewayNode(t, "gw-a")
	b, sinkB, _ := gatewayNode(t, "gw-b")
	dir := &staticDir{}
	dir.set(a)
	dir.set(b)
	relay := relayNode(t, dir)
	rc := transport.NewRelayClient(transport.ClientConfig{})
	defer rc.Close()
	ctx := context.Background()
	payloads := []json.RawMessage{json.RawMessage(`{"v":0}`), json.RawMessage(`{"v":1}`)}
	for i := range 50 {
		err := rc.Relay(ctx, relay, fmt.Sprintf("E%d", i), payloads, map[string][]event.Target{
			"gw-a": {{Session: "s1"}, {Session: "s2", Variant: 1}},
			"gw-b": {{Session: "s9", Variant: 1}},
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	for i := range 50 {
		d := sinkA.next(t)
		if d.node != "gw-a" || d.b.Type != fmt.Sprintf("E%d", i) || len(d.b.Targets) != 2 ||
			d.b.Targets[1] != (event.Target{Session: "s2", Variant: 1}) || string(d.b.Payloads[1]) != `{"v":1}` {
			t.Fatalf("gw-a got %+v for %s, want E%d to s1, s2(v1)", d.b, d.node, i)
		}
		d = sinkB.next(t)
		if d.node != "gw-b" || d.b.Type != fmt.Sprintf("E%d", i) || len(d.b.Targets) != 1 ||
			d.b.Targets[0].Session != "s9" || string(d.b.Payloads[d.b.Targets[0].Variant]) != `{"v":1}` {
			t.Fatalf("gw-b got %+v for %s, want E%d to s9(v1)", d.b, d.node, i)
		}
	}
	sinkA.none(t)
	sinkB.none(t)
}

func TestRelayRejectsMalformedRequests(t *testing.T) {
	relay := relayNode(t, &staticDir{})
	conn, err := grpc.NewClient(relay, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	for name, req := range map[string]*transportpb.RelayRequest{
		"lengths past the ids": {Type: "X", Payloads: [][]byte{[]byte(`{}`)},
			Nodes: []*transportpb.DeliverRequest{{Node: "gw-a", SessionIds: []byte("ab"), SessionIdLengths: []uint32{3}}}},
		"variant without payload": {Type: "X", Payloads: [][]byte{[]byte(`{}`)},
			Nodes: []*transportpb.DeliverRequest{{Node: "gw-a", SessionIds: []byte("ab"), SessionIdLengths: []uint32{2}, Variants: []uint32{1}}}},
		"unnamed node": {Type: "X", Payloads: [][]byte{[]byte(`{}`)},
			Nodes: []*transportpb.DeliverRequest{{SessionIds: []byte("ab"), SessionIdLengths: []uint32{2}}}},
	} {
		st, err := transportpb.NewRelayNodeClient(conn).Relay(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		_ = st.Send(req)
		if _, err := st.CloseAndRecv(); status.Code(err) != codes.InvalidArgument {
			t.Errorf("%s: %v, want InvalidArgument", name, err)
		}
	}
}
