package guild

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/concord-chat/concord/runtime/adapters/store"
	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/event"
	"github.com/concord-chat/concord/runtime/domain/permissions"
	"github.com/concord-chat/concord/runtime/domain/voice/token"
)

// oneServer is a unit-test allocator: one healthy server, and a record of
// what the guild asked it to do.
type oneServer struct {
	mu           sync.Mutex
	disconnected []snowflake.ID
	// failed is set when sfu-1 died (or drains): sfu-2 takes over.
	failed bool
	// regions are the regions Pick was asked for, in order.
	regions []string
}

func (o *oneServer) Pick(_ context.Context, region string) (VoiceServer, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.regions = append(o.regions, region)
	if o.failed {
		return VoiceServer{ID: "sfu-2", Endpoint: "127.0.0.2:4443", Region: "local"}, nil
	}
	return VoiceServer{ID: "sfu-1", Endpoint: "127.0.0.1:4443", Region: "local"}, nil
}
func (o *oneServer) Healthy(id string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return id == "sfu-2" || (id == "sfu-1" && !o.failed)
}
func (o *oneServer) Regions() []VoiceRegion { return []VoiceRegion{{ID: "local", Name: "local"}} }
func (o *oneServer) Disconnect(_ context.Context, _ string, _, _, user snowflake.ID) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.disconnected = append(o.disconnected, user)
}
func (o *oneServer) SetServerVoiceState(context.Context, string, snowflake.ID, snowflake.ID, snowflake.ID, bool, bool) {
}

type voiceFixture struct {
	*fixture
	key                              ed25519.PrivateKey
	alloc                            *oneServer
	gid                              snowflake.ID
	owner, alice, bob                store.User
	open, secret, noConnect, limited store.Channel
	ownerS, aliceS, bobS, botS       event.Session
	bot                              store.User
}

func newVoiceFixture(t *testing.T) *voiceFixture {
	t.Helper()
	f := &voiceFixture{fixture: newFixture(t), alloc: &oneServer{}}
	var err error
	if f.key, err = token.GenerateKey(); err != nil {
		t.Fatal(err)
	}
	if err := f.svc.Voice.Enable(VoiceConfig{Allocator: f.alloc, Key: f.key}); err != nil {
		t.Fatal(err)
	}
	f.owner, f.alice, f.bob, f.bot = f.user("owner", false), f.user("alice", false), f.user("bob", false), f.user("bot", true)
	f.gid = must[GuildInfo](t)(f.svc.CreateGuild(bg, f.owner.ID, "voice")).Guild.ID
	for _, u := range []store.User{f.alice, f.bob, f.bot} {
		if _, _, err := f.svc.Members.Add(bg, f.gid, u.ID); err != nil {
			t.Fatal(err)
		}
	}
	deny := func(bits permissions.Bits) []store.Overwrite {
		return []store.Overwrite{{ID: f.gid, Type: store.OverwriteRole, Deny: uint64(bits)}}
	}
	mk := func(name string, spec ChannelSpec) store.Channel {
		spec.Name, spec.Type = name, store.ChannelVoice
		return must[store.Channel](t)(f.svc.Channels.Create(bg, f.owner.ID, f.gid, spec))
	}
	f.open = mk("open", ChannelSpec{})
	f.secret = mk("secret", ChannelSpec{Overwrites: deny(permissions.ViewChannel)})
	f.noConnect = mk("no-connect", ChannelSpec{Overwrites: deny(permissions.Connect)})
	f.limited = mk("limited", ChannelSpec{UserLimit: 1})
	f.ownerS = f.session(f.owner, "o1", 0, 1)
	f.aliceS = f.session(f.alice, "a1", 0, 1)
	f.bobS = f.session(f.bob, "b1", 0, 1)
	f.botS = f.session(f.bot, "c1", IntentGuilds, 1) // no GUILD_VOICE_STATES
	return f
}

func (f *voiceFixture) join(s event.Session, channel snowflake.ID) error {
	return f.svc.UpdateVoiceState(bg, s, VoiceStateRequest{GuildID: f.gid, ChannelID: channel})
}

type vsu struct {
	GuildID   snowflake.ID  `json:"guild_id"`
	ChannelID *snowflake.ID `json:"channel_id"`
	UserID    snowflake.ID  `json:"user_id"`
	SessionID string        `json:"session_id"`
	Mute      bool          `json:"mute"`
}

func (f *voiceFixture) states(s event.Session) []vsu {
	var out []vsu
	for _, d := range f.sink.of(s.ID) {
		if d.Type == "VOICE_STATE_UPDATE" {
			var v vsu
			if err := json.Unmarshal(d.Payload, &v); err != nil {
				f.t.Fatal(err)
			}
			out = append(out, v)
		}
	}
	return out
}

type serverUpdate struct {
	Token    string       `json:"token"`
	GuildID  snowflake.ID `json:"guild_id"`
	Endpoint string       `json:"endpoint"`
}

