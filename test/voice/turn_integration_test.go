//go:build integration

package voice

import (
	"context"
	"crypto/tls"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pion/webrtc/v4"

	etcdreg "github.com/concord-chat/concord/runtime/adapters/registry/etcd"
	"github.com/concord-chat/concord/runtime/config"
	"github.com/concord-chat/concord/runtime/domain/guild"
	"github.com/concord-chat/concord/runtime/domain/voice"
	"github.com/concord-chat/concord/runtime/domain/voice/devca"
	"github.com/concord-chat/concord/runtime/domain/voice/fleet"
	"github.com/concord-chat/concord/runtime/domain/voice/token"
	"github.com/concord-chat/concord/runtime/domain/voice/turncred"
	"github.com/concord-chat/concord/runtime/services/voicerole"
	"github.com/concord-chat/concord/test/voice/voiceclient"
)

// turnServer is the coturn `make test-deps` runs (hack/coturn/start.sh):
// its address and static user. The test fails without it.
func turnServer(t *testing.T) (addr, user, password string) {
	t.Helper()
	addr, user, password = os.Getenv("CONCORD_TURN"), os.Getenv("CONCORD_TURN_USER"), os.Getenv("CONCORD_TURN_PASSWORD")
	if addr == "" || user == "" || password == "" {
		t.Fatal("CONCORD_TURN, CONCORD_TURN_USER and CONCORD_TURN_PASSWORD are not set: run `make test-deps` (hack/coturn/start.sh starts Debian's coturn) and source ~/.cache/concord/test-env.sh")
	}
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatalf("coturn does not answer on %s (%v): run hack/coturn/start.sh", addr, err)
	}
	c.Close()
	return addr, user, password
}

// TestBrowserRelayOnlyThroughTURN: the SFU hands its TURN server (a real
// coturn) to WebRTC clients in Ready; a pion client allowed to use only
// relayed candidates (ICETransportPolicy relay, as a browser behind a
// network that lets only TURN through) joins a call through it and
// exchanges audio with a Discord-protocol bot, byte-identical both ways,
// its selected candidate pair being the relayed one.
func TestBrowserRelayOnlyThroughTURN(t *testing.T) {
	addr, user, password := turnServer(t)
	s := startSFU(t, func(c *voice.Config) {
		c.WebRTC = &voice.WebRTCConfig{UDPAddr: "127.0.0.1:0", ICEServers: []voice.ICEServer{{
			URLs: []string{"turn:" + addr + "?transport=udp"}, Username: user, Credential: password,
		}}}
	})
	ctx := ctxT(t)
	ubot, ubr := s.newUser(channelID), s.newUser(channelID)
	bot := s.connect(ctx, ubot, "")
	if len(bot.Ready.ICEServers) != 1 || bot.Ready.ICEServers[0].Username != user {
		t.Fatalf("Ready's ice_servers: %+v, want the configured TURN server", bot.Ready.ICEServers)
	}
	br := joinBrowserWith(t, ctx, s, ubr, browserOptions{listenSlots: 2, relayOnly: true})
	pair, err := br.pc.GetSenders()[0].Transport().ICETransport().GetSelectedCandidatePair()
	if err != nil || pair == nil {
		t.Fatalf("no selected candidate pair: %v", err)
	}
	if pair.Local.Typ != webrtc.ICECandidateTypeRelay {
		t.Fatalf("selected local candidate %s, want a relayed one (through coturn at %s)", pair.Local, addr)
	}
	t.Logf("selected pair: local %s (relayed by coturn), remote %s", pair.Local, pair.Remote)
	browserAndBotExchange(t, ctx, bot, ubot, br, ubr)
}

// TestBrowserRelayOnlyWrongTURNPassword: with a credential coturn refuses,
// a relay-only client gets no candidate and never connects: the relay
// test above passes only through the real server's authentication.
func TestBrowserRelayOnlyWrongTURNPassword(t *testing.T) {
	addr, user, _ := turnServer(t)
	if relayed := gatherRelayed(t, addr, user, "not-the-password"); len(relayed) != 0 {
		t.Fatalf("coturn relayed with a wrong password: %v", relayed)
	}
}

