package voice

import (
	"bytes"
	"testing"
	"time"

	voicecfg "github.com/concord-chat/concord/runtime/domain/voice"
	"github.com/concord-chat/concord/runtime/domain/voice/discovery"
	"github.com/concord-chat/concord/runtime/domain/voice/signaling"
	"github.com/concord-chat/concord/runtime/domain/voice/token"
	"github.com/concord-chat/concord/test/voice/voiceclient"
)

// TestIdentifyRefused: every bad admission closes with 4004 and counts
// under its reason; nothing joins the call.
func TestIdentifyRefused(t *testing.T) {
	s := startSFU(t, nil)
	ctx := ctxT(t)
	other, _ := token.GenerateKey()
	u := s.newUser(channelID)
	replayed := s.token(u, nil)
	first, err := voiceclient.Connect(ctx, s.options(u, replayed))
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	forged, _ := token.Sign(other, token.Claims{UserID: 5, GuildID: guildID, ChannelID: channelID, Server: "sfu-test", SessionID: "x"}, time.Now())

	for _, tc := range []struct {
		name   string
		opt    func(voiceclient.Options) voiceclient.Options
		reason string
	}{
		{"forged", func(o voiceclient.Options) voiceclient.Options { o.Token = forged; return o }, "bad_signature"},
		{"expired", func(o voiceclient.Options) voiceclient.Options {
			o.Token = s.token(u, func(c *token.Claims) { c.Expires = time.Now().Add(-time.Second).UnixMilli() })
			return o
		}, "expired"},
		{"replayed", func(o voiceclient.Options) voiceclient.Options { o.Token = replayed; return o }, "replayed"},
		{"other server", func(o voiceclient.Options) voiceclient.Options {
			o.Token = s.token(u, func(c *token.Claims) { c.Server = "sfu-elsewhere" })
			return o
		}, "other_server"},
		{"another user's session", func(o voiceclient.Options) voiceclient.Options {
			// A valid token for u, presented with someone else's session id.
			o.SessionID = "sess-victim"
			return o
		}, "claims_mismatch"},
		{"another user", func(o voiceclient.Options) voiceclient.Options { o.UserID = 999999; return o }, "claims_mismatch"},
		{"another guild", func(o voiceclient.Options) voiceclient.Options { o.GuildID = 42; return o }, "claims_mismatch"},
		{"garbage", func(o voiceclient.Options) voiceclient.Options { o.Token = "not a token"; return o }, "invalid"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := tc.opt(s.options(u, s.token(u, nil)))
			c, err := voiceclient.Open(ctx, o)
			if err != nil {
				t.Fatal(err)
			}
			err = c.Identify(ctx)
			if ce, ok := err.(voiceclient.ErrClosed); !ok || ce.Code != signaling.CloseAuthFailed {
				t.Fatalf("identify: %v, want close 4004", err)
			}
			if got := s.counter("concord_voice_tokens_rejected_total", map[string]string{"reason": tc.reason}); got < 1 {
				t.Fatalf("tokens_rejected{reason=%q} = %v", tc.reason, got)
			}
		})
	}
	if got := s.counter("concord_voice_participants", nil); got > 1 {
		t.Fatalf("refused identifies joined: %v participants", got)
	}
}

