package transport

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/concord-chat/concord/runtime/domain/event"
	"github.com/concord-chat/concord/runtime/services/transport/transportpb"
)

func TestBatchRoundTrip(t *testing.T) {
	for _, b := range []event.Batch{
		{Type: "EMPTY", Payloads: []json.RawMessage{}, Targets: []event.Target{}},
		{Type: "ONE", Payloads: []json.RawMessage{json.RawMessage(`{}`)}, Targets: []event.Target{{Session: "abc"}}},
		{Type: "MIXED", Payloads: []json.RawMessage{json.RawMessage(`{"a":1}`), json.RawMessage(`{"a":2}`)},
			Targets: []event.Target{{Session: "s1"}, {Session: "", Variant: 1}, {Session: "session-three", Variant: 0}}},
	} {
		var req transportpb.DeliverRequest
		fillDeliver(&req, "gw", b)
		got, ok := batchFromPB(&req)
		if !ok || !reflect.DeepEqual(got, b) {
			t.Errorf("%s: round trip = %+v, %v", b.Type, got, ok)
		}
	}
}

func TestBatchFromPBRejectsMalformed(t *testing.T) {
	p := [][]byte{[]byte(`{}`)}
	for name, req := range map[string]*transportpb.DeliverRequest{
		"lengths past the ids":   {Payloads: p, SessionIds: []byte("ab"), SessionIdLengths: []uint32{3}},
		"ids left over":          {Payloads: p, SessionIds: []byte("abc"), SessionIdLengths: []uint32{2}},
		"variant count mismatch": {Payloads: p, SessionIds: []byte("ab"), SessionIdLengths: []uint32{1, 1}, Variants: []uint32{0}},
		"variant out of range":   {Payloads: p, SessionIds: []byte("a"), SessionIdLengths: []uint32{1}, Variants: []uint32{1}},
		"huge length":            {Payloads: p, SessionIds: []byte("a"), SessionIdLengths: []uint32{1, 1 << 31}},
	} {
		if _, ok := batchFromPB(req); ok {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestSessionRoundTrip(t *testing.T) {
	s := event.Session{ID: "x", UserID: 1 << 60, Bot: true, Intents: 1<<40 | 3, ShardID: 3, ShardCount: 8, Node: "gw"}
	got, ok := sessionFromPB(sessionToPB(s))
	if !ok || got != s {
		t.Fatalf("round trip = %+v, %v", got, ok)
	}
	if _, ok := sessionFromPB(nil); ok {
		t.Fatal("nil session accepted")
	}
}
