package guild

import (
	"testing"

	"github.com/concord-chat/concord/runtime/domain/event"
)

// TestHasSession: a session counts while attached to one of the
// service's guilds and not after its last detach.
func TestHasSession(t *testing.T) {
	f := newFixture(t)
	owner := f.user("owner", false)
	g1 := must[GuildInfo](t)(f.svc.CreateGuild(bg, owner.ID, "one"))
	g2 := must[GuildInfo](t)(f.svc.CreateGuild(bg, owner.ID, "two"))
	s := event.Session{ID: "s-remote", UserID: owner.ID, Node: "gateway-9"}
	if f.svc.HasSession(s.ID) {
		t.Fatal("session known before attach")
	}
	for _, g := range []GuildInfo{g1, g2} {
		if err := f.svc.AttachSession(bg, g.Guild.ID, s); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.svc.DetachSession(bg, g1.Guild.ID, s); err != nil {
		t.Fatal(err)
	}
	if !f.svc.HasSession(s.ID) {
		t.Fatal("session forgotten while still attached to a guild")
	}
	if err := f.svc.DetachSession(bg, g2.Guild.ID, s); err != nil {
		t.Fatal(err)
	}
	if f.svc.HasSession(s.ID) {
		t.Fatal("session known after its last detach")
	}
}