// TestGatewayCloseCodes: the documented codes for protocol errors.
func TestGatewayCloseCodes(t *testing.T) {
	s := startSFU(t, nil)
	ctx := ctxT(t)
	for _, tc := range []struct {
		name string
		run  func(c *voiceclient.Client)
		want int
	}{
		{"op before identify", func(c *voiceclient.Client) { c.SendOp(signaling.OpSpeaking, map[string]any{"speaking": 1}) }, signaling.CloseNotAuthenticated},
		{"not json", func(c *voiceclient.Client) { c.SendRaw([]byte("{nope")) }, signaling.CloseDecodeError},
		{"identify payload wrong type", func(c *voiceclient.Client) { c.SendOp(signaling.OpIdentify, "x") }, signaling.CloseDecodeError},
		{"unknown mode", func(c *voiceclient.Client) {
			_ = c.Identify(ctx)
			c.SendOp(signaling.OpSelectProtocol, map[string]any{"protocol": "udp", "data": map[string]any{"address": "127.0.0.1", "port": 1, "mode": "xsalsa20_poly1305"}})
		}, signaling.CloseUnknownEncryption},
		{"unknown protocol", func(c *voiceclient.Client) {
			_ = c.Identify(ctx)
			c.SendOp(signaling.OpSelectProtocol, map[string]any{"protocol": "carrier-pigeon", "data": map[string]any{}})
		}, signaling.CloseUnknownProtocol},
		{"unknown opcode", func(c *voiceclient.Client) { _ = c.Identify(ctx); c.SendOp(99, map[string]any{}) }, signaling.CloseUnknownOpcode},
		{"identify twice", func(c *voiceclient.Client) {
			_ = c.Identify(ctx)
			c.SendOp(signaling.OpIdentify, map[string]any{})
		}, signaling.CloseAlreadyAuth},
		{"oversize frame", func(c *voiceclient.Client) { c.SendRaw(bytes.Repeat([]byte(" "), signaling.MaxFrame+10)) }, 1009},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u := s.newUser(channelID)
			c, err := voiceclient.Open(ctx, s.options(u, s.token(u, nil)))
			if err != nil {
				t.Fatal(err)
			}
			tc.run(c)
			code, err := c.WaitClosed(ctx)
			if err != nil || code != tc.want {
				t.Fatalf("closed with %d (%v), want %d", code, err, tc.want)
			}
		})
	}
}

// TestIdentifyTimeout: a socket that never identifies is closed with 4003.
func TestIdentifyTimeout(t *testing.T) {
	s2 := startSFU(t, func(c *voicecfg.Config) { c.IdentifyTimeout = 200 * time.Millisecond })
	ctx := ctxT(t)
	u := s2.newUser(channelID)
	c, err := voiceclient.Open(ctx, s2.options(u, s2.token(u, nil)))
	if err != nil {
		t.Fatal(err)
	}
	if code, _ := c.WaitClosed(ctx); code != signaling.CloseNotAuthenticated {
		t.Fatalf("idle socket closed with %d, want 4003", code)
	}
}

// TestMediaBadInput: datagrams from addresses that never did IP discovery,
// bad tags, replays, another's SSRC, malformed and oversize packets are
// dropped with a metric and never reach a listener; good packets after them
// still do.
func TestMediaBadInput(t *testing.T) {
	s := startSFU(t, nil)
	ctx := ctxT(t)
	a := s.connect(ctx, s.newUser(channelID), "")
	b := s.connect(ctx, s.newUser(channelID), "")
	udp := s.srv.UDPAddr().String()
	stranger := rawUDP(t, udp)
	dropped := func(reason string) float64 {
		return s.counter("concord_voice_packets_dropped_total", map[string]string{"reason": reason})
	}

	good := a.Packet(opus(50))
	// A valid packet of A's, sent from an address that never did discovery.
	if _, err := stranger.Write(good); err != nil {
		t.Fatal(err)
	}
	s.waitCounter("concord_voice_packets_dropped_total", map[string]string{"reason": "unbound_address"}, 1)
	// From A's own socket: a flipped tag bit.
	bad := bytes.Clone(a.Packet(opus(50)))
	bad[len(bad)-6] ^= 0x40
	_, _ = a.UDP.Write(bad)
	s.waitCounter("concord_voice_packets_dropped_total", map[string]string{"reason": "bad_tag"}, 1)
	// A packet claiming B's SSRC from A's address.
	spoof := bytes.Clone(a.Packet(opus(50)))
	spoof[8], spoof[9], spoof[10], spoof[11] = byte(b.Ready.SSRC>>24), byte(b.Ready.SSRC>>16), byte(b.Ready.SSRC>>8), byte(b.Ready.SSRC)
	_, _ = a.UDP.Write(spoof)
	s.waitCounter("concord_voice_packets_dropped_total", map[string]string{"reason": "ssrc_mismatch"}, 1)
	// Malformed: not RTP v2; and oversize.
	_, _ = a.UDP.Write(bytes.Repeat([]byte{0x40}, 40))
	s.waitCounter("concord_voice_packets_dropped_total", map[string]string{"reason": "malformed"}, 1)
	_, _ = a.UDP.Write(append([]byte{0x80, 0x78}, make([]byte, 1600)...))
	s.waitCounter("concord_voice_packets_dropped_total", map[string]string{"reason": "oversize"}, 1)
	// Discovery for an SSRC nobody holds.
	_, _ = stranger.Write(discovery.AppendRequest(nil, 12345))
	s.waitCounter("concord_voice_packets_dropped_total", map[string]string{"reason": "bad_discovery"}, 1)

	// The good packet, sent properly, arrives; then its replay is dropped.
	_, _ = a.UDP.Write(good)
	r, err := b.Recv(time.Now().Add(3 * time.Second))
	if err != nil || r.SSRC != a.Ready.SSRC {
		t.Fatalf("good packet after the bad ones: %v", err)
	}
	_, _ = a.UDP.Write(good)
	s.waitCounter("concord_voice_packets_dropped_total", map[string]string{"reason": "replayed"}, 1)
	// None of the bad ones reached B: the next packet B gets is the next good one.
	next := opus(33)
	_ = a.SendOpus(next)
	r, err = b.Recv(time.Now().Add(3 * time.Second))
	if err != nil || !bytes.Equal(r.Payload, next) {
		t.Fatalf("after the bad packets B got %d bytes (%v), want the next good packet", len(r.Payload), err)
	}
	// The forwarder counts a batch after sending it: B may hold the packet
	// before the counter moves.
	s.waitCounter("concord_voice_packets_forwarded_total", nil, 2)
	if dropped("unbound_address") < 1 || s.counter("concord_voice_packets_forwarded_total", nil) != 2 {
		t.Fatalf("forwarded %v packets, want exactly the 2 good ones", s.counter("concord_voice_packets_forwarded_total", nil))
	}
}

