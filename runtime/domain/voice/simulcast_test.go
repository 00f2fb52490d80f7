package voice

import (
	"testing"
	"time"

	"github.com/pion/rtp"
	"github.com/pion/webrtc/v4"
)

func TestKeyframe(t *testing.T) {
	for _, c := range []struct {
		mime string
		b    []byte
		key  bool
	}{
		{"video/VP8", []byte{0x10, 0x00, 0x9d, 0x01, 0x2a}, true},
		{"video/VP8", []byte{0x10, 0x01}, false},                  // interframe
		{"video/VP8", []byte{0x00, 0x00}, false},                  // not a partition start
		{"video/VP8", []byte{0x90, 0x80, 0x81, 0x02, 0x00}, true}, // X, I with 15-bit picture id
		{"video/VP8", []byte{0x90, 0x80, 0x81}, false},            // truncated
		{"video/VP8", nil, false},
		{"video/H264", []byte{0x65, 0x88}, true},                                     // IDR
		{"video/H264", []byte{0x41, 0x9a}, false},                                    // non-IDR slice
		{"video/H264", []byte{0x78, 0x00, 0x02, 0x67, 0x42, 0x00, 0x01, 0x68}, true}, // STAP-A with SPS
		{"video/H264", []byte{0x78, 0x00, 0x09, 0x67}, false},                        // STAP-A overrunning
		{"video/H264", []byte{0x7c, 0x85, 0x88}, true},                               // FU-A start of an IDR
		{"video/H264", []byte{0x7c, 0x05, 0x88}, false},                              // FU-A continuation
		{"video/H264", []byte{0x7c}, false},
		{"video/VP9", []byte{0x00}, false},
	} {
		if got := isKeyframe(c.mime, c.b); got != c.key {
			t.Errorf("%s % x: keyframe %v, want %v", c.mime, c.b, got, c.key)
		}
	}
}

func FuzzKeyframe(f *testing.F) {
	f.Add([]byte{0x90, 0x80, 0x81, 0x02, 0x00})
	f.Add([]byte{0x78, 0x00, 0x02, 0x67, 0x42})
	f.Fuzz(func(_ *testing.T, b []byte) {
		isKeyframe("video/VP8", b)
		isKeyframe("video/H264", b)
	})
}

func TestCodecFor(t *testing.T) {
	mode1 := "level-asymmetry-allowed=1;packetization-mode=1;profile-level-id=42e01f"
	neg := []webrtc.RTPCodecParameters{
		{PayloadType: 96, RTPCodecCapability: webrtc.RTPCodecCapability{MimeType: "video/VP8", ClockRate: 90000}},
		{PayloadType: 104, RTPCodecCapability: webrtc.RTPCodecCapability{MimeType: "video/H264", ClockRate: 90000, SDPFmtpLine: "packetization-mode=0;profile-level-id=42e01f"}},
		{PayloadType: 102, RTPCodecCapability: webrtc.RTPCodecCapability{MimeType: "video/H264", ClockRate: 90000, SDPFmtpLine: "packetization-mode=1;profile-level-id=42001f"}},
		{PayloadType: 106, RTPCodecCapability: webrtc.RTPCodecCapability{MimeType: "video/H264", ClockRate: 90000, SDPFmtpLine: mode1}},
	}
	c, ok := codecFor(webrtc.RTPCodecCapability{MimeType: "video/H264", ClockRate: 90000, SDPFmtpLine: mode1}, neg)
	if !ok || c.SDPFmtpLine != mode1 {
		t.Fatalf("same profile: %+v %v", c, ok)
	}
	c, ok = codecFor(webrtc.RTPCodecCapability{MimeType: "video/H264", ClockRate: 90000, SDPFmtpLine: "packetization-mode=1;profile-level-id=640c1f"}, neg)
	if !ok || h264Mode(c.SDPFmtpLine) != "1" {
		t.Fatalf("another profile of mode 1: %+v %v", c, ok)
	}
	if _, ok := codecFor(webrtc.RTPCodecCapability{MimeType: "video/H264", ClockRate: 90000, SDPFmtpLine: mode1}, neg[:2]); ok {
		t.Fatal("mode 1 carried to a mode-0-only viewer")
	}
	if _, ok := codecFor(webrtc.RTPCodecCapability{MimeType: "video/H264", ClockRate: 90000}, neg[:1]); ok {
		t.Fatal("H264 carried to a VP8-only viewer")
	}
}

