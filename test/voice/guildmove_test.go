package voice

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/concord-chat/concord/runtime/adapters/registry"
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
	"github.com/concord-chat/concord/runtime/domain/voice/signaling"
	"github.com/concord-chat/concord/test/voice/voiceclient"
)

// dispatchSink records what guild services send, per session, and wakes
// waiters on every batch.
type dispatchSink struct {
	mu      sync.Mutex
	got     map[event.SessionID][]dispatch
	changed chan struct{}
}

type dispatch struct {
	typ     string
	payload json.RawMessage
}

func newDispatchSink() *dispatchSink {
	return &dispatchSink{got: map[event.SessionID][]dispatch{}, changed: make(chan struct{}, 1)}
}

func (d *dispatchSink) Deliver(_ context.Context, _ string, b event.Batch) {
	d.mu.Lock()
	for _, t := range b.Targets {
		d.got[t.Session] = append(d.got[t.Session], dispatch{b.Type, b.Payloads[t.Variant]})
	}
	d.mu.Unlock()
	select {
	case d.changed <- struct{}{}:
	default:
	}
}

// count is how many dispatches of typ sess got.
func (d *dispatchSink) count(sess event.SessionID, typ string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	n := 0
	for _, x := range d.got[sess] {
		if x.typ == typ {
			n++
		}
	}
	return n
}

// await waits for the n-th (from 1) dispatch of typ to sess and returns it.
func (d *dispatchSink) await(t testing.TB, sess event.SessionID, typ string, n int) json.RawMessage {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		d.mu.Lock()
		seen := 0
		for _, x := range d.got[sess] {
			if x.typ == typ {
				if seen++; seen == n {
					d.mu.Unlock()
					return x.payload
				}
			}
		}
		d.mu.Unlock()
		select {
		case <-d.changed:
		case <-deadline:
			t.Fatalf("session %s never got %s #%d", sess, typ, n)
		}
	}
}

// moveCluster is two guild services over one store (two guild nodes), each
// with its own registry-backed voice fleet, and two SFUs reporting to an
// embedded etcd and serving their control route on their own HTTP
// listener: `concord serve`'s split, in one process.
type moveCluster struct {
	t        testing.TB
	reg      registry.Registry
	st       store.Store
	ids      *snowflake.Generator
	auth     *auth.Issuer
	sink     *dispatchSink
	sfus     map[string]*sfu
	keyOwner *sfu
}

func startMoveCluster(t testing.TB) *moveCluster {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	ep := etcdtest.Start(t)
	newReg := func() registry.Registry { return etcdtest.Open(t, ep, etcdreg.Config{LeaseTTL: 5 * time.Second}) }
	m := &moveCluster{t: t, reg: newReg(), sink: newDispatchSink(), sfus: map[string]*sfu{}}
	dir := t.TempDir()
	var err error
	if m.st, err = pebble.New(pebble.Config{Dir: dir}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.st.Close() })
	if m.ids, err = snowflake.New(snowflake.Config{}); err != nil {
		t.Fatal(err)
	}
	if m.auth, err = auth.New(auth.Config{Key: []byte("0123456789abcdef0123456789abcdef"), Password: auth.Params{Time: 1, MemoryKiB: 64, Threads: 1}}, m.st); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"sfu-a", "sfu-b"} {
		sreg := newReg()
		s := startSFU(t, func(c *voice.Config) {
			c.ID, c.Node = id, "node-"+id
			c.Load = fleet.Reporter{Registry: sreg}
			if m.keyOwner != nil {
				c.TrustedKeys = []ed25519.PublicKey{m.keyOwner.key.Public().(ed25519.PublicKey)}
			}
		})
		if m.keyOwner == nil {
			m.keyOwner = s
		}
		// The control route on the SFU node's HTTP listener, as the voice
		// role mounts it, and the node's registry entry naming it.
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		mux := http.NewServeMux()
		mux.Handle("POST "+voice.ControlPath, s.srv.ControlHandler())
		hs := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
		go func() { _ = hs.Serve(l) }()
		t.Cleanup(func() { _ = hs.Close() })
		if _, err := sreg.Register(ctx, registry.Node{Name: "node-" + id, Roles: []string{fleet.NodeRole}, HTTPAddr: l.Addr().String()}); err != nil {
			t.Fatal(err)
		}
		m.sfus[id] = s
	}
	return m
}