func (f *voiceFixture) serverUpdates(s event.Session) []serverUpdate {
	var out []serverUpdate
	for _, d := range f.sink.of(s.ID) {
		if d.Type == "VOICE_SERVER_UPDATE" {
			var v serverUpdate
			if err := json.Unmarshal(d.Payload, &v); err != nil {
				f.t.Fatal(err)
			}
			out = append(out, v)
		}
	}
	return out
}

// TestVoiceJoinRefusals: without CONNECT, without VIEW_CHANNEL, in a full
// channel or a text channel a join changes nothing and nobody hears of it.
// UpdateVoiceState returns after the actor ran the request, and the
// dispatches of a request are delivered before it returns, so an empty
// record here means nothing was sent.
func TestVoiceJoinRefusals(t *testing.T) {
	f := newVoiceFixture(t)
	text := must[store.Channel](t)(f.svc.Channels.Create(bg, f.owner.ID, f.gid, ChannelSpec{Name: "text", Type: store.ChannelText}))
	if err := f.join(f.bobS, f.limited.ID); err != nil {
		t.Fatalf("bob joins the limited channel: %v", err)
	}
	for _, tc := range []struct {
		name    string
		channel snowflake.ID
		want    error
	}{
		{"no CONNECT", f.noConnect.ID, ErrMissingPermissions},
		{"no VIEW_CHANNEL", f.secret.ID, ErrMissingAccess},
		{"full", f.limited.ID, ErrMissingPermissions},
		{"text channel", text.ID, ErrUnknownChannel},
		{"unknown channel", 12345, ErrUnknownChannel},
	} {
		before := len(f.sink.of(f.ownerS.ID))
		if err := f.join(f.aliceS, tc.channel); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
		if n := len(f.serverUpdates(f.aliceS)); n != 0 {
			t.Fatalf("%s: alice got %d VOICE_SERVER_UPDATE", tc.name, n)
		}
		if after := len(f.sink.of(f.ownerS.ID)); after != before {
			t.Fatalf("%s: the owner was sent %d events about a refused join", tc.name, after-before)
		}
	}
	// The owner (MOVE_MEMBERS) passes the user limit.
	if err := f.join(f.ownerS, f.limited.ID); err != nil {
		t.Fatalf("owner into the full channel: %v", err)
	}
}

// TestVoiceJoinAndHiddenChannel: a join is told to the guild with the
// state and to the session with a token the fleet's key verifies; a join
// in a hidden channel reaches only those who see it, neither as
// VOICE_STATE_UPDATE nor in GUILD_CREATE's voice_states; a move into a
// hidden channel looks like a leave to those who cannot see it.
func TestVoiceJoinAndHiddenChannel(t *testing.T) {
	f := newVoiceFixture(t)
	if err := f.join(f.aliceS, f.open.ID); err != nil {
		t.Fatal(err)
	}
	sus := f.serverUpdates(f.aliceS)
	if len(sus) != 1 || sus[0].Endpoint != "127.0.0.1:4443" || sus[0].GuildID != f.gid {
		t.Fatalf("alice's VOICE_SERVER_UPDATE: %+v", sus)
	}
	v := token.Verifier{Keys: []ed25519.PublicKey{f.key.Public().(ed25519.PublicKey)}}
	c, err := v.Verify(sus[0].Token, time.Now())
	if err != nil {
		t.Fatalf("token: %v", err)
	}
	if c.UserID != f.alice.ID || c.GuildID != f.gid || c.ChannelID != f.open.ID || c.Server != "sfu-1" || c.SessionID != "a1" {
		t.Fatalf("token claims %+v", c)
	}
	if ttl := time.Until(c.ExpiresAt()); ttl > 61*time.Second || ttl < 50*time.Second {
		t.Fatalf("token expires in %v, want 60 s", ttl)
	}
	bs := f.states(f.bobS)
	if len(bs) != 1 || bs[0].UserID != f.alice.ID || bs[0].ChannelID == nil || *bs[0].ChannelID != f.open.ID || bs[0].SessionID != "a1" {
		t.Fatalf("bob's VOICE_STATE_UPDATE: %+v", bs)
	}
	if n := len(f.states(f.botS)); n != 0 {
		t.Fatalf("a bot without GUILD_VOICE_STATES got %d voice states", n)
	}

	// The owner joins the hidden channel: alice and bob hear nothing.
	if err := f.join(f.ownerS, f.secret.ID); err != nil {
		t.Fatal(err)
	}
	if n := len(f.states(f.bobS)); n != 1 {
		t.Fatalf("bob heard of a join in a channel he cannot see (%d states)", n)
	}
	// A new session of bob's gets the open channel's state only.
	bob2 := f.session(f.bob, "b2", 0, 1)
	var gc struct {
		VoiceStates []vsu `json:"voice_states"`
	}
	for _, d := range f.sink.of(bob2.ID) {
		if d.Type == "GUILD_CREATE" {
			if err := json.Unmarshal(d.Payload, &gc); err != nil {
				t.Fatal(err)
			}
		}
	}
	if len(gc.VoiceStates) != 1 || gc.VoiceStates[0].UserID != f.alice.ID {
		t.Fatalf("bob's GUILD_CREATE voice_states: %+v", gc.VoiceStates)
	}

	// The owner moves alice into the hidden channel: bob sees her leave.
	if _, err := f.svc.Voice.ModifyMember(bg, f.owner.ID, f.gid, f.alice.ID, VoicePatch{Move: true, Channel: f.secret.ID}); err != nil {
		t.Fatal(err)
	}
	bs = f.states(f.bobS)
	if last := bs[len(bs)-1]; len(bs) != 2 || last.UserID != f.alice.ID || last.ChannelID != nil {
		t.Fatalf("bob's states after alice moved into the hidden channel: %+v", bs)
	}
	if n := len(f.serverUpdates(f.aliceS)); n != 2 {
		t.Fatalf("alice got %d VOICE_SERVER_UPDATE, want a second one for the move", n)
	}
	if len(f.alloc.disconnected) == 0 || f.alloc.disconnected[len(f.alloc.disconnected)-1] != f.alice.ID {
		t.Fatalf("the old call was not ended at the server: %v", f.alloc.disconnected)
	}
}

