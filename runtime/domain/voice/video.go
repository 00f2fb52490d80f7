package voice

import (
	"errors"
	"fmt"
	"strings"

	"github.com/pion/rtcp"
	"github.com/pion/rtp"
	"github.com/pion/sdp/v3"
	"github.com/pion/webrtc/v4"

	"github.com/concord-chat/concord/runtime/domain/voice/signaling"
)

// Video between browsers. A publisher's video track (or each of its
// simulcast layers) is read as RTP and offered to every other browser in
// the call, which carries it on one of its video slots:
//
//   - A slot takes the codec of the publisher it is given: its track is
//     replaced by one of the publisher's codec when the viewer negotiated
//     it (H264 with the same packetization mode), else the viewer gets no
//     slot for that publisher (dropped as unsupported_payload): the SFU
//     does not transcode.
//   - The slot's layerSelector chooses the layer and splices sequence
//     numbers and timestamps; header extensions of the publisher's
//     negotiation are stripped (their ids mean nothing to the viewer).
//   - A viewer's PLI reaches the publisher as a PLI on the layer the slot
//     forwards (or is switching to); a new viewer triggers one.

// errNoCodec is returned when a viewer cannot receive a publisher's codec.
var errNoCodec = errors.New("voice: viewer did not negotiate the publisher's codec")

// forwardable reports the video codecs the SFU forwards.
func forwardable(mime string) bool {
	return strings.EqualFold(mime, webrtc.MimeTypeVP8) || strings.EqualFold(mime, webrtc.MimeTypeH264)
}

// slotCodec is the codec a video slot starts with for an offer's m-line:
// VP8 when offered, else its first H264 format, else VP8 (the slot then
// takes whatever its first publisher sends, if the viewer can take it).
func slotCodec(m *sdp.MediaDescription) webrtc.RTPCodecCapability {
	vp8 := webrtc.RTPCodecCapability{MimeType: webrtc.MimeTypeVP8, ClockRate: 90000}
	var h264 *webrtc.RTPCodecCapability
	fmtps := map[string]string{}
	for _, a := range m.Attributes {
		if a.Key == "fmtp" {
			if pt, line, ok := strings.Cut(a.Value, " "); ok {
				fmtps[pt] = line
			}
		}
	}
	for _, a := range m.Attributes {
		if a.Key != "rtpmap" {
			continue
		}
		pt, name, ok := strings.Cut(a.Value, " ")
		if !ok {
			continue
		}
		enc, _, _ := strings.Cut(name, "/")
		switch strings.ToUpper(enc) {
		case "VP8":
			return vp8
		case "H264":
			if h264 == nil {
				h264 = &webrtc.RTPCodecCapability{MimeType: webrtc.MimeTypeH264, ClockRate: 90000, SDPFmtpLine: fmtps[pt]}
			}
		}
	}
	if h264 != nil {
		return *h264
	}
	return vp8
}

// ingestVideo forwards one of a browser's video layers to the other
// browsers in the call.
func (p *rtcPeer) ingestVideo(l *videoLayer) {
	s := p.t.srv
	part := p.se.part
	go func() {
		defer p.removeLayer(l)
		for {
			pkt, _, err := l.track.ReadRTP()
			if err != nil {
				return
			}
			now := s.cfg.Now()
			l.measure(pkt.MarshalSize(), now)
			s.m.packetsIn.Inc()
			if part.mute.Load() {
				continue
			}
			for _, m := range part.call.snapshot() {
				if m == part || m.deaf.Load() {
					continue
				}
				if b := m.sink.Load(); b != nil {
					if peer, ok := b.l.(*rtcPeer); ok {
						peer.deliverVideo(part, p, l, pkt)
					}
				}
			}
		}
	}()
}

// carry makes the slot's track match a publisher's codec, replacing it
// when the codec differs. Called with the peer's mu held.
func (slot *rtcSlot) carry(pub webrtc.RTPCodecCapability) error {
	if strings.EqualFold(slot.codec.MimeType, pub.MimeType) &&
		(!strings.EqualFold(pub.MimeType, webrtc.MimeTypeH264) || h264Mode(slot.codec.SDPFmtpLine) == h264Mode(pub.SDPFmtpLine)) {
		return nil
	}
	codec, ok := codecFor(pub, slot.sender.GetParameters().Codecs)
	if !ok {
		return errNoCodec
	}
	track, err := webrtc.NewTrackLocalStaticRTP(codec, slot.track.Load().ID(), "concord")
	if err != nil {
		return fmt.Errorf("voice: video slot track: %w", err)
	}
	if err := slot.sender.ReplaceTrack(track); err != nil {
		return fmt.Errorf("voice: video slot codec %s: %w", codec.MimeType, err)
	}
	slot.track.Store(track)
	slot.codec = codec
	return nil
}

