package guildrole

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/concord-chat/concord/runtime/domain/event"
	"github.com/concord-chat/concord/runtime/domain/presence"
	"github.com/concord-chat/concord/runtime/services/transport"
)

// TestGuildBackendRefusesBeforeTheActor: forwarded gateway ops whose
// payload does not parse, or names another guild than the one the call
// was routed by, are ErrInvalid (InvalidArgument on the wire) without
// reaching the guild service; a node without presence does not serve
// PresenceChanged. The backend has no service here, so reaching it would
// panic.
func TestGuildBackendRefusesBeforeTheActor(t *testing.T) {
	b := guildBackend{}
	ctx := context.Background()
	s := event.Session{ID: "s1", UserID: 1, Node: "gw-1"}
	for name, call := range map[string]func(json.RawMessage) error{
		"LazyRequest":    func(d json.RawMessage) error { return b.LazyRequest(ctx, 5, s, d) },
		"RequestMembers": func(d json.RawMessage) error { return b.RequestMembers(ctx, 5, s, d) },
	} {
		for _, d := range []string{`{`, `[]`, `{"guild_id":"6","channels":{},"query":"","limit":0}`} {
			if err := call(json.RawMessage(d)); !errors.Is(err, transport.ErrInvalid) {
				t.Errorf("%s(%s) = %v, want ErrInvalid", name, d, err)
			}
		}
	}
	if err := b.PresenceChanged(ctx, 5, 1, presence.OfflinePresence()); !errors.Is(err, transport.ErrNotServed) {
		t.Errorf("PresenceChanged without presence = %v, want ErrNotServed", err)
	}
}
