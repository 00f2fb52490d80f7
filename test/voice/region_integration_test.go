//go:build integration

package voice

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"testing"
	"time"

	etcdreg "github.com/concord-chat/concord/runtime/adapters/registry/etcd"
	"github.com/concord-chat/concord/runtime/adapters/registry/etcd/etcdtest"
	"github.com/concord-chat/concord/runtime/adapters/store"
	"github.com/concord-chat/concord/runtime/adapters/store/pebble"
	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/auth"
	"github.com/concord-chat/concord/runtime/domain/event"
	"github.com/concord-chat/concord/runtime/domain/guild"
	"github.com/concord-chat/concord/runtime/domain/voice"
	"github.com/concord-chat/concord/runtime/domain/voice/fleet"
	"github.com/concord-chat/concord/test/voice/voiceclient"
)

// TestVoiceCallFollowsChannelRegion: two real SFUs in two regions
// reporting to an embedded etcd, a guild service on a registry fleet. A
// channel whose rtc_region is "us" gets its call on the us SFU although
// the first joiner's gateway node is in eu and the eu SFU sorts first;
// both clients connect there and hear each other. Setting rtc_region to
// "eu" moves the live call: both sessions get a VOICE_SERVER_UPDATE for
// the eu SFU, whose token the eu SFU admits, and audio flows there.
func TestVoiceCallFollowsChannelRegion(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	ep := etcdtest.Start(t)
	newReg := func() *etcdreg.Registry { return etcdtest.Open(t, ep, etcdreg.Config{LeaseTTL: 5 * time.Second}) }
	sfus := map[string]*sfu{}
	var key ed25519.PrivateKey
	for _, rg := range []string{"eu", "us"} {
		sreg := newReg()
		s := startSFU(t, func(c *voice.Config) {
			c.ID, c.Region, c.Node = "sfu-"+rg, rg, "voice-"+rg
			c.Load = fleet.Reporter{Registry: sreg}
			if key != nil {
				c.TrustedKeys = []ed25519.PublicKey{key.Public().(ed25519.PublicKey)}
			}
		})
		if key == nil {
			key = s.key
		}
		sfus[s.endpoint] = s
	}
	st, err := pebble.New(pebble.Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	ids, err := snowflake.New(snowflake.Config{})
	if err != nil {
		t.Fatal(err)
	}
	iss, err := auth.New(auth.Config{Key: []byte("0123456789abcdef0123456789abcdef"), Password: auth.Params{Time: 1, MemoryKiB: 64, Threads: 1}}, st)
	if err != nil {
		t.Fatal(err)
	}
	sink := newDispatchSink()
	svc, err := guild.NewService(guild.Config{}, guild.Deps{Store: st, Sink: sink, IDs: ids, Auth: iss})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { svc.Close() })
	f := fleet.NewRegistry(newReg(), fleet.RegistryConfig{Poll: 100 * time.Millisecond})
	fctx, fcancel := context.WithCancel(ctx)
	ran := make(chan struct{})
	go func() { defer close(ran); _ = f.Run(fctx) }()
	t.Cleanup(func() { fcancel(); <-ran })
	if err := svc.Voice.Enable(guild.VoiceConfig{Allocator: f, Key: key, Region: "eu"}); err != nil {
		t.Fatal(err)
	}
	awaitFleet(t, "both SFUs' reports", f, func() bool { return f.Healthy("sfu-eu") && f.Healthy("sfu-us") })

	mkUser := func(name string) store.User {
		id, err := ids.Next()
		if err != nil {
			t.Fatal(err)
		}
		u := store.User{ID: id, Username: name, CreatedAt: time.Now()}
		if err := st.CreateUser(ctx, u); err != nil {
			t.Fatal(err)
		}
		return u
	}
	owner, alice := mkUser("owner"), mkUser("alice")
	gi, err := svc.CreateGuild(ctx, owner.ID, "regions")
	if err != nil {
		t.Fatal(err)
	}
	gid := gi.Guild.ID
	if _, _, err := svc.Members.Add(ctx, gid, alice.ID); err != nil {
		t.Fatal(err)
	}
	ch, err := svc.Channels.Create(ctx, owner.ID, gid, guild.ChannelSpec{Name: "Call", Type: store.ChannelVoice, RTCRegion: "us"})
	if err != nil {
		t.Fatal(err)
	}
	users := []store.User{owner, alice}
	var sessions []event.Session
	for _, u := range users {
		s := event.Session{ID: event.SessionID("s-" + u.Username), UserID: u.ID, Intents: guild.IntentGuildVoiceStates | 1, Node: "gw-eu"}
		if err := svc.AttachSession(ctx, gid, s); err != nil {
			t.Fatal(err)
		}
		sessions = append(sessions, s)
	}

	// connectAll connects every user to its n-th VOICE_SERVER_UPDATE and
	// checks it names the SFU of region want.
	connectAll := func(n int, want string) []*voiceclient.Client {
		t.Helper()
		var out []*voiceclient.Client
		for i, s := range sessions {
			var u wireVSU
			if err := json.Unmarshal(sink.await(t, s.ID, "VOICE_SERVER_UPDATE", n), &u); err != nil {
				t.Fatal(err)
			}
			srv := sfus[u.Endpoint]
			if srv == nil || srv.srv.ID() != "sfu-"+want {
				t.Fatalf("%s's VOICE_SERVER_UPDATE #%d points at %s, want sfu-%s", users[i].Username, n, u.Endpoint, want)
			}
			c, err := voiceclient.Connect(ctx, voiceclient.Options{Endpoint: u.Endpoint, GuildID: uint64(gid), UserID: uint64(users[i].ID),
				SessionID: string(s.ID), Token: u.Token, TLS: srv.tls})
			if err != nil {
				t.Fatalf("connect %s to sfu-%s: %v", users[i].Username, want, err)
			}
			t.Cleanup(c.Close)
			out = append(out, c)
		}
		return out
	}
	// hear waits until a packet from a reaches b (the first ones may be
	// sent before b's path is bound, so a keeps sending).
	hear := func(a, b *voiceclient.Client, where string) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			if err := a.SendOpus(opus(40)); err != nil {
				t.Fatal(err)
			}
			if _, err := b.Recv(time.Now().Add(200 * time.Millisecond)); err == nil {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("no audio forwarded on %s", where)
			}
		}
	}

	for _, s := range sessions {
		if err := svc.UpdateVoiceState(ctx, s, guild.VoiceStateRequest{GuildID: gid, ChannelID: ch.ID}); err != nil {
			t.Fatal(err)
		}
	}
	on := connectAll(1, "us")
	hear(on[0], on[1], "sfu-us")

	eu := "eu"
	if _, err := svc.Channels.Modify(ctx, owner.ID, ch.ID, guild.ChannelPatch{RTCRegion: &eu}); err != nil {
		t.Fatal(err)
	}
	moved := connectAll(2, "eu")
	for _, c := range on {
		c.Close()
	}
	hear(moved[1], moved[0], "sfu-eu")
}