// deliverVideo offers one packet of a publisher's layer to this viewer,
// taking a free slot (and announcing it with op 5 for the user) first.
func (p *rtcPeer) deliverVideo(from *participant, src *rtcPeer, l *videoLayer, pkt *rtp.Packet) {
	m := p.t.srv.m
	key := videoKey{from: from, stream: l.stream}
	p.mu.Lock()
	slot, fresh := p.vused[key], false
	if slot == nil {
		fresh = true
		if len(p.vfree) == 0 || p.vrefused[key] {
			p.mu.Unlock()
			m.dropped[dropUnsupported].Inc()
			return
		}
		slot = p.vfree[0]
		if err := slot.carry(l.track.Codec().RTPCodecCapability); err != nil {
			p.vrefused[key] = true
			p.mu.Unlock()
			p.t.srv.cfg.Logger.Info("voice: no video slot for a publisher", "user", from.userID, "viewer", p.se.part.userID, "codec", l.mime, "err", err)
			m.dropped[dropUnsupported].Inc()
			return
		}
		p.vfree = p.vfree[1:]
		p.vused[key] = slot
		slot.from.Store(from)
		p.mu.Unlock()
		uid := signaling.Snowflake(from.userID)
		zero := 0
		p.se.send(signaling.OpSpeaking, signaling.Speaking{Speaking: 0, Delay: &zero, SSRC: slot.ssrc, UserID: &uid})
	} else {
		p.mu.Unlock()
	}
	layers := l.stream.snapshot()
	want := pickLayer(layers, p.wants.quality(slot.ssrc, from.ssrc), p.budget())
	simulcast := len(layers) > 1 || l.rid != ""
	a := slot.sel.admit(l, want, simulcast, pkt, p.t.srv.cfg.Now())
	if a.pli != nil {
		src.keyframe(a.pli)
	} else if fresh && want != nil {
		src.keyframe(want) // a new viewer needs a keyframe to start decoding
	}
	if a.switched {
		m.layerSwitches.Inc()
	}
	if !a.forward {
		return
	}
	out := rtp.Packet{Header: rtp.Header{Version: 2, Padding: pkt.Padding, Marker: pkt.Marker, PayloadType: pkt.PayloadType,
		SequenceNumber: a.seq, Timestamp: a.ts, SSRC: pkt.SSRC, CSRC: pkt.CSRC}, Payload: pkt.Payload, PaddingSize: pkt.PaddingSize}
	if err := slot.track.Load().WriteRTP(&out); err != nil {
		m.sendErrors.Inc()
		return
	}
	m.packetsForwarded.Inc()
	m.bytesForwarded.Add(float64(out.MarshalSize()))
}

// budget is the bit rate this viewer can take per video slot: its REMB
// estimate shared by the slots in use (0: unknown).
func (p *rtcPeer) budget() uint64 {
	r := p.remb.Load()
	if r == 0 {
		return 0
	}
	p.mu.Lock()
	n := uint64(max(len(p.vused), 1))
	p.mu.Unlock()
	return r / n
}

// requestKeyframe asks the browser whose video a slot carries for a
// keyframe on the layer the slot needs.
func (p *rtcPeer) requestKeyframe(slot *rtcSlot) {
	if slot == nil {
		return
	}
	from := slot.from.Load()
	if from == nil {
		return
	}
	b := from.sink.Load()
	if b == nil {
		return
	}
	src, ok := b.l.(*rtcPeer)
	if !ok {
		return
	}
	// Before the slot chose a layer there is nothing to ask for: the
	// choice itself sends the request.
	if l := slot.sel.keyframeLayer(); l != nil {
		src.keyframe(l)
	}
}

// keyframe sends this publisher a PLI for one of its layers.
func (p *rtcPeer) keyframe(l *videoLayer) {
	_ = p.pc.WriteRTCP([]rtcp.Packet{&rtcp.PictureLossIndication{MediaSSRC: uint32(l.track.SSRC())}})
}

// setWants applies a viewer's op 15.
func (p *rtcPeer) setWants(w signaling.MediaSinkWants) { p.wants.set(w) }
