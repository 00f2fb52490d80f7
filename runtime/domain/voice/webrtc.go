package voice

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pion/interceptor"
	"github.com/pion/rtcp"
	"github.com/pion/rtp"
	"github.com/pion/sdp/v3"
	"github.com/pion/webrtc/v4"

	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/voice/signaling"
	"github.com/concord-chat/concord/runtime/domain/voice/turncred"
)

// rtcTransport is the WebRTC side, for browsers: an ice-lite pion API whose
// peer connections share one UDP port through the ICE UDP mux.
//
// Video (VP8 or H264, camera or screen, simulcast or not) goes only
// between browsers, on video slots made the same way (video.go).
//
// Media model: a browser's microphone track is read as RTP and forwarded
// into the call like a UDP speaker's packets (header rewritten to the
// server-assigned SSRC and Discord's payload type 120, extensions dropped).
// Towards a browser, every audio m-line the offer lets the server send on
// is a slot; a speaker is given a free slot on its first packet and the
// browser is told which user that slot's SSRC belongs to with op 5, as
// Discord's clients learn SSRC → user.
type rtcTransport struct {
	srv  *Server
	api  *webrtc.API
	conn net.PacketConn
	mux  interface{ Close() error }
}

func newRTCTransport(s *Server, cfg WebRTCConfig) (*rtcTransport, error) {
	if cfg.UDPAddr == "" {
		cfg.UDPAddr = ":0"
	}
	conn, err := net.ListenPacket("udp4", cfg.UDPAddr)
	if err != nil {
		return nil, fmt.Errorf("voice: webrtc listen %s: %w", cfg.UDPAddr, err)
	}
	// Every browser's media arrives on this one socket: it gets the media
	// sockets' buffers, not the kernel's default (about 200 KB), which
	// a group call's bursts overflow (the benchmark saw receive-buffer
	// drops on it alone).
	if uc, ok := conn.(*net.UDPConn); ok {
		_ = uc.SetReadBuffer(s.cfg.UDPReadBuffer)
		_ = uc.SetWriteBuffer(4 << 20)
	}
	ips := cfg.PublicIPs
	if len(ips) == 0 {
		ips = []string{s.publicIP}
	}
	se := webrtc.SettingEngine{}
	se.SetLite(true)
	se.SetNetworkTypes([]webrtc.NetworkType{webrtc.NetworkTypeUDP4})
	// Host candidates carry the advertised addresses instead of the
	// socket's (NAT 1:1). The address rewrite rules that replace this
	// call broke video between two browsers on loopback in our tests, so
	// the legacy setting stays until that is understood.
	//lint:ignore SA1019 SetICEAddressRewriteRules changes candidate gathering (see above)
	se.SetNAT1To1IPs(ips, webrtc.ICECandidateTypeHost)
	se.SetIncludeLoopbackCandidate(true)
	mux := webrtc.NewICEUDPMux(nil, conn)
	se.SetICEUDPMux(mux)
	me := &webrtc.MediaEngine{}
	if err := registerCodecs(me); err != nil {
		conn.Close()
		return nil, fmt.Errorf("voice: webrtc codecs: %w", err)
	}
	ir := &interceptor.Registry{}
	if err := registerInterceptors(me, ir, s.m.retransmitted); err != nil {
		conn.Close()
		return nil, fmt.Errorf("voice: webrtc interceptors: %w", err)
	}
	api := webrtc.NewAPI(webrtc.WithSettingEngine(se), webrtc.WithMediaEngine(me), webrtc.WithInterceptorRegistry(ir))
	return &rtcTransport{srv: s, api: api, conn: conn, mux: mux}, nil
}

func (t *rtcTransport) close() {
	_ = t.mux.Close()
	_ = t.conn.Close()
}

