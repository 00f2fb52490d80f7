package permissions

import (
	"testing"
	"time"

	"github.com/concord-chat/concord/runtime/base/snowflake"
)

func TestAccessOf(t *testing.T) {
	for _, c := range []struct {
		p    Bits
		want Access
	}{
		{0, Hidden},
		{ReadMessageHistory | SendMessages, Hidden},
		{ViewChannel, Visible},
		{ViewChannel | SendMessages, Visible},
		{ViewChannel | ReadMessageHistory, Readable},
		{All, Readable},
	} {
		if got := AccessOf(c.p); got != c.want {
			t.Errorf("AccessOf(%d) = %d, want %d", c.p, got, c.want)
		}
	}
	if Hidden.CanView() || !Visible.CanView() || Visible.CanReadHistory() || !Readable.CanReadHistory() {
		t.Fatal("Access predicates")
	}
}

// TestEngineAccess checks that the engine's decision follows overwrites
// as they change: the decision is computed at each call, never kept.
func TestEngineAccess(t *testing.T) {
	const g, owner, user, ch, role snowflake.ID = 1, 2, 3, 10, 20
	e := NewEngine(g, owner)
	e.SetRole(g, ViewChannel|ReadMessageHistory)
	e.SetRole(role, 0)
	e.SetMember(Member{UserID: user, Roles: []snowflake.ID{role}})
	now := time.Unix(0, 0)
	e.SetOverwrites(ch, nil)
	if e.Access(user, ch, now) != Readable {
		t.Fatal("default: readable")
	}
	e.SetOverwrites(ch, []Overwrite{{ID: g, Deny: ViewChannel}, {ID: role, Allow: ViewChannel}})
	if e.Access(user, ch, now) != Readable {
		t.Fatal("role overwrite allows view")
	}
	e.SetMember(Member{UserID: user})
	if e.CanView(user, ch, now) {
		t.Fatal("role removed: hidden")
	}
	e.SetOverwrites(ch, []Overwrite{{ID: user, Member: true, Allow: ViewChannel, Deny: ReadMessageHistory}})
	if e.Access(user, ch, now) != Visible {
		t.Fatal("member overwrite: visible without history")
	}
	if e.Access(99, ch, now) != Hidden || e.Access(user, 11, now) != Hidden {
		t.Fatal("non-members and unknown channels are hidden")
	}
}
