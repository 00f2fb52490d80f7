package voice

import (
	"fmt"
	"strings"

	"github.com/pion/sdp/v3"
	"github.com/pion/webrtc/v4"
)

// The codecs the WebRTC transport negotiates. The SFU never decodes, so it
// offers only what it can forward between peers: Opus for audio, VP8 and
// H264 for video (camera or screen). RTX is left out on purpose: a
// retransmission is sent as the original packet again on its own SSRC
// (RFC 4585 generic NACK), which stays correct when a video slot changes
// codec between publishers, where an RTX stream's apt would point at the
// slot's first codec.

// videoFeedback is what every video codec accepts from a receiver; the NACK
// interceptors add "nack" and "nack pli".
var videoFeedback = []webrtc.RTCPFeedback{{Type: "goog-remb"}, {Type: "ccm", Parameter: "fir"}}

// h264Profiles are the H264 formats browsers offer: constrained baseline
// (42e01f), baseline (42001f), main (4d001f) and high (64001f), each with
// packetization-mode 1 (FU-A and STAP-A) and 0 (one NAL unit a packet).
var h264Profiles = []struct {
	pt   webrtc.PayloadType
	fmtp string
}{
	{102, "level-asymmetry-allowed=1;packetization-mode=1;profile-level-id=42001f"},
	{104, "level-asymmetry-allowed=1;packetization-mode=0;profile-level-id=42001f"},
	{106, "level-asymmetry-allowed=1;packetization-mode=1;profile-level-id=42e01f"},
	{108, "level-asymmetry-allowed=1;packetization-mode=0;profile-level-id=42e01f"},
	{127, "level-asymmetry-allowed=1;packetization-mode=1;profile-level-id=4d001f"},
	{125, "level-asymmetry-allowed=1;packetization-mode=0;profile-level-id=4d001f"},
	{112, "level-asymmetry-allowed=1;packetization-mode=1;profile-level-id=64001f"},
}

// registerCodecs fills a media engine with the forwarded codecs and the
// header extensions simulcast needs (mid, rid and repaired rid).
func registerCodecs(me *webrtc.MediaEngine) error {
	audio := webrtc.RTPCodecParameters{PayloadType: 111, RTPCodecCapability: webrtc.RTPCodecCapability{
		MimeType: webrtc.MimeTypeOpus, ClockRate: 48000, Channels: 2, SDPFmtpLine: "minptime=10;useinbandfec=1"}}
	if err := me.RegisterCodec(audio, webrtc.RTPCodecTypeAudio); err != nil {
		return fmt.Errorf("register opus: %w", err)
	}
	video := []webrtc.RTPCodecParameters{{PayloadType: 96, RTPCodecCapability: webrtc.RTPCodecCapability{
		MimeType: webrtc.MimeTypeVP8, ClockRate: 90000, RTCPFeedback: videoFeedback}}}
	for _, p := range h264Profiles {
		video = append(video, webrtc.RTPCodecParameters{PayloadType: p.pt, RTPCodecCapability: webrtc.RTPCodecCapability{
			MimeType: webrtc.MimeTypeH264, ClockRate: 90000, SDPFmtpLine: p.fmtp, RTCPFeedback: videoFeedback}})
	}
	for _, c := range video {
		if err := me.RegisterCodec(c, webrtc.RTPCodecTypeVideo); err != nil {
			return fmt.Errorf("register %s: %w", c.MimeType, err)
		}
	}
	for _, uri := range []string{sdp.SDESMidURI, sdp.SDESRTPStreamIDURI, sdp.SDESRepairRTPStreamIDURI} {
		if err := me.RegisterHeaderExtension(webrtc.RTPHeaderExtensionCapability{URI: uri}, webrtc.RTPCodecTypeVideo); err != nil {
			return fmt.Errorf("register extension %s: %w", uri, err)
		}
	}
	return nil
}

// fmtpParam returns one parameter of an fmtp line ("" when absent).
func fmtpParam(line, key string) string {
	for _, kv := range strings.Split(line, ";") {
		k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
		if ok && strings.EqualFold(k, key) {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// codecFor picks the codec a subscriber negotiated that can carry a
// publisher's stream unchanged: the same MIME type and, for H264, the same
// packetization mode (a receiver of mode 0 cannot reassemble FU-A) and
// profile when the subscriber offered it, else any profile of the mode
// (browsers decode every profile they offer at any level, and most decode
// all of them). ok is false when the subscriber cannot receive it: the SFU
// does not transcode.
func codecFor(pub webrtc.RTPCodecCapability, negotiated []webrtc.RTPCodecParameters) (webrtc.RTPCodecCapability, bool) {
	var fallback *webrtc.RTPCodecParameters
	for i, c := range negotiated {
		if !strings.EqualFold(c.MimeType, pub.MimeType) {
			continue
		}
		if !strings.EqualFold(pub.MimeType, webrtc.MimeTypeH264) {
			return c.RTPCodecCapability, true
		}
		if h264Mode(c.SDPFmtpLine) != h264Mode(pub.SDPFmtpLine) {
			continue
		}
		if h264Profile(c.SDPFmtpLine) == h264Profile(pub.SDPFmtpLine) {
			return c.RTPCodecCapability, true
		}
		if fallback == nil {
			fallback = &negotiated[i]
		}
	}
	if fallback != nil {
		return fallback.RTPCodecCapability, true
	}
	return webrtc.RTPCodecCapability{}, false
}

// h264Mode is an fmtp line's packetization-mode, "0" when absent (RFC 6184).
func h264Mode(fmtp string) string {
	if m := fmtpParam(fmtp, "packetization-mode"); m != "" {
		return m
	}
	return "0"
}

// h264Profile is the profile part of profile-level-id (profile_idc and the
// constraint flags), without the level.
func h264Profile(fmtp string) string {
	id := strings.ToLower(fmtpParam(fmtp, "profile-level-id"))
	if len(id) != 6 {
		return "42e0" // RFC 6184's default, constrained baseline
	}
	return id[:4]
}
