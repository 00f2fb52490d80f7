package presencerole

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"testing"

	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/event"
	"github.com/concord-chat/concord/runtime/domain/presence"
	"github.com/concord-chat/concord/runtime/edge/gateway"
)

// upstream records what reaches the presence service.
type upstream struct {
	connected []presence.SessionState
	updates   []presence.Update
	ended     []event.SessionID
}

func (u *upstream) Connect(_ context.Context, st presence.SessionState) error {
	u.connected = append(u.connected, st)
	return nil
}
func (u *upstream) Update(_ context.Context, _ event.SessionID, up presence.Update) error {
	u.updates = append(u.updates, up)
	return nil
}
func (u *upstream) Disconnect(_ context.Context, id event.SessionID)        { u.ended = append(u.ended, id) }
func (u *upstream) Report(context.Context, string, []presence.SessionState) {}

// owner records the requests a guild owner's client is sent.
type owner struct {
	guilds []snowflake.ID
	raw    []string
}

func (o *owner) LazyRequest(_ context.Context, g snowflake.ID, _ event.Session, d json.RawMessage) error {
	o.guilds, o.raw = append(o.guilds, g), append(o.raw, string(d))
	return nil
}
func (o *owner) RequestMembers(_ context.Context, g snowflake.ID, _ event.Session, d json.RawMessage) error {
	o.guilds, o.raw = append(o.guilds, g), append(o.raw, string(d))
	return errors.New("owner down") // logged, the session stays
}

// The gateway's presence side: IDENTIFY's presence and op 3 reach the
// presence service, a session's end runs Ended, op 8 and op 14 go to
// their guild with the payload as sent, and payloads that do not decode
// close with 4002.
func TestGateway(t *testing.T) {
	up, own := &upstream{}, &owner{}
	var ended []event.SessionID
	g := &Gateway{
		Sessions: presence.NewLocalSessions(presence.LocalSessionsConfig{Upstream: up}),
		Guilds:   OwnerGuilds{Client: own},
		Ended:    func(id event.SessionID) { ended = append(ended, id) },
		Logger:   slog.New(slog.DiscardHandler),
	}
	ctx := context.Background()
	s := event.Session{ID: "s1", UserID: 7, Node: "n1"}
	g.SessionStarted(ctx, s, gateway.ClientInfo{Presence: json.RawMessage(`{"status":"dnd","activities":[],"since":null,"afk":false}`)})
	if len(up.connected) != 1 || up.connected[0].Status != presence.DND || up.connected[0].Activities == nil {
		t.Fatalf("identify's presence: %+v", up.connected)
	}
	ops := g.OpHandlers()
	if err := ops[gateway.OpPresenceUpdate].HandleOp(ctx, s, gateway.OpPresenceUpdate, json.RawMessage(`{"status":"idle","activities":[],"since":0,"afk":true}`)); err != nil {
		t.Fatal(err)
	}
	if len(up.updates) != 1 || up.updates[0].Status != presence.Idle {
		t.Fatalf("op 3: %+v", up.updates)
	}
	lazy := `{"guild_id":"42","channels":{"43":[[0,99]]}}`
	if err := ops[gateway.OpLazyRequest].HandleOp(ctx, s, gateway.OpLazyRequest, json.RawMessage(lazy)); err != nil {
		t.Fatal(err)
	}
	members := `{"guild_id":"44","query":"","limit":0}`
	if err := ops[gateway.OpRequestGuildMembers].HandleOp(ctx, s, gateway.OpRequestGuildMembers, json.RawMessage(members)); err != nil {
		t.Fatalf("an owner that cannot be reached closes the session: %v", err)
	}
	if len(own.guilds) != 2 || own.guilds[0] != 42 || own.guilds[1] != 44 || own.raw[0] != lazy || own.raw[1] != members {
		t.Fatalf("op 14 and op 8 at the owner: %v %q", own.guilds, own.raw)
	}
	for op, d := range map[int]string{gateway.OpPresenceUpdate: `{"status":"nope"}`, gateway.OpLazyRequest: `[`, gateway.OpRequestGuildMembers: `[`} {
		var ce *gateway.CloseError
		if err := ops[op].HandleOp(ctx, s, op, json.RawMessage(d)); !errors.As(err, &ce) || ce.Code != gateway.CloseDecodeError {
			t.Errorf("op %d with %s: %v, want close 4002", op, d, err)
		}
	}
	g.SessionEnded(ctx, s)
	if len(up.ended) != 1 || len(ended) != 1 || ended[0] != "s1" {
		t.Fatalf("session end: upstream %v, Ended %v", up.ended, ended)
	}
}