// rtcPeer is one browser participant's peer connection.
type rtcPeer struct {
	t    *rtcTransport
	se   *session
	pc   *webrtc.PeerConnection
	mu   sync.Mutex
	free []*rtcSlot
	used map[*participant]*rtcSlot
	// Video slots, the same for camera or screen tracks (VP8 or H264),
	// fed only from other browsers: the bot protocol carries no video.
	vfree []*rtcSlot
	vused map[videoKey]*rtcSlot
	// vrefused are publishers' streams whose codec this browser did not
	// negotiate.
	vrefused map[videoKey]bool

	// streams are this browser's incoming video tracks by receiver, each
	// with its layers (one, or one per simulcast encoding).
	lmu     sync.Mutex
	streams map[*webrtc.RTPReceiver]*videoStream
	// wants is what this browser asked to see (op 15); remb its latest
	// receiver estimate in bits per second (0: none).
	wants sinkWants
	remb  atomic.Uint64
}

// videoKey names one video stream of one publisher, the unit a viewer's
// video slot carries.
type videoKey struct {
	from   *participant
	stream *videoStream
}

type rtcSlot struct {
	sender *webrtc.RTPSender
	track  atomic.Pointer[webrtc.TrackLocalStaticRTP]
	ssrc   uint32
	from   atomic.Pointer[participant] // whose video the slot carries
	// codec is what the slot's track is bound with (guarded by the
	// peer's mu); sel splices the publisher's layers into it.
	codec webrtc.RTPCodecCapability
	sel   layerSelector
}

// answer builds the peer connection for a "webrtc" select protocol and
// returns the answer SDP, with candidates (no trickle: Discord's web
// client sends its offer after gathering and expects the same back).
func (t *rtcTransport) answer(se *session, offer string) (string, error) {
	pc, err := t.api.NewPeerConnection(webrtc.Configuration{})
	if err != nil {
		return "", fmt.Errorf("voice: webrtc peer: %w", err)
	}
	p := &rtcPeer{t: t, se: se, pc: pc, used: map[*participant]*rtcSlot{}, vused: map[videoKey]*rtcSlot{},
		vrefused: map[videoKey]bool{}, streams: map[*webrtc.RTPReceiver]*videoStream{}, wants: sinkWants{any: -1}}
	fail := func(err error) (string, error) {
		_ = pc.Close()
		return "", err
	}
	if err := pc.SetRemoteDescription(webrtc.SessionDescription{Type: webrtc.SDPTypeOffer, SDP: offer}); err != nil {
		return fail(fmt.Errorf("voice: webrtc offer: %w", err))
	}
	// One slot per audio m-line the offer lets the server send on.
	audio, video, err := sendable(offer)
	if err != nil {
		return fail(err)
	}
	for i := 0; i < audio+len(video); i++ {
		codec, id := webrtc.RTPCodecCapability{MimeType: webrtc.MimeTypeOpus, ClockRate: 48000, Channels: 2}, fmt.Sprintf("audio-%d", i)
		if i >= audio {
			codec, id = video[i-audio], fmt.Sprintf("video-%d", i-audio)
		}
		track, err := webrtc.NewTrackLocalStaticRTP(codec, id, "concord")
		if err != nil {
			return fail(err)
		}
		sender, err := pc.AddTrack(track)
		if err != nil {
			return fail(fmt.Errorf("voice: webrtc slot: %w", err))
		}
		slot := &rtcSlot{sender: sender, codec: codec, ssrc: uint32(sender.GetParameters().Encodings[0].SSRC)}
		slot.track.Store(track)
		go p.readRTCP(sender, slot)
		if i < audio {
			p.free = append(p.free, slot)
		} else {
			p.vfree = append(p.vfree, slot)
		}
	}
	pc.OnTrack(func(remote *webrtc.TrackRemote, recv *webrtc.RTPReceiver) {
		switch remote.Kind() {
		case webrtc.RTPCodecTypeAudio:
			p.ingest(remote)
		case webrtc.RTPCodecTypeVideo:
			if forwardable(remote.Codec().MimeType) {
				p.ingestVideo(p.addLayer(remote, recv))
			}
		}
	})
	pc.OnConnectionStateChange(func(st webrtc.PeerConnectionState) {
		if st == webrtc.PeerConnectionStateFailed {
			se.end(signaling.CloseSessionTimeout, "webrtc connection failed")
		}
	})
	ans, err := pc.CreateAnswer(nil)
	if err != nil {
		return fail(fmt.Errorf("voice: webrtc answer: %w", err))
	}
	gathered := webrtc.GatheringCompletePromise(pc)
	if err := pc.SetLocalDescription(ans); err != nil {
		return fail(fmt.Errorf("voice: webrtc local description: %w", err))
	}
	select {
	case <-gathered:
	case <-time.After(5 * time.Second):
		return fail(errors.New("voice: webrtc gathering timed out"))
	}
	se.mu.Lock()
	if se.wants != nil {
		p.setWants(*se.wants)
	}
	se.mu.Unlock()
	se.part.sink.Store(&listenerBox{l: p})
	return pc.LocalDescription().SDP, nil
}

