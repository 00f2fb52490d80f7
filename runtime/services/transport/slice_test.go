package transport_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/event"
	"github.com/concord-chat/concord/runtime/domain/fanout"
	"github.com/concord-chat/concord/runtime/domain/permissions"
	"github.com/concord-chat/concord/runtime/services/transport"
)

// TestSliceClientBehindThenSnapshot checks the slice client against a
// relay: an entry the relay's slice cannot apply (no snapshot yet) ends
// the stream, and the client reports fanout.ErrBehind; a snapshot then
// goes on a fresh stream, and the next event reaches the session's
// gateway node through the relay.
func TestSliceClientBehindThenSnapshot(t *testing.T) {
	gw, sink, _ := gatewayNode(t, "gw-a")
	dir := &staticDir{}
	dir.set(gw)
	relay := relayNode(t, dir)
	sc := transport.NewSliceClient(transport.ClientConfig{})
	defer sc.Close()
	ctx := context.Background()
	const guild, channel, user snowflake.ID = 100, 200, 300
	ev := &fanout.Event{Type: "MESSAGE_CREATE", Payloads: []json.RawMessage{json.RawMessage(`{}`)}, Kind: fanout.KindChannel, Intent: 1 << 9, Channel: channel}

	// The relay ends the stream on the first entry; the client sees it
	// on a later send, when the stream's end has come back.
	var err error
	for err == nil {
		err = sc.Send(ctx, relay, &fanout.Entry{Guild: guild, Event: ev})
	}
	if !errors.Is(err, fanout.ErrBehind) {
		t.Fatalf("entries before a snapshot: %v, want ErrBehind", err)
	}

	snapshot := &fanout.Entry{Guild: guild, Version: 5, Reset: true, Members: 2,
		Changes: []permissions.Change{
			{Op: permissions.OpRole, ID: guild, Bits: permissions.ViewChannel},
			{Op: permissions.OpOverwrites, ID: channel},
		},
		Add: []fanout.Slot{{Session: event.Session{ID: "s", UserID: user, Node: "gw-a"}, Member: &permissions.Member{UserID: user}}},
	}
	if err := sc.Send(ctx, relay, snapshot); err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	if err := sc.Send(ctx, relay, &fanout.Entry{Guild: guild, Version: 5, Event: ev}); err != nil {
		t.Fatalf("event after the snapshot: %v", err)
	}
	d := sink.next(t)
	if d.node != "gw-a" || d.b.Type != "MESSAGE_CREATE" || len(d.b.Targets) != 1 || d.b.Targets[0].Session != "s" {
		t.Fatalf("gw-a got %+v for %s, want MESSAGE_CREATE to s", d.b, d.node)
	}
	sink.none(t)
}