// guildNode is one guild node: a guild service with a registry fleet.
func (m *moveCluster) guildNode(grace time.Duration) (*guild.Service, *fleet.Registry) {
	m.t.Helper()
	svc, err := guild.NewService(guild.Config{}, guild.Deps{Store: m.st, Sink: m.sink, IDs: m.ids, Auth: m.auth})
	if err != nil {
		m.t.Fatal(err)
	}
	m.t.Cleanup(func() { svc.Close() })
	f := fleet.NewRegistry(m.reg, fleet.RegistryConfig{Poll: 100 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan struct{})
	go func() { defer close(ran); _ = f.Run(ctx) }()
	m.t.Cleanup(func() { cancel(); <-ran })
	if err := svc.Voice.Enable(guild.VoiceConfig{Allocator: f, Key: m.keyOwner.key, AdoptGrace: grace}); err != nil {
		m.t.Fatal(err)
	}
	return svc, f
}

func (m *moveCluster) user(name string) store.User {
	m.t.Helper()
	id, err := m.ids.Next()
	if err != nil {
		m.t.Fatal(err)
	}
	u := store.User{ID: id, Username: name, CreatedAt: time.Now()}
	if err := m.st.CreateUser(context.Background(), u); err != nil {
		m.t.Fatal(err)
	}
	return u
}

// awaitFleet waits until f has seen cond hold (its loads are polled).
func awaitFleet(t testing.TB, what string, f *fleet.Registry, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waiting for the fleet: %s", what)
		}
		_ = f.Refresh(context.Background())
		time.Sleep(50 * time.Millisecond) // registry reports are polled: no event to await
	}
}

type wireVS struct {
	ChannelID *snowflake.ID `json:"channel_id"`
	UserID    snowflake.ID  `json:"user_id"`
	SessionID string        `json:"session_id"`
	Mute      bool          `json:"mute"`
	Deaf      bool          `json:"deaf"`
	SelfMute  bool          `json:"self_mute"`
	SelfDeaf  bool          `json:"self_deaf"`
}

type wireVSU struct {
	Token    string `json:"token"`
	Endpoint string `json:"endpoint"`
}