// sendable counts the offer's audio m-lines that accept media from the
// server (sendrecv, the default, or recvonly on the browser's side) and
// returns for each such video m-line the codec its slot starts with: VP8
// when offered, else the first H264 format (a slot's codec follows its
// publisher later).
func sendable(offer string) (audio int, video []webrtc.RTPCodecCapability, err error) {
	var d sdp.SessionDescription
	if err := d.UnmarshalString(offer); err != nil {
		return 0, nil, fmt.Errorf("voice: webrtc offer: %w", err)
	}
	for _, m := range d.MediaDescriptions {
		if m.MediaName.Port.Value == 0 {
			continue
		}
		_, sendonly := m.Attribute("sendonly")
		_, inactive := m.Attribute("inactive")
		if sendonly || inactive {
			continue
		}
		switch m.MediaName.Media {
		case "audio":
			audio++
		case "video":
			video = append(video, slotCodec(m))
		}
	}
	return audio, video, nil
}

// readRTCP counts what a browser reports about what it receives, and
// passes its keyframe requests on a video slot to the slot's sender.
func (p *rtcPeer) readRTCP(sender *webrtc.RTPSender, slot *rtcSlot) {
	m := p.t.srv.m
	for {
		pkts, _, err := sender.ReadRTCP()
		if err != nil {
			return
		}
		for _, pkt := range pkts {
			switch r := pkt.(type) {
			case *rtcp.TransportLayerNack:
				for _, n := range r.Nacks {
					m.nacks.Add(float64(len(n.PacketList())))
				}
			case *rtcp.PictureLossIndication:
				m.plis.Inc()
				p.requestKeyframe(slot)
			case *rtcp.ReceiverEstimatedMaximumBitrate:
				p.remb.Store(uint64(r.Bitrate))
			case *rtcp.ReceiverReport:
				for _, rr := range r.Reports {
					if rtt, ok := rttFromReport(rr, time.Now()); ok {
						m.rtt.Observe(rtt.Seconds())
						if part := p.se.part; part != nil {
							part.rtt.add(rtt)
						}
					}
				}
			}
		}
	}
}

// rttFromReport computes the round trip from a reception report's LSR and
// DLSR (RFC 3550 §6.4.1), both in NTP short format.
func rttFromReport(rr rtcp.ReceptionReport, now time.Time) (time.Duration, bool) {
	if rr.LastSenderReport == 0 {
		return 0, false
	}
	ntp := uint64(now.Unix()+2208988800)<<32 | uint64(now.Nanosecond())*(1<<32)/1e9
	mid := uint32(ntp >> 16)
	d := mid - rr.LastSenderReport - rr.Delay
	if d > 1<<31 {
		return 0, false
	}
	return time.Duration(float64(d) / 65536 * float64(time.Second)), true
}

