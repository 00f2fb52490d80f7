package guild

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/event"
)

// TestReaderAlone checks that a Reader opened alone on the store — what
// a cluster node without guild actors runs — gives the READY a guild
// service gives for the same session, maps channels to their guilds and
// answers private channels by their recipients as the store has them.
func TestReaderAlone(t *testing.T) {
	f := newFixture(t)
	g := f.secretGuild()
	other := f.user("other", false)
	dm, err := f.svc.Private.CreateDM(bg, g.member.ID, g.owner.ID)
	if err != nil {
		t.Fatal(err)
	}
	r := NewReader(f.store, f.auth)
	token := f.auth.Mint(g.member)
	s := event.Session{ID: "r1", Intents: IntentGuilds}
	want, err := f.svc.Identify(bg, token, s)
	if err != nil {
		t.Fatal(err)
	}
	got, err := r.Identify(bg, token, s)
	if err != nil {
		t.Fatal(err)
	}
	if got.UserID != want.UserID || string(got.User) != string(want.User) || len(got.Guilds) != 1 || got.Guilds[0] != g.guild.Guild.ID ||
		string(got.PrivateChannels) != string(want.PrivateChannels) {
		t.Fatalf("reader's READY %+v, service's %+v", got, want)
	}
	var private []struct {
		ID         string `json:"id"`
		Recipients []struct {
			ID string `json:"id"`
		} `json:"recipients"`
	}
	if err := json.Unmarshal(got.PrivateChannels, &private); err != nil {
		t.Fatal(err)
	}
	if len(private) != 1 || private[0].ID != dm.ID.String() || len(private[0].Recipients) != 1 || private[0].Recipients[0].ID != g.owner.ID.String() {
		t.Fatalf("private channels %s, want the DM with the owner", got.PrivateChannels)
	}
	if _, err := r.Identify(bg, token+"x", s); !errors.Is(err, ErrAuthenticationFailed) {
		t.Fatalf("bad token: %v", err)
	}
	if _, err := NewReader(f.store, nil).Identify(bg, token, s); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("no issuer: %v", err)
	}

	if gid, err := r.ChannelGuild(bg, g.secret.ID); err != nil || gid != g.guild.Guild.ID {
		t.Fatalf("secret's guild %d, %v", gid, err)
	}
	if gid, err := r.ChannelGuild(bg, dm.ID); err != nil || gid != 0 {
		t.Fatalf("the DM's guild %d, %v", gid, err)
	}
	if _, err := r.ChannelGuild(bg, other.ID); !errors.Is(err, ErrUnknownChannel) {
		t.Fatalf("no such channel: %v", err)
	}
	for _, c := range []struct {
		name          string
		user, channel snowflake.ID
		want          bool
	}{
		{"a recipient", g.member.ID, dm.ID, true},
		{"the other recipient", g.owner.ID, dm.ID, true},
		{"someone else", other.ID, dm.ID, false},
		{"a guild channel", g.member.ID, g.general.ID, false},
	} {
		if got := r.CanViewPrivate(bg, c.user, c.channel); got != c.want {
			t.Errorf("%s: CanViewPrivate = %v, want %v", c.name, got, c.want)
		}
	}
}
