package voice

import "strings"

// isKeyframe reports whether an RTP payload of the given video codec starts
// a keyframe, the only point where a subscriber can start decoding a
// stream or switch to another simulcast layer. The SFU reads no further
// than the payload's first bytes: it never decodes.
func isKeyframe(mime string, payload []byte) bool {
	switch {
	case strings.EqualFold(mime, "video/VP8"):
		return vp8Keyframe(payload)
	case strings.EqualFold(mime, "video/H264"):
		return h264Keyframe(payload)
	}
	return false
}

// vp8Keyframe reads the VP8 payload descriptor (RFC 7741 §4.2): a packet
// starting partition 0 of a frame whose payload header has P = 0.
func vp8Keyframe(b []byte) bool {
	if len(b) < 1 {
		return false
	}
	s, pid := b[0]&0x10 != 0, b[0]&0x07
	if !s || pid != 0 {
		return false
	}
	i := 1
	if b[0]&0x80 != 0 { // X: extension byte(s) follow
		if len(b) < 2 {
			return false
		}
		x := b[1]
		i = 2
		if x&0x80 != 0 { // I: picture id, 7 or 15 bits
			if len(b) <= i {
				return false
			}
			if b[i]&0x80 != 0 {
				i++
			}
			i++
		}
		if x&0x40 != 0 { // L: TL0PICIDX
			i++
		}
		if x&0x30 != 0 { // T or K: TID/Y/KEYIDX
			i++
		}
	}
	return len(b) > i && b[i]&0x01 == 0
}

// H264 NAL unit types (RFC 6184).
const (
	naluIDR   = 5
	naluSPS   = 7
	naluSTAPA = 24
	naluFUA   = 28
)

// h264Keyframe reports an IDR slice or a sequence parameter set (which
// precedes one) as a single NAL unit, inside a STAP-A, or as the first
// fragment of an FU-A.
func h264Keyframe(b []byte) bool {
	if len(b) < 1 {
		return false
	}
	switch t := b[0] & 0x1f; t {
	case naluIDR, naluSPS:
		return true
	case naluSTAPA:
		for i := 1; i+2 < len(b); {
			n := int(b[i])<<8 | int(b[i+1])
			i += 2
			if n == 0 || i+n > len(b) {
				return false
			}
			if t := b[i] & 0x1f; t == naluIDR || t == naluSPS {
				return true
			}
			i += n
		}
	case naluFUA:
		if len(b) < 2 {
			return false
		}
		t := b[1] & 0x1f
		return b[1]&0x80 != 0 && (t == naluIDR || t == naluSPS)
	}
	return false
}