// ingest forwards a browser's audio into the call.
func (p *rtcPeer) ingest(remote *webrtc.TrackRemote) {
	s := p.t.srv
	part := p.se.part
	w := newForwarder(s, s.md.conns[0])
	go func() {
		hdr := make([]byte, 12)
		for {
			pkt, _, err := remote.ReadRTP()
			if err != nil {
				return
			}
			hdr[0], hdr[1] = 0x80, 0x78
			if pkt.Marker {
				hdr[1] |= 0x80
			}
			binary.BigEndian.PutUint16(hdr[2:], pkt.SequenceNumber)
			binary.BigEndian.PutUint32(hdr[4:], pkt.Timestamp)
			binary.BigEndian.PutUint32(hdr[8:], part.ssrc)
			part.mu.Lock()
			gap := part.quality.update(pkt.SequenceNumber, pkt.Timestamp, s.cfg.Now())
			part.mu.Unlock()
			if gap > 0 {
				s.m.lost.Add(float64(gap))
			}
			s.m.packetsIn.Inc()
			if part.mute.Load() {
				w.drop(dropMuted)
				continue
			}
			w.forward(part, hdr, pkt.Payload)
		}
	}()
}

// deliver sends one packet to the browser on the speaker's slot.
func (p *rtcPeer) deliver(w *forwarder, from *participant, header, plain, buf []byte) []byte {
	p.mu.Lock()
	slot := p.used[from]
	if slot == nil {
		if len(p.free) == 0 {
			p.mu.Unlock()
			w.drop(dropUnsupported)
			return buf
		}
		slot = p.free[0]
		p.free = p.free[1:]
		p.used[from] = slot
		p.mu.Unlock()
		uid := signaling.Snowflake(from.userID)
		zero := 0
		p.se.send(signaling.OpSpeaking, signaling.Speaking{Speaking: 1, Delay: &zero, SSRC: slot.ssrc, UserID: &uid})
	} else {
		p.mu.Unlock()
	}
	payload := plain
	if header[0]&0x10 != 0 && len(header) >= 4 {
		words := int(binary.BigEndian.Uint16(header[len(header)-2:]))
		if 4*words > len(plain) {
			return buf
		}
		payload = plain[4*words:]
	}
	pkt := rtp.Packet{Header: rtp.Header{Version: 2, Marker: header[1]&0x80 != 0, PayloadType: 111,
		SequenceNumber: binary.BigEndian.Uint16(header[2:4]), Timestamp: binary.BigEndian.Uint32(header[4:8])}, Payload: payload}
	if err := slot.track.Load().WriteRTP(&pkt); err != nil {
		w.md.m.sendErrors.Inc()
		return buf
	}
	w.md.m.packetsForwarded.Inc()
	w.md.m.bytesForwarded.Add(float64(12 + len(payload)))
	return buf
}

// release frees a departed speaker's slots.
func (p *rtcPeer) release(from *participant) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if s := p.used[from]; s != nil {
		delete(p.used, from)
		p.free = append(p.free, s)
	}
	for k := range p.vrefused {
		if k.from == from {
			delete(p.vrefused, k)
		}
	}
	for k, s := range p.vused {
		if k.from == from {
			delete(p.vused, k)
			s.from.Store(nil)
			s.sel.reset()
			p.vfree = append(p.vfree, s)
		}
	}
}

func (p *rtcPeer) close() { _ = p.pc.Close() }

// iceServers are the ICE servers handed to user's session in Ready: the
// configured ones, each TURN server with a credential minted for this
// session when a TURN secret is set.
func (s *Server) iceServers(user snowflake.ID) []ICEServer {
	cfg := s.cfg.WebRTC
	if cfg.TURNSecret == "" || len(cfg.ICEServers) == 0 {
		return cfg.ICEServers
	}
	exp := s.cfg.Now().Add(cfg.TURNCredentialTTL)
	out := make([]ICEServer, len(cfg.ICEServers))
	for i, srv := range cfg.ICEServers {
		out[i] = srv
		if isTURN(srv) {
			out[i].URLs = slices.Clone(srv.URLs)
			out[i].Username, out[i].Credential = turncred.Mint(cfg.TURNSecret, strconv.FormatUint(uint64(user), 10), exp)
		}
	}
	s.m.turnMinted.Inc()
	return out
}