func TestPickLayer(t *testing.T) {
	q, h, f := &videoLayer{rid: "q"}, &videoLayer{rid: "h"}, &videoLayer{rid: "f"}
	q.rate.Store(150_000)
	h.rate.Store(500_000)
	f.rate.Store(1_500_000)
	ls := []*videoLayer{q, h, f}
	for _, c := range []struct {
		quality int
		budget  uint64
		want    *videoLayer
	}{
		{-1, 0, f}, {100, 0, f}, {0, 0, nil}, {20, 0, q}, {50, 0, h}, {66, 0, h}, {67, 0, f},
		{100, 600_000, h}, {100, 100_000, q}, {50, 2_000_000, h},
	} {
		if got := pickLayer(ls, c.quality, c.budget); got != c.want {
			t.Errorf("quality %d budget %d: got %v, want %v", c.quality, c.budget, got, c.want)
		}
	}
}

// TestLayerSplice: a switch waits for the target's keyframe and the
// output's sequence numbers continue by one across it.
func TestLayerSplice(t *testing.T) {
	q := &videoLayer{rid: "q", mime: "video/VP8"}
	f := &videoLayer{rid: "f", mime: "video/VP8"}
	var s layerSelector
	now := time.Unix(0, 0)
	key, delta := []byte{0x10, 0x00}, []byte{0x10, 0x01}
	pkt := func(seq uint16, ts uint32, p []byte) *rtp.Packet {
		return &rtp.Packet{Header: rtp.Header{SequenceNumber: seq, Timestamp: ts}, Payload: p}
	}
	if a := s.admit(q, q, true, pkt(10, 900, delta), now); a.forward || a.pli != q {
		t.Fatalf("started on an interframe: %+v", a)
	}
	if a := s.admit(q, q, true, pkt(11, 1000, key), now); !a.forward || a.seq != 11 || a.ts != 1000 {
		t.Fatalf("start at the keyframe: %+v", a)
	}
	now = now.Add(10 * time.Millisecond)
	if a := s.admit(f, f, true, pkt(500, 70000, delta), now); a.forward || a.pli != f {
		t.Fatalf("switched to f on an interframe: %+v", a)
	}
	if a := s.admit(q, f, true, pkt(12, 1100, delta), now); !a.forward || a.seq != 12 {
		t.Fatalf("q stopped before f's keyframe: %+v", a)
	}
	now = now.Add(20 * time.Millisecond)
	a := s.admit(f, f, true, pkt(501, 72000, key), now)
	if !a.forward || !a.switched || a.seq != 13 || a.ts != 1100+20*90 {
		t.Fatalf("switch at f's keyframe: %+v", a)
	}
	if a := s.admit(q, f, true, pkt(13, 1200, delta), now); a.forward {
		t.Fatalf("q still forwarded after the switch: %+v", a)
	}
	if a := s.admit(f, f, true, pkt(502, 75000, delta), now); !a.forward || a.seq != 14 || a.ts != 1100+20*90+3000 {
		t.Fatalf("f after the switch: %+v", a)
	}
}

// BenchmarkLayerSelect measures what simulcast adds per forwarded video
// packet (choosing the viewer's layer, the keyframe check, the splice)
// beside its peer in the same run: building the outgoing header alone.
func BenchmarkLayerSelect(b *testing.B) {
	q, h, f := &videoLayer{rid: "q", mime: "video/VP8"}, &videoLayer{rid: "h", mime: "video/VP8"}, &videoLayer{rid: "f", mime: "video/VP8"}
	ls := []*videoLayer{q, h, f}
	pkt := &rtp.Packet{Header: rtp.Header{Version: 2, PayloadType: 96, SequenceNumber: 1, Timestamp: 1}, Payload: make([]byte, 1000)}
	pkt.Payload[0], pkt.Payload[1] = 0x10, 0x01
	now := time.Unix(1, 0)
	var sink rtp.Packet
	b.Run("header-only", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			pkt.SequenceNumber++
			sink = rtp.Packet{Header: rtp.Header{Version: 2, Marker: pkt.Marker, PayloadType: pkt.PayloadType,
				SequenceNumber: pkt.SequenceNumber, Timestamp: pkt.Timestamp}, Payload: pkt.Payload}
		}
	})
	b.Run("select", func(b *testing.B) {
		var s layerSelector
		pkt.Payload[1] = 0x00
		s.admit(f, f, true, pkt, now)
		pkt.Payload[1] = 0x01
		for i := 0; i < b.N; i++ {
			pkt.SequenceNumber++
			for _, l := range ls { // each of the three layers' packets is offered
				a := s.admit(l, pickLayer(ls, -1, 0), true, pkt, now)
				if a.forward {
					sink = rtp.Packet{Header: rtp.Header{Version: 2, Marker: pkt.Marker, PayloadType: pkt.PayloadType,
						SequenceNumber: a.seq, Timestamp: a.ts}, Payload: pkt.Payload}
				}
			}
		}
	})
	_ = sink
}
