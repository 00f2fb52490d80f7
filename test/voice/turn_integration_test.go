//go:build integration

package voice

import (
	"net"
	"os"
	"testing"
	"time"

	"github.com/pion/webrtc/v4"

	"github.com/concord-chat/concord/runtime/voice"
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
	api := webrtc.NewAPI()
	pc, err := api.NewPeerConnection(webrtc.Configuration{ICETransportPolicy: webrtc.ICETransportPolicyRelay,
		ICEServers: []webrtc.ICEServer{{URLs: []string{"turn:" + addr + "?transport=udp"}, Username: user, Credential: "not-the-password"}}})
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	if _, err := pc.AddTransceiverFromKind(webrtc.RTPCodecTypeAudio); err != nil {
		t.Fatal(err)
	}
	var relayed []string
	gathered := make(chan struct{})
	pc.OnICECandidate(func(c *webrtc.ICECandidate) {
		if c == nil {
			close(gathered)
			return
		}
		relayed = append(relayed, c.String())
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
	if len(relayed) != 0 {
		t.Fatalf("coturn relayed with a wrong password: %v", relayed)
	}
}