// TestStrangerCannotHijackDiscovery: IP discovery from a second address for
// a bound SSRC does not redirect that participant's audio; only a packet
// authenticated with the session key from the new address rebinds it
// (a NAT rebinding).
func TestStrangerCannotHijackDiscovery(t *testing.T) {
	s := startSFU(t, nil)
	ctx := ctxT(t)
	a := s.connect(ctx, s.newUser(channelID), "")
	b := s.connect(ctx, s.newUser(channelID), "")
	thief := rawUDP(t, s.srv.UDPAddr().String())
	_, _ = thief.Write(discovery.AppendRequest(nil, b.Ready.SSRC))
	s.waitCounter("concord_voice_ip_discoveries_total", nil, 3)
	_ = a.SendOpus(opus(20))
	if _, err := b.Recv(time.Now().Add(3 * time.Second)); err != nil {
		t.Fatalf("B lost its audio after a stranger's discovery: %v", err)
	}
	_ = thief.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	buf := make([]byte, 1500)
	for {
		n, err := thief.Read(buf)
		if err != nil {
			break
		}
		if n != discovery.Size {
			t.Fatalf("the stranger received %d bytes of media", n)
		}
	}
	// B moves to a new socket (NAT rebinding): discovery then an
	// authenticated packet from there rebinds it.
	moved := rawUDP(t, s.srv.UDPAddr().String())
	_, _ = moved.Write(discovery.AppendRequest(nil, b.Ready.SSRC))
	_ = moved.SetReadDeadline(time.Now().Add(3 * time.Second))
	if n, err := moved.Read(buf); err != nil || n != discovery.Size {
		t.Fatalf("discovery answer on the new socket: %v", err)
	}
	if _, err := moved.Write(b.Packet(opus(20))); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Recv(time.Now().Add(3 * time.Second)); err != nil {
		t.Fatalf("A did not hear B from its new address: %v", err)
	}
	_ = a.SendOpus(opus(20))
	_ = moved.SetReadDeadline(time.Now().Add(3 * time.Second))
	n, err := moved.Read(buf)
	if err != nil || n == discovery.Size {
		t.Fatalf("B's new address gets no audio after rebinding: %d bytes, %v", n, err)
	}
}

// TestConnectionLimit: past MaxConnections the upgrade is refused (503).
func TestConnectionLimit(t *testing.T) {
	s := startSFU(t, func(c *voicecfg.Config) { c.MaxConnections = 2 })
	ctx := ctxT(t)
	s.connect(ctx, s.newUser(channelID), "")
	s.connect(ctx, s.newUser(channelID), "")
	u := s.newUser(channelID)
	if _, err := voiceclient.Open(ctx, s.options(u, s.token(u, nil))); err == nil {
		t.Fatal("a third connection was accepted with MaxConnections 2")
	}
	if got := s.counter("concord_voice_tokens_rejected_total", map[string]string{"reason": "connection_limit"}); got != 1 {
		t.Fatalf("connection_limit rejections %v", got)
	}
}