// TestVoiceModerationAndDisconnect: alice without MUTE_MEMBERS cannot
// mute; the owner can; moving a user in no call is 40032's error; a
// session that ends leaves its call.
func TestVoiceModerationAndDisconnect(t *testing.T) {
	f := newVoiceFixture(t)
	if err := f.join(f.bobS, f.open.ID); err != nil {
		t.Fatal(err)
	}
	yes := true
	if _, err := f.svc.Voice.ModifyMember(bg, f.alice.ID, f.gid, f.bob.ID, VoicePatch{Mute: &yes}); !errors.Is(err, ErrMissingPermissions) {
		t.Fatalf("alice mutes bob: %v, want missing permissions", err)
	}
	vm, err := f.svc.Voice.ModifyMember(bg, f.owner.ID, f.gid, f.bob.ID, VoicePatch{Mute: &yes})
	if err != nil || !vm.Mute {
		t.Fatalf("owner mutes bob: %+v, %v", vm, err)
	}
	as := f.states(f.aliceS)
	if last := as[len(as)-1]; !last.Mute || last.UserID != f.bob.ID {
		t.Fatalf("alice's last state: %+v, want bob muted", last)
	}
	if _, err := f.svc.Voice.ModifyMember(bg, f.owner.ID, f.gid, f.alice.ID, VoicePatch{Move: true, Channel: f.open.ID}); !errors.Is(err, ErrNotInVoice) {
		t.Fatalf("moving alice who is in no call: %v", err)
	}
	f.svc.Disconnect(bg, f.bobS)
	f.sink.waitFor(t, f.aliceS.ID, "bob's leave", func([]delivered) bool {
		as := f.states(f.aliceS)
		return as[len(as)-1].ChannelID == nil
	})
}

// TestVoiceFailover: when the call's server stops being healthy, every
// session in the call is sent a VOICE_SERVER_UPDATE for the server the
// call moved to, with a token naming it; a rejoin (the same op 4 again)
// right after it is not answered with the same server again.
func TestVoiceFailover(t *testing.T) {
	f := newVoiceFixture(t)
	for _, s := range []event.Session{f.aliceS, f.bobS} {
		if err := f.join(s, f.open.ID); err != nil {
			t.Fatal(err)
		}
	}
	f.alloc.mu.Lock()
	f.alloc.failed = true
	f.alloc.mu.Unlock()
	v := token.Verifier{Keys: []ed25519.PublicKey{f.key.Public().(ed25519.PublicKey)}}
	for _, s := range []event.Session{f.aliceS, f.bobS} {
		f.sink.waitFor(t, s.ID, "a VOICE_SERVER_UPDATE for sfu-2", func([]delivered) bool { return len(f.serverUpdates(s)) == 2 })
		su := f.serverUpdates(s)[1]
		c, err := v.Verify(su.Token, time.Now())
		if err != nil || c.Server != "sfu-2" || su.Endpoint != "127.0.0.2:4443" || c.ChannelID != f.open.ID {
			t.Fatalf("session %s after failover: %+v claims %+v, %v", s.ID, su, c, err)
		}
	}
	// The call was placed afresh once, in its old server's region.
	f.alloc.mu.Lock()
	regions := append([]string(nil), f.alloc.regions...)
	f.alloc.mu.Unlock()
	if len(regions) != 2 || regions[1] != "local" {
		t.Fatalf("Pick asked for regions %q, want the first join's and then the failed server's region \"local\"", regions)
	}
	if err := f.join(f.aliceS, f.open.ID); err != nil {
		t.Fatal(err)
	}
	// Right after the update a rejoin to the same server is a client
	// retrying a failure: it is left to the failover check.
	if sus := f.serverUpdates(f.aliceS); len(sus) != 2 {
		t.Fatalf("alice's rejoin right after the failover was answered: %+v", sus)
	}
}
