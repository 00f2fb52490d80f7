package voice

import (
	"bytes"
	"context"
	"encoding/json"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pion/rtcp"
	"github.com/pion/rtp"
	"github.com/pion/webrtc/v4"

	"github.com/concord-chat/concord/runtime/domain/voice"
	"github.com/concord-chat/concord/runtime/domain/voice/signaling"
	"github.com/concord-chat/concord/test/voice/voiceclient"
)

// browser is a pion peer connection playing Discord's web client: one
// sendrecv audio m-line for its microphone and more recvonly ones for the
// other speakers, signalled as select protocol "webrtc".
type browser struct {
	gw  *voiceclient.Client
	pc  *webrtc.PeerConnection
	mic *webrtc.TrackLocalStaticRTP
	cam *webrtc.TrackLocalStaticRTP
	// screen is the screen-share track, when the options asked for one.
	screen *webrtc.TrackLocalStaticRTP
	plis   chan struct{}
	video  chan []byte
	// videoRTP gets every video packet whole (dropped when full), and
	// videoSSRC is the SSRC of the video slot they arrive on.
	videoRTP  chan *rtp.Packet
	videoSSRC atomic.Uint32
	mu        sync.Mutex
	videoMime string              // the codec of the video track, once it opened
	heard     map[uint32][][]byte // by the SSRC it arrived with
	got       chan struct{}
}

func joinBrowser(t *testing.T, ctx context.Context, s *sfu, u user, listenSlots int, camera ...bool) *browser {
	t.Helper()
	return joinBrowserWith(t, ctx, s, u, browserOptions{listenSlots: listenSlots, camera: len(camera) > 0 && camera[0]})
}

// browserOptions shape a pion client as a browser's.
type browserOptions struct {
	listenSlots int
	camera      bool
	// relayOnly builds the peer connection with the ICE servers of the
	// server's Ready and ICETransportPolicy relay, as a browser whose
	// network lets only TURN through.
	relayOnly bool
	// acceptReplays turns off SRTP replay protection, so a packet sent
	// again reaches the reader.
	acceptReplays bool
	// camCodec is the camera's codec (VP8 when empty); vp8Only makes the
	// client offer no other video codec.
	camCodec webrtc.RTPCodecCapability
	vp8Only  bool
	// media and tracks, when set, extend the media engine and add tracks
	// to the peer connection before the offer is made.
	media  func(*webrtc.MediaEngine) error
	tracks func(*webrtc.PeerConnection)
	// screen adds a second video track (a screen share) beside the
	// camera; videoSlots adds recvonly video m-lines.
	screen     bool
	videoSlots int
}