// TestVoiceStatesSurviveGuildMove: a call of three users on an SFU of a
// registry fleet; the guild moves to another guild node (the first
// unloads it, as for a ring change). The new owner rebuilds its voice
// states from the SFU's roster: GUILD_CREATE on the new node carries the
// three voice states with the server mute and the self deafen set on the
// old node; a user the new node never sees attach is dropped after the
// grace (the others get VOICE_STATE_UPDATE channel null, the SFU closes
// its connection with 4014); and the new node fails the call over when its
// SFU drains, sending the reattached sessions VOICE_SERVER_UPDATE for the
// other SFU. Without the rebuild GUILD_CREATE has no voice states and
// nothing moves.
func TestVoiceStatesSurviveGuildMove(t *testing.T) {
	m := startMoveCluster(t)
	ctx := context.Background()
	g1, f1 := m.guildNode(0)
	awaitFleet(t, "both SFUs' reports", f1, func() bool { return f1.Healthy("sfu-a") && f1.Healthy("sfu-b") })

	owner, alice, bob := m.user("owner"), m.user("alice"), m.user("bob")
	gi, err := g1.CreateGuild(ctx, owner.ID, "moving")
	if err != nil {
		t.Fatal(err)
	}
	gid := gi.Guild.ID
	for _, u := range []store.User{alice, bob} {
		if _, _, err := g1.Members.Add(ctx, gid, u.ID); err != nil {
			t.Fatal(err)
		}
	}
	ch, err := g1.Channels.Create(ctx, owner.ID, gid, guild.ChannelSpec{Name: "Call", Type: store.ChannelVoice})
	if err != nil {
		t.Fatal(err)
	}
	sess := func(u store.User, id string) event.Session {
		return event.Session{ID: event.SessionID(id), UserID: u.ID, Intents: guild.IntentGuildVoiceStates | 1, Node: "gw-1"}
	}
	users := []store.User{owner, alice, bob}
	sessions := []event.Session{sess(owner, "s-owner"), sess(alice, "s-alice"), sess(bob, "s-bob")}
	for _, s := range sessions {
		if err := g1.AttachSession(ctx, gid, s); err != nil {
			t.Fatal(err)
		}
	}
	// Everyone joins the call and connects to the SFU it was given.
	clients := map[snowflake.ID]*voiceclient.Client{}
	var host string
	for i, s := range sessions {
		req := guild.VoiceStateRequest{GuildID: gid, ChannelID: ch.ID, SelfDeaf: users[i].ID == bob.ID}
		if err := g1.UpdateVoiceState(ctx, s, req); err != nil {
			t.Fatal(err)
		}
		var u wireVSU
		if err := json.Unmarshal(m.sink.await(t, s.ID, "VOICE_SERVER_UPDATE", 1), &u); err != nil {
			t.Fatal(err)
		}
		srv := m.sfuAt(u.Endpoint)
		if host == "" {
			host = srv.srv.ID()
		} else if srv.srv.ID() != host {
			t.Fatalf("the call's users were sent to %s and %s", host, srv.srv.ID())
		}
		c, err := voiceclient.Connect(ctx, voiceclient.Options{Endpoint: u.Endpoint, GuildID: uint64(gid), UserID: uint64(users[i].ID),
			SessionID: string(s.ID), Token: u.Token, TLS: srv.tls})
		if err != nil {
			t.Fatalf("connect %s: %v", users[i].Username, err)
		}
		t.Cleanup(c.Close)
		clients[users[i].ID] = c
	}
	if _, err := g1.Voice.ModifyMember(ctx, owner.ID, gid, alice.ID, guild.VoicePatch{Mute: ptr(true)}); err != nil {
		t.Fatal(err)
	}
	hostSFU := m.sfus[host]
	// The SFU applied the command and lists the guild in its reports.
	hostSFU.waitCounter("concord_voice_control_commands_total", map[string]string{"result": "applied"}, 1)
	awaitFleet(t, "the host's report listing the guild", f1, func() bool {
		for _, p := range mustRoster(t, f1, gid) {
			if p.UserID == alice.ID && p.Mute {
				return true
			}
		}
		return false
	})

	// The guild moves: node 1 unloads it, node 2 owns it. Owner and alice
	// reattach there; bob's session never does (it ended meanwhile).
	before := m.sink.count(sessions[0].ID, "VOICE_STATE_UPDATE")
	if err := g1.Unload(ctx, gid); err != nil {
		t.Fatal(err)
	}
	g2, f2 := m.guildNode(2 * time.Second)
	awaitFleet(t, "node 2's fleet", f2, func() bool { return f2.Healthy(host) && len(mustRoster(t, f2, gid)) == 3 })
	for _, s := range sessions[:2] {
		if err := g2.AttachSession(ctx, gid, s); err != nil {
			t.Fatal(err)
		}
	}
	var gc struct {
		VoiceStates []wireVS `json:"voice_states"`
	}
	if err := json.Unmarshal(m.sink.await(t, sessions[0].ID, "GUILD_CREATE", 2), &gc); err != nil {
		t.Fatal(err)
	}
	if len(gc.VoiceStates) != 3 {
		t.Fatalf("GUILD_CREATE on the new owner: %d voice states, want 3: %+v", len(gc.VoiceStates), gc.VoiceStates)
	}
	byUser := map[snowflake.ID]wireVS{}
	for _, vs := range gc.VoiceStates {
		if vs.ChannelID == nil || *vs.ChannelID != ch.ID {
			t.Fatalf("voice state %+v not in the call's channel %d", vs, ch.ID)
		}
		byUser[vs.UserID] = vs
	}
	if a := byUser[alice.ID]; !a.Mute || a.SessionID != "s-alice" {
		t.Errorf("alice after the move: %+v, want server-muted, session s-alice", a)
	}
	if b := byUser[bob.ID]; !b.SelfDeaf || b.Mute {
		t.Errorf("bob after the move: %+v, want self-deafened, not muted", b)
	}

	// bob never reattached: after the grace his state ends and the SFU
	// drops him.
	var left wireVS
	for n := before + 1; ; n++ {
		if err := json.Unmarshal(m.sink.await(t, sessions[0].ID, "VOICE_STATE_UPDATE", n), &left); err != nil {
			t.Fatal(err)
		}
		if left.UserID == bob.ID {
			break
		}
	}
	if left.ChannelID != nil {
		t.Fatalf("bob's state after the grace: %+v, want channel_id null", left)
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if code, err := clients[bob.ID].WaitClosed(wctx); err != nil || code != signaling.CloseDisconnected {
		t.Fatalf("bob's voice connection: closed %d, %v; want %d", code, err, signaling.CloseDisconnected)
	}

	// The new owner runs the call: draining its SFU moves it, and the
	// reattached sessions get the other server.
	hostSFU.srv.Drain(time.Time{})
	other := "sfu-a"
	if host == other {
		other = "sfu-b"
	}
	for _, s := range sessions[:2] {
		var u wireVSU
		if err := json.Unmarshal(m.sink.await(t, s.ID, "VOICE_SERVER_UPDATE", 2), &u); err != nil {
			t.Fatal(err)
		}
		if got := m.sfuAt(u.Endpoint).srv.ID(); got != other {
			t.Fatalf("%s was moved to %s, want %s", s.ID, got, other)
		}
	}
}

func ptr[T any](v T) *T { return &v }

func mustRoster(t testing.TB, f *fleet.Registry, gid snowflake.ID) []guild.VoiceParticipant {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ps, err := f.Roster(ctx, gid)
	if err != nil && !strings.Contains(err.Error(), "no HTTP address") {
		t.Fatal(err)
	}
	return ps
}

// sfuAt is the SFU whose voice gateway is endpoint.
func (m *moveCluster) sfuAt(endpoint string) *sfu {
	m.t.Helper()
	for _, s := range m.sfus {
		if s.endpoint == endpoint {
			return s
		}
	}
	m.t.Fatalf("no SFU at %s", endpoint)
	return nil
}

// BenchmarkGuildLoadRoster is what rebuilding voice states costs a guild
// that moved: a guild node loads the guild from the store and sends a
// session its GUILD_CREATE, for a guild with a call of two (the node asks
// the call's SFU for its roster over HTTP, a signed command) and, side by
// side, the same guild without a call (no request: no report lists it).
func BenchmarkGuildLoadRoster(b *testing.B) {
	m := startMoveCluster(b)
	ctx := context.Background()
	g1, f1 := m.guildNode(0)
	awaitFleet(b, "both SFUs' reports", f1, func() bool { return f1.Healthy("sfu-a") && f1.Healthy("sfu-b") })
	owner, alice := m.user("owner"), m.user("alice")
	guilds := map[string]snowflake.ID{}
	sessions := map[string]event.Session{}
	var call snowflake.ID
	for _, name := range []string{"with-call", "no-call"} {
		gi, err := g1.CreateGuild(ctx, owner.ID, name)
		if err != nil {
			b.Fatal(err)
		}
		if _, _, err := g1.Members.Add(ctx, gi.Guild.ID, alice.ID); err != nil {
			b.Fatal(err)
		}
		ch, err := g1.Channels.Create(ctx, owner.ID, gi.Guild.ID, guild.ChannelSpec{Name: "Call", Type: store.ChannelVoice})
		if err != nil {
			b.Fatal(err)
		}
		guilds[name] = gi.Guild.ID
		sessions[name] = event.Session{ID: event.SessionID("watch-" + name), UserID: owner.ID, Intents: guild.IntentGuildVoiceStates | 1, Node: "gw-1"}
		if name == "with-call" {
			call = ch.ID
		}
	}
	gid := guilds["with-call"]
	for i, u := range []store.User{owner, alice} {
		s := event.Session{ID: event.SessionID("s-" + u.Username), UserID: u.ID, Intents: guild.IntentGuildVoiceStates | 1, Node: "gw-1"}
		if err := g1.AttachSession(ctx, gid, s); err != nil {
			b.Fatal(err)
		}
		if err := g1.UpdateVoiceState(ctx, s, guild.VoiceStateRequest{GuildID: gid, ChannelID: call}); err != nil {
			b.Fatal(err)
		}
		var u2 wireVSU
		if err := json.Unmarshal(m.sink.await(b, s.ID, "VOICE_SERVER_UPDATE", 1), &u2); err != nil {
			b.Fatal(err)
		}
		srv := m.sfuAt(u2.Endpoint)
		c, err := voiceclient.Connect(ctx, voiceclient.Options{Endpoint: u2.Endpoint, GuildID: uint64(gid), UserID: uint64(u.ID),
			SessionID: string(s.ID), Token: u2.Token, TLS: srv.tls})
		if err != nil {
			b.Fatalf("connect %d: %v", i, err)
		}
		b.Cleanup(c.Close)
	}
	g2, f2 := m.guildNode(time.Hour)
	awaitFleet(b, "the call's roster", f2, func() bool { return len(mustRoster(b, f2, gid)) == 2 })
	for _, name := range []string{"with-call", "no-call"} {
		b.Run(name, func(b *testing.B) {
			gid, sess := guilds[name], sessions[name]
			want := 0
			if name == "with-call" {
				want = 2
			}
			for b.Loop() {
				if err := g2.Unload(ctx, gid); err != nil {
					b.Fatal(err)
				}
				n := m.sink.count(sess.ID, "GUILD_CREATE")
				// The actor sends GUILD_CREATE before AttachSession returns.
				if err := g2.AttachSession(ctx, gid, sess); err != nil {
					b.Fatal(err)
				}
				var gc struct {
					VoiceStates []wireVS `json:"voice_states"`
				}
				if err := json.Unmarshal(m.sink.await(b, sess.ID, "GUILD_CREATE", n+1), &gc); err != nil {
					b.Fatal(err)
				}
				if len(gc.VoiceStates) != want {
					b.Fatalf("%s: %d voice states, want %d", name, len(gc.VoiceStates), want)
				}
			}
		})
	}
}
