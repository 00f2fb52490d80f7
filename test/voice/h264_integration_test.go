//go:build integration

package voice

import (
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/pion/rtcp"
	"github.com/pion/rtp"
	"github.com/pion/rtp/codecs"
	"github.com/pion/webrtc/v4"
	"github.com/pion/webrtc/v4/pkg/media/h264reader"

	"github.com/concord-chat/concord/runtime/domain/voice"
)

// h264Packets encodes one second of a test pattern with Debian's ffmpeg
// (libx264, baseline profile, a keyframe every 10 frames) and packetizes
// it as a browser would (FU-A and STAP-A, packetization-mode 1).
func h264Packets(t *testing.T) []*rtp.Packet {
	t.Helper()
	ff, err := exec.LookPath("ffmpeg")
	if err != nil {
		t.Fatal("ffmpeg is not installed: run `make test` (hack/test-deps.sh installs Debian's ffmpeg)")
	}
	out := filepath.Join(t.TempDir(), "pattern.h264")
	cmd := exec.Command(ff, "-hide_banner", "-loglevel", "error", "-f", "lavfi", "-i", "testsrc=size=320x240:rate=30", "-t", "1",
		"-c:v", "libx264", "-profile:v", "baseline", "-pix_fmt", "yuv420p", "-g", "10", "-bsf:v", "h264_mp4toannexb", "-f", "h264", out)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("ffmpeg (Debian's build has libx264): %v\n%s", err, b)
	}
	f, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := h264reader.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	pz := rtp.NewPacketizer(1200, 102, 1, &codecs.H264Payloader{}, rtp.NewRandomSequencer(), 90000)
	var pkts []*rtp.Packet
	for {
		nal, err := r.NextNAL()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		samples := uint32(0)
		if nal.UnitType == h264reader.NalUnitTypeCodedSliceIdr || nal.UnitType == h264reader.NalUnitTypeCodedSliceNonIdr {
			samples = 3000
		}
		pkts = append(pkts, pz.Packetize(nal.Data, samples)...)
	}
	if len(pkts) < 30 {
		t.Fatalf("ffmpeg's stream made only %d packets", len(pkts))
	}
	return pkts
}

// TestBrowserH264: H264 from a publisher reaches a viewer that negotiated
// H264 on its video slot (which began as VP8) byte-identical, the viewer's
// keyframe request reaches the publisher as a PLI, and a viewer that
// offered only VP8 gets no video slot for it (no transcoding).
func TestBrowserH264(t *testing.T) {
	pkts := h264Packets(t)
	s := startSFU(t, func(c *voice.Config) { c.WebRTC = &voice.WebRTCConfig{UDPAddr: "127.0.0.1:0"} })
	ctx := ctxT(t)
	h264 := webrtc.RTPCodecCapability{MimeType: webrtc.MimeTypeH264, ClockRate: 90000,
		SDPFmtpLine: "level-asymmetry-allowed=1;packetization-mode=1;profile-level-id=42e01f"}
	a := joinBrowserWith(t, ctx, s, s.newUser(channelID), browserOptions{listenSlots: 1, camera: true, camCodec: h264})
	b := joinBrowser(t, ctx, s, s.newUser(channelID), 1, true)
	c := joinBrowserWith(t, ctx, s, s.newUser(channelID), browserOptions{listenSlots: 1, camera: true, vp8Only: true})

	// The first keyframe (SPS/PPS in a STAP-A, then the IDR slice's
	// fragments) is sent until one packet reaches the viewer: the path is
	// open then. Sequence numbers keep counting so each send is new.
	seq := uint16(5000)
	write := func(p *rtp.Packet) {
		t.Helper()
		q := p.Clone()
		q.SequenceNumber = seq
		seq++
		if err := a.cam.WriteRTP(q); err != nil {
			t.Fatal(err)
		}
	}
	keyframe := 0
	for keyframe < len(pkts) && pkts[keyframe].Marker == false {
		keyframe++
	}
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for opened := false; !opened; {
		for _, p := range pkts[:keyframe+1] {
			write(p)
		}
		select {
		case <-b.videoRTP:
			opened = true
		case <-tick.C:
		case <-ctx.Done():
			t.Fatal("no H264 packet ever reached the viewer")
		}
	}
	first := seq
	for _, p := range pkts {
		write(p)
	}
	// What arrives from the stream is its packets in order, payloads
	// byte-identical under their sequence numbers (a single-layer stream
	// keeps its numbering); late warm-up copies come before first.
	matched, last := 0, -1
	timeout := time.After(10 * time.Second)
	for last < len(pkts)-1 {
		select {
		case got := <-b.videoRTP:
			j := int(got.SequenceNumber - first)
			if j >= len(pkts) {
				continue // a warm-up copy
			}
			if j <= last || !bytes.Equal(got.Payload, pkts[j].Payload) || got.Marker != pkts[j].Marker || got.Timestamp != pkts[j].Timestamp {
				t.Fatalf("viewer packet %d (after %d): payload identical %v, marker %v (sent %v), ts %d (sent %d)",
					j, last, bytes.Equal(got.Payload, pkts[j].Payload), got.Marker, pkts[j].Marker, got.Timestamp, pkts[j].Timestamp)
			}
			matched++
			last = j
		case <-timeout:
			last = len(pkts)
		}
	}
	if matched < len(pkts)*9/10 {
		t.Fatalf("viewer got %d of %d H264 packets", matched, len(pkts))
	}
	b.mu.Lock()
	mime := b.videoMime
	b.mu.Unlock()
	if mime != webrtc.MimeTypeH264 {
		t.Fatalf("viewer's video track is %q, want H264", mime)
	}

	// The viewer's PLI (its track opening sent one; this is another)
	// reaches the publisher.
	s.waitCounter("concord_voice_rtcp_plis_total", nil, 1)
	for len(a.plis) > 0 {
		<-a.plis
	}
	if err := b.pc.WriteRTCP([]rtcp.Packet{&rtcp.PictureLossIndication{MediaSSRC: b.videoSSRC.Load()}}); err != nil {
		t.Fatal(err)
	}
	s.waitCounter("concord_voice_rtcp_plis_total", nil, 2)
	select {
	case <-a.plis:
	case <-ctx.Done():
		t.Fatal("the H264 publisher never got the viewer's keyframe request")
	}

	// The VP8-only viewer got no slot: its packets were dropped as
	// unsupported, and nothing reached it.
	s.waitCounter("concord_voice_packets_dropped_total", map[string]string{"reason": "unsupported_payload"}, 1)
	if n := len(c.videoRTP); n != 0 {
		t.Fatalf("the VP8-only viewer received %d video packets of an H264 publisher", n)
	}
}