func joinBrowserWith(t *testing.T, ctx context.Context, s *sfu, u user, o browserOptions) *browser {
	t.Helper()
	listenSlots := o.listenSlots
	gw, err := voiceclient.Open(ctx, s.options(u, s.token(u, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(gw.Close)
	if err := gw.Identify(ctx); err != nil {
		t.Fatal(err)
	}
	se := webrtc.SettingEngine{}
	se.SetIncludeLoopbackCandidate(true)
	se.SetNetworkTypes([]webrtc.NetworkType{webrtc.NetworkTypeUDP4})
	se.DisableSRTPReplayProtection(o.acceptReplays)
	me := &webrtc.MediaEngine{}
	if o.vp8Only {
		registerVP8Only(t, me)
	} else if err := me.RegisterDefaultCodecs(); err != nil {
		t.Fatal(err)
	}
	if o.media != nil {
		if err := o.media(me); err != nil {
			t.Fatal(err)
		}
	}
	api := webrtc.NewAPI(webrtc.WithSettingEngine(se), webrtc.WithMediaEngine(me))
	var conf webrtc.Configuration
	if o.relayOnly {
		if len(gw.Ready.ICEServers) == 0 {
			t.Fatalf("the voice server's Ready carries no ICE servers for a relay-only client: %+v", gw.Ready)
		}
		conf.ICETransportPolicy = webrtc.ICETransportPolicyRelay
		for _, is := range gw.Ready.ICEServers {
			conf.ICEServers = append(conf.ICEServers, webrtc.ICEServer{URLs: is.URLs, Username: is.Username, Credential: is.Credential})
		}
	}
	pc, err := api.NewPeerConnection(conf)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pc.Close() })
	b := &browser{gw: gw, pc: pc, heard: map[uint32][][]byte{}, got: make(chan struct{}, 1024),
		plis: make(chan struct{}, 64), video: make(chan []byte, 1024), videoRTP: make(chan *rtp.Packet, 16384)}
	if o.camera {
		codec := o.camCodec
		if codec.MimeType == "" {
			codec = webrtc.RTPCodecCapability{MimeType: webrtc.MimeTypeVP8, ClockRate: 90000}
		}
		b.cam, _ = webrtc.NewTrackLocalStaticRTP(codec, "cam", "browser")
		sender, err := pc.AddTrack(b.cam)
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			for {
				pkts, _, err := sender.ReadRTCP()
				if err != nil {
					return
				}
				for _, p := range pkts {
					if _, ok := p.(*rtcp.PictureLossIndication); ok {
						select {
						case b.plis <- struct{}{}:
						default:
						}
					}
				}
			}
		}()
	}
	b.mic, _ = webrtc.NewTrackLocalStaticRTP(webrtc.RTPCodecCapability{MimeType: webrtc.MimeTypeOpus, ClockRate: 48000, Channels: 2}, "mic", "browser")
	if _, err := pc.AddTrack(b.mic); err != nil {
		t.Fatal(err)
	}
	if o.tracks != nil {
		o.tracks(pc)
	}
	if o.screen {
		b.screen, _ = webrtc.NewTrackLocalStaticRTP(webrtc.RTPCodecCapability{MimeType: webrtc.MimeTypeVP8, ClockRate: 90000}, "screen", "browser-screen")
		if _, err := pc.AddTrack(b.screen); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < o.videoSlots; i++ {
		if _, err := pc.AddTransceiverFromKind(webrtc.RTPCodecTypeVideo, webrtc.RTPTransceiverInit{Direction: webrtc.RTPTransceiverDirectionRecvonly}); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < listenSlots; i++ {
		if _, err := pc.AddTransceiverFromKind(webrtc.RTPCodecTypeAudio, webrtc.RTPTransceiverInit{Direction: webrtc.RTPTransceiverDirectionRecvonly}); err != nil {
			t.Fatal(err)
		}
	}
	pc.OnTrack(func(tr *webrtc.TrackRemote, _ *webrtc.RTPReceiver) {
		if tr.Kind() == webrtc.RTPCodecTypeVideo {
			// Ask for a keyframe as a decoder would, then record payloads.
			b.videoSSRC.Store(uint32(tr.SSRC()))
			b.mu.Lock()
			b.videoMime = tr.Codec().MimeType
			b.mu.Unlock()
			_ = pc.WriteRTCP([]rtcp.Packet{&rtcp.PictureLossIndication{MediaSSRC: uint32(tr.SSRC())}})
			for {
				p, _, err := tr.ReadRTP()
				if err != nil {
					return
				}
				c := p.Clone()
				select {
				case b.videoRTP <- c:
				default:
				}
				select {
				case b.video <- c.Payload:
				default:
				}
			}
		}
		for {
			p, _, err := tr.ReadRTP()
			if err != nil {
				return
			}
			b.mu.Lock()
			b.heard[uint32(tr.SSRC())] = append(b.heard[uint32(tr.SSRC())], bytes.Clone(p.Payload))
			b.mu.Unlock()
			b.got <- struct{}{}
		}
	})
	connected := make(chan struct{})
	var once sync.Once
	pc.OnConnectionStateChange(func(st webrtc.PeerConnectionState) {
		if st == webrtc.PeerConnectionStateConnected {
			once.Do(func() { close(connected) })
		}
	})
	offer, err := pc.CreateOffer(nil)
	if err != nil {
		t.Fatal(err)
	}
	gathered := webrtc.GatheringCompletePromise(pc)
	if err := pc.SetLocalDescription(offer); err != nil {
		t.Fatal(err)
	}
	<-gathered
	sdp := pc.LocalDescription().SDP
	gw.SendOp(signaling.OpSelectProtocol, map[string]any{"protocol": "webrtc", "data": sdp, "sdp": sdp,
		"codecs": []map[string]any{{"name": "opus", "type": "audio", "priority": 1000, "payload_type": 111}}})
	f, err := gw.Next(ctx, signaling.OpSessionDescription)
	if err != nil {
		t.Fatalf("webrtc session description: %v", err)
	}
	var sd signaling.SessionDescriptionWebRTC
	if err := json.Unmarshal(f.D, &sd); err != nil || sd.SDP == "" {
		t.Fatalf("op 4 without an answer: %s", f.D)
	}
	if err := pc.SetRemoteDescription(webrtc.SessionDescription{Type: webrtc.SDPTypeAnswer, SDP: sd.SDP}); err != nil {
		t.Fatalf("answer: %v", err)
	}
	select {
	case <-connected:
	case <-ctx.Done():
		t.Fatal("browser peer connection never connected")
	}
	return b
}

// registerVP8Only registers Opus and VP8, as a browser without H264.
func registerVP8Only(t *testing.T, me *webrtc.MediaEngine) {
	t.Helper()
	fb := []webrtc.RTCPFeedback{{Type: "nack"}, {Type: "nack", Parameter: "pli"}}
	if err := me.RegisterCodec(webrtc.RTPCodecParameters{PayloadType: 111, RTPCodecCapability: webrtc.RTPCodecCapability{
		MimeType: webrtc.MimeTypeOpus, ClockRate: 48000, Channels: 2}}, webrtc.RTPCodecTypeAudio); err != nil {
		t.Fatal(err)
	}
	if err := me.RegisterCodec(webrtc.RTPCodecParameters{PayloadType: 96, RTPCodecCapability: webrtc.RTPCodecCapability{
		MimeType: webrtc.MimeTypeVP8, ClockRate: 90000, RTCPFeedback: fb}}, webrtc.RTPCodecTypeVideo); err != nil {
		t.Fatal(err)
	}
}

func (b *browser) send(seq uint16, payload []byte) error {
	return b.mic.WriteRTP(&rtp.Packet{Header: rtp.Header{Version: 2, PayloadType: 111, SequenceNumber: seq, Timestamp: uint32(seq) * 960}, Payload: payload})
}

// TestBrowserAndBotHearEachOther: a WebRTC client (pion, ice-lite answer on
// the ICE UDP mux) and a Discord-protocol UDP client in one call hear each
// other's Opus payloads byte-identical; the browser learns which user its
// slot carries from op 5.
func TestBrowserAndBotHearEachOther(t *testing.T) {
	s := startSFU(t, func(c *voice.Config) { c.WebRTC = &voice.WebRTCConfig{UDPAddr: "127.0.0.1:0"} })
	ctx := ctxT(t)
	ubot, ubr := s.newUser(channelID), s.newUser(channelID)
	bot := s.connect(ctx, ubot, "")
	br := joinBrowser(t, ctx, s, ubr, 2)
	browserAndBotExchange(t, ctx, bot, ubot, br, ubr)
}

// browserAndBotExchange: 30 Opus payloads each way between a connected
// browser and a bot in one call arrive byte-identical, the bot seeing the
// browser's server-assigned SSRC and the browser told which slot is the
// bot's.
func browserAndBotExchange(t *testing.T, ctx context.Context, bot *voiceclient.Client, ubot user, br *browser, ubr user) {
	t.Helper()
	// Browser → bot: the bot sees the browser's server-assigned SSRC.
	br.gw.SendOp(signaling.OpSpeaking, map[string]any{"speaking": 1, "delay": 0, "ssrc": br.gw.Ready.SSRC})
	brSSRC := speakingOf(t, ctx, bot, ubr.id)
	var sent [][]byte
	for i := 0; i < 30; i++ {
		p := opus(60 + i)
		sent = append(sent, p)
		if err := br.send(uint16(100+i), p); err != nil {
			t.Fatal(err)
		}
	}
	for i := range sent {
		r, err := bot.Recv(time.Now().Add(5 * time.Second))
		if err != nil {
			t.Fatalf("bot packet %d from the browser: %v", i, err)
		}
		if r.SSRC != brSSRC || !bytes.Equal(r.Payload, sent[i]) {
			t.Fatalf("bot packet %d: ssrc %d (want %d), payload identical %v", i, r.SSRC, brSSRC, bytes.Equal(r.Payload, sent[i]))
		}
	}

	// Bot → browser, on a slot the browser was told belongs to the bot.
	var botSent [][]byte
	for i := 0; i < 30; i++ {
		p := opus(40 + i)
		botSent = append(botSent, p)
		_ = bot.SendOpus(p)
	}
	slotSSRC := uint32(0)
	for slotSSRC == 0 {
		f, err := br.gw.Next(ctx, signaling.OpSpeaking)
		if err != nil {
			t.Fatalf("browser never told which slot is the bot: %v", err)
		}
		var sp struct {
			UserID string `json:"user_id"`
			SSRC   uint32 `json:"ssrc"`
		}
		_ = json.Unmarshal(f.D, &sp)
		if sp.UserID == strconv.FormatUint(ubot.id, 10) && sp.SSRC != bot.Ready.SSRC {
			slotSSRC = sp.SSRC
		}
	}
	deadline := time.After(5 * time.Second)
	for {
		br.mu.Lock()
		got := br.heard[slotSSRC]
		br.mu.Unlock()
		if len(got) >= len(botSent) {
			for i := range botSent {
				if !bytes.Equal(got[i], botSent[i]) {
					t.Fatalf("browser packet %d differs", i)
				}
			}
			break
		}
		select {
		case <-br.got:
		case <-deadline:
			t.Fatalf("browser heard %d of %d packets on slot %d (heard on %d SSRCs)", len(got), len(botSent), slotSSRC, len(br.heard))
		}
	}
}

// TestBrowserVideo: VP8 from one browser reaches another on a video slot
// byte-identical, and the viewer's keyframe requests reach the sender as
// PLIs on its track.
func TestBrowserVideo(t *testing.T) {
	s := startSFU(t, func(c *voice.Config) { c.WebRTC = &voice.WebRTCConfig{UDPAddr: "127.0.0.1:0"} })
	ctx := ctxT(t)
	a := joinBrowser(t, ctx, s, s.newUser(channelID), 1, true)
	b := joinBrowser(t, ctx, s, s.newUser(channelID), 1, true)
	// Until both peer connections have bound their tracks (the sender's
	// local track, the server's incoming track, the viewer's slot) a packet
	// is dropped on the way; send warm-up frames until the first one
	// arrives, so the counted packets below measure the open path.
	seq := uint16(0)
	write := func(p []byte) {
		t.Helper()
		if err := a.cam.WriteRTP(&rtp.Packet{Header: rtp.Header{Version: 2, PayloadType: 96, SequenceNumber: seq, Timestamp: uint32(seq) * 3000, Marker: true}, Payload: p}); err != nil {
			t.Fatal(err)
		}
		seq++
	}
	warm := append([]byte{0x10, 0, 0x9d, 0x01, 0x2a}, bytes.Repeat([]byte{0xee}, 64)...)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for opened := false; !opened; {
		write(warm)
		select {
		case got := <-b.video:
			opened = bytes.Equal(got, warm)
		case <-tick.C:
		case <-ctx.Done():
			t.Fatal("no video frame ever reached the viewer")
		}
	}
	var sent [][]byte
	for i := 0; i < 40; i++ {
		p := append([]byte{0x10, 0, 0x9d, 0x01, 0x2a}, opus(200)...) // a VP8 payload descriptor, then bytes
		sent = append(sent, p)
		write(p)
	}
	// UDP on loopback may still lose a packet; what arrives must be the
	// sent payloads, in order (late warm-up frames are skipped).
	next, matched := 0, 0
	timeout := time.After(5 * time.Second)
	for matched < len(sent) && next < len(sent) {
		select {
		case got := <-b.video:
			if bytes.Equal(got, warm) {
				continue
			}
			j := next
			for j < len(sent) && !bytes.Equal(sent[j], got) {
				j++
			}
			if j == len(sent) {
				t.Fatalf("viewer got a %d-byte video payload that was never sent (or out of order)", len(got))
			}
			matched++
			next = j + 1
		case <-timeout:
			next = len(sent)
		}
	}
	if matched < len(sent)*9/10 {
		t.Fatalf("viewer got %d of %d video packets", matched, len(sent))
	}
	select {
	case <-a.plis:
	case <-ctx.Done():
		t.Fatal("the sender never got a keyframe request")
	}
	s.waitCounter("concord_voice_rtcp_plis_total", nil, 1)
}

// TestBrowserCameraAndScreen: a publisher's camera and screen share are
// two streams; a viewer with two video slots gets each on its own slot
// (two SSRCs, each carrying only one of them), both announced with op 5
// for the publisher.
func TestBrowserCameraAndScreen(t *testing.T) {
	s := startSFU(t, func(c *voice.Config) { c.WebRTC = &voice.WebRTCConfig{UDPAddr: "127.0.0.1:0"} })
	ctx := ctxT(t)
	up := s.newUser(channelID)
	a := joinBrowserWith(t, ctx, s, up, browserOptions{listenSlots: 1, camera: true, screen: true})
	b := joinBrowserWith(t, ctx, s, s.newUser(channelID), browserOptions{listenSlots: 1, camera: true, videoSlots: 1})
	bySSRC := map[uint32]byte{} // SSRC → 'c' (camera) or 's' (screen)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for seq := uint16(0); len(bySSRC) < 2 || countOf(bySSRC, 'c') != 1; seq++ {
		for _, tr := range []struct {
			t    *webrtc.TrackLocalStaticRTP
			kind byte
		}{{a.cam, 'c'}, {a.screen, 's'}} {
			p := append([]byte{0x10, 0x00, tr.kind}, bytes.Repeat([]byte{byte(seq)}, 40)...)
			if err := tr.t.WriteRTP(&rtp.Packet{Header: rtp.Header{Version: 2, PayloadType: 96, SequenceNumber: seq, Timestamp: uint32(seq) * 3000, Marker: true}, Payload: p}); err != nil {
				t.Fatal(err)
			}
		}
		for drained := false; !drained; {
			select {
			case p := <-b.videoRTP:
				kind := p.Payload[2]
				if k, ok := bySSRC[p.SSRC]; ok && k != kind {
					t.Fatalf("slot %d carried both the camera and the screen", p.SSRC)
				}
				bySSRC[p.SSRC] = kind
			case <-tick.C:
				drained = true
			case <-ctx.Done():
				t.Fatalf("the viewer got the publisher's streams on %v", bySSRC)
			}
		}
	}
	// Both slots were announced as the publisher's.
	announced := map[uint32]bool{}
	for len(announced) < 2 {
		f, err := b.gw.Next(ctx, signaling.OpSpeaking)
		if err != nil {
			t.Fatalf("op 5 for the video slots: %v (saw %v)", err, announced)
		}
		var sp struct {
			UserID string `json:"user_id"`
			SSRC   uint32 `json:"ssrc"`
		}
		_ = json.Unmarshal(f.D, &sp)
		if _, ok := bySSRC[sp.SSRC]; ok && sp.UserID == strconv.FormatUint(up.id, 10) {
			announced[sp.SSRC] = true
		}
	}
}

func countOf(m map[uint32]byte, v byte) int {
	n := 0
	for _, x := range m {
		if x == v {
			n++
		}
	}
	return n
}