// gatherRelayed gathers the relayed candidates a relay-only peer
// connection gets from the TURN server at addr with user and credential.
func gatherRelayed(t *testing.T, addr, user, credential string) []string {
	t.Helper()
	api := webrtc.NewAPI()
	pc, err := api.NewPeerConnection(webrtc.Configuration{ICETransportPolicy: webrtc.ICETransportPolicyRelay,
		ICEServers: []webrtc.ICEServer{{URLs: []string{"turn:" + addr + "?transport=udp"}, Username: user, Credential: credential}}})
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	if _, err := pc.AddTransceiverFromKind(webrtc.RTPCodecTypeAudio); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var relayed []string
	gathered := make(chan struct{})
	pc.OnICECandidate(func(c *webrtc.ICECandidate) {
		if c == nil {
			close(gathered)
			return
		}
		mu.Lock()
		relayed = append(relayed, c.String())
		mu.Unlock()
	})
	offer, err := pc.CreateOffer(nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := pc.SetLocalDescription(offer); err != nil {
		t.Fatal(err)
	}
	select {
	case <-gathered:
	case <-time.After(60 * time.Second):
		t.Fatal("gathering never completed")
	}
	mu.Lock()
	defer mu.Unlock()
	return relayed
}

// turnSecret is the shared secret of the coturn `make test-deps` runs
// (static-auth-secret, hack/coturn/start.sh).
func turnSecret(t *testing.T) string {
	t.Helper()
	s := os.Getenv("CONCORD_TURN_SECRET")
	if s == "" {
		t.Fatal("CONCORD_TURN_SECRET is not set: run `make test-deps` (hack/coturn/start.sh configures coturn's use-auth-secret) and source ~/.cache/concord/test-env.sh")
	}
	return s
}

// TestBrowserRelayMintedTURNCredential: with the TURN secret coturn shares
// (use-auth-secret), the SFU hands every session its own time-limited
// credential in Ready — username "<expiry>:<user id>", credential the
// HMAC-SHA1 of it — instead of a static one; a relay-only pion client
// joins a call through the real coturn with the one minted for it and
// exchanges audio with a bot; a credential minted the same way but
// already expired gets no relayed candidate from coturn, while a fresh one
// minted here does.
func TestBrowserRelayMintedTURNCredential(t *testing.T) {
	addr, _, _ := turnServer(t)
	secret := turnSecret(t)
	const ttl = time.Hour
	s := startSFU(t, func(c *voice.Config) {
		c.WebRTC = &voice.WebRTCConfig{UDPAddr: "127.0.0.1:0", TURNSecret: secret, TURNCredentialTTL: ttl,
			ICEServers: []voice.ICEServer{{URLs: []string{"turn:" + addr + "?transport=udp"}}}}
	})
	ctx := ctxT(t)
	ubot, ubr := s.newUser(channelID), s.newUser(channelID)
	start := time.Now()
	bot := s.connect(ctx, ubot, "")
	if len(bot.Ready.ICEServers) != 1 {
		t.Fatalf("Ready's ice_servers: %+v, want the TURN server", bot.Ready.ICEServers)
	}
	is := bot.Ready.ICEServers[0]
	exp, err := turncred.Expiry(is.Username)
	if err != nil || !strings.HasSuffix(is.Username, ":"+strconv.FormatUint(ubot.id, 10)) {
		t.Fatalf("minted username %q (%v), want <expiry>:%d", is.Username, err, ubot.id)
	}
	if exp.Before(start.Add(ttl).Add(-time.Minute)) || exp.After(time.Now().Add(ttl).Add(time.Second)) {
		t.Fatalf("minted credential expires at %v, want about %v from now", exp, ttl)
	}
	if is.Credential != turncred.Credential(secret, is.Username) {
		t.Fatalf("credential %q is not HMAC-SHA1(secret, %q)", is.Credential, is.Username)
	}
	br := joinBrowserWith(t, ctx, s, ubr, browserOptions{listenSlots: 2, relayOnly: true})
	if u := br.gw.Ready.ICEServers[0].Username; u == is.Username {
		t.Fatalf("two sessions were handed the same TURN username %q", u)
	}
	pair, err := br.pc.GetSenders()[0].Transport().ICETransport().GetSelectedCandidatePair()
	if err != nil || pair == nil {
		t.Fatalf("no selected candidate pair: %v", err)
	}
	if pair.Local.Typ != webrtc.ICECandidateTypeRelay {
		t.Fatalf("selected local candidate %s, want a relayed one (through coturn at %s)", pair.Local, addr)
	}
	browserAndBotExchange(t, ctx, bot, ubot, br, ubr)

	u, c := turncred.Mint(secret, "42", time.Now().Add(-time.Minute))
	if relayed := gatherRelayed(t, addr, u, c); len(relayed) != 0 {
		t.Fatalf("coturn relayed with an expired credential %q: %v", u, relayed)
	}
	u, c = turncred.Mint(secret, "42", time.Now().Add(time.Minute))
	if relayed := gatherRelayed(t, addr, u, c); len(relayed) == 0 {
		t.Fatalf("coturn refused a fresh credential %q minted like the expired one", u)
	}
}

// TestVoiceNodeMintsTURNCredentials: `concord serve --roles=voice` with
// --voice-ice-servers and the TURN secret in CONCORD_VOICE_ICE_SECRET (as
// VoiceRegion pods get it from their Secret) hands each session in Ready
// a credential minted for it, which the real coturn accepts: a relay-only
// peer connection with it gathers a relayed candidate.
func TestVoiceNodeMintsTURNCredentials(t *testing.T) {
	addr, _, _ := turnServer(t)
	secret := turnSecret(t)
	bin := buildConcord(t)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	t.Cleanup(cancel)
	stopEtcd, ep, err := etcdreg.StartEmbedded(ctx, t.TempDir(), "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stopEtcd)
	dir := t.TempDir()
	n := startVoiceNodeWith(t, bin, "sfu-turn", strings.TrimPrefix(ep, "http://"), dir,
		[]string{"CONCORD_VOICE_ICE_SECRET=" + secret, "CONCORD_VOICE_ICE_CREDENTIAL_TTL=2h"},
		"--voice-ice-servers=turn:"+addr+"?transport=udp")
	reg, err := etcdreg.New(etcdreg.Config{Endpoints: []string{ep}, LeaseTTL: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { reg.Close() })
	f := fleet.NewRegistry(reg, fleet.RegistryConfig{})
	var srv guild.VoiceServer
	deadline := time.Now().Add(30 * time.Second)
	for {
		_ = f.Refresh(ctx)
		if srv, err = f.Pick(ctx, ""); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the voice node never reported its load: %v\n%s", err, n.logs)
		}
		time.Sleep(100 * time.Millisecond) // load reports are polled: nothing to await
	}
	key, err := voicerole.SigningKey(config.Config{ServerKey: failoverServerKey, DataDir: t.TempDir()}, false)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := devca.Ensure(dir)
	if err != nil {
		t.Fatal(err)
	}
	const uid = 4242
	tok, err := token.Sign(key, token.Claims{UserID: uid, GuildID: 1, ChannelID: 2, Server: srv.ID, SessionID: "s-turn"}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	c, err := voiceclient.Connect(ctx, voiceclient.Options{Endpoint: srv.Endpoint, GuildID: 1, UserID: uid, SessionID: "s-turn", Token: tok,
		TLS: &tls.Config{RootCAs: ca.Pool()}})
	if err != nil {
		t.Fatalf("connect to the voice node: %v\n%s", err, n.logs)
	}
	defer c.Close()
	if len(c.Ready.ICEServers) != 1 {
		t.Fatalf("Ready's ice_servers: %+v, want the TURN server", c.Ready.ICEServers)
	}
	is := c.Ready.ICEServers[0]
	exp, err := turncred.Expiry(is.Username)
	if err != nil || !strings.HasSuffix(is.Username, ":4242") || exp.Before(time.Now().Add(2*time.Hour-time.Minute)) || exp.After(time.Now().Add(2*time.Hour+time.Minute)) {
		t.Fatalf("minted username %q (%v), want <now+2h>:4242", is.Username, err)
	}
	if is.Credential != turncred.Credential(secret, is.Username) {
		t.Fatalf("credential %q is not HMAC-SHA1(secret, %q)", is.Credential, is.Username)
	}
	if relayed := gatherRelayed(t, addr, is.Username, is.Credential); len(relayed) == 0 {
		t.Fatalf("coturn refused the voice node's minted credential %q", is.Username)
	}
}
