package voice

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pion/rtcp"
	"github.com/pion/rtp"
	"github.com/pion/sdp/v3"
	"github.com/pion/webrtc/v4"

	"github.com/concord-chat/concord/runtime/domain/voice"
	"github.com/concord-chat/concord/runtime/domain/voice/signaling"
)

// simulcastRIDs are the publisher's layers, lowest first, and the size of
// a frame on each (so their bit rates differ as real layers' do).
var simulcastRIDs = []string{"q", "h", "f"}
var simulcastSizes = map[string]int{"q": 100, "h": 300, "f": 1000}

// simulcaster is a pion publisher sending one camera track as three
// simulcast encodings tagged with mid and rid header extensions, as a
// browser does, each layer with its own sequence space. A layer's frame
// is a keyframe only when the SFU asked for one with a PLI on that layer.
type simulcaster struct {
	*browser
	layers map[string]*webrtc.TrackLocalStaticRTP
	sender *webrtc.RTPSender
	keyReq map[string]*atomic.Bool
	plis   map[string]*atomic.Int64
}

func joinSimulcaster(t *testing.T, ctx context.Context, s *sfu, u user) *simulcaster {
	t.Helper()
	sc := &simulcaster{layers: map[string]*webrtc.TrackLocalStaticRTP{}, keyReq: map[string]*atomic.Bool{}, plis: map[string]*atomic.Int64{}}
	for _, rid := range simulcastRIDs {
		tr, err := webrtc.NewTrackLocalStaticRTP(webrtc.RTPCodecCapability{MimeType: webrtc.MimeTypeVP8, ClockRate: 90000}, "cam", "browser", webrtc.WithRTPStreamID(rid))
		if err != nil {
			t.Fatal(err)
		}
		sc.layers[rid] = tr
		sc.keyReq[rid] = &atomic.Bool{}
		sc.keyReq[rid].Store(true) // every layer starts with a keyframe
		sc.plis[rid] = &atomic.Int64{}
	}
	sc.browser = joinBrowserWith(t, ctx, s, u, browserOptions{listenSlots: 1,
		media: webrtc.ConfigureSimulcastExtensionHeaders,
		tracks: func(pc *webrtc.PeerConnection) {
			sender, err := pc.AddTrack(sc.layers[simulcastRIDs[0]])
			if err != nil {
				t.Fatal(err)
			}
			for _, rid := range simulcastRIDs[1:] {
				if err := sender.AddEncoding(sc.layers[rid]); err != nil {
					t.Fatal(err)
				}
			}
			sc.sender = sender
		}})
	for _, rid := range simulcastRIDs {
		go func() {
			for {
				pkts, _, err := sc.sender.ReadSimulcastRTCP(rid)
				if err != nil {
					return
				}
				for _, p := range pkts {
					if _, ok := p.(*rtcp.PictureLossIndication); ok {
						sc.plis[rid].Add(1)
						sc.keyReq[rid].Store(true)
					}
				}
			}
		}()
	}
	return sc
}

// run sends a frame on every layer every 10 ms until ctx ends.
func (sc *simulcaster) run(ctx context.Context, t *testing.T) {
	var mid string
	for _, tr := range sc.pc.GetTransceivers() {
		if tr.Sender() == sc.sender {
			mid = tr.Mid()
		}
	}
	var midID, ridID uint8
	for _, e := range sc.sender.GetParameters().HeaderExtensions {
		switch e.URI {
		case sdp.SDESMidURI:
			midID = uint8(e.ID)
		case sdp.SDESRTPStreamIDURI:
			ridID = uint8(e.ID)
		}
	}
	if mid == "" || midID == 0 || ridID == 0 {
		t.Errorf("simulcast publisher without mid %q or negotiated mid/rid extensions (%d, %d)", mid, midID, ridID)
		return
	}
	seq := map[string]uint16{"q": 100, "h": 20000, "f": 40000}
	ts := map[string]uint32{"q": 1_000_000, "h": 50_000_000, "f": 900_000_000}
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for n := 0; ; n++ {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		for _, rid := range simulcastRIDs {
			kind := byte(0x01) // VP8 payload header with P = 1: an interframe
			if sc.keyReq[rid].Swap(false) {
				kind = 0x00
			}
			payload := append([]byte{0x10, kind, rid[0]}, fmt.Sprintf("%08d", n)...)
			payload = append(payload, make([]byte, simulcastSizes[rid])...)
			p := &rtp.Packet{Header: rtp.Header{Version: 2, PayloadType: 96, SequenceNumber: seq[rid], Timestamp: ts[rid], Marker: true}, Payload: payload}
			_ = p.Header.SetExtension(midID, []byte(mid))
			_ = p.Header.SetExtension(ridID, []byte(rid))
			seq[rid]++
			ts[rid] += 900
			if err := sc.layers[rid].WriteRTP(p); err != nil {
				return
			}
		}
	}
}

// viewerStream follows what one viewer receives on its video slot.
type viewerStream struct {
	t       *testing.T
	b       *browser
	name    string
	last    *rtp.Packet
	layer   byte
	run     int // consecutive packets of layer
	jumps   int // layer changes seen
	maxGap  uint16
	changed []string
}

// await reads until n consecutive packets of layer rid have arrived.
func (v *viewerStream) await(ctx context.Context, rid string, n int) {
	v.t.Helper()
	for v.layer != rid[0] || v.run < n {
		v.next(ctx, func() string { return fmt.Sprintf("%d consecutive %q packets", n, rid) })
	}
}

// next reads one packet, checking that the slot's sequence numbers and
// timestamps only move forward by small steps: one stream, spliced.
func (v *viewerStream) next(ctx context.Context, waiting func() string) {
	v.t.Helper()
	var p *rtp.Packet
	select {
	case p = <-v.b.videoRTP:
	case <-ctx.Done():
		v.t.Fatalf("%s: never got %s (on %q, %d in a row; layer changes %v)", v.name, waiting(), v.layer, v.run, v.changed)
	}
	if len(p.Payload) < 3 {
		v.t.Fatalf("%s: a %d-byte video payload", v.name, len(p.Payload))
	}
	if v.last != nil {
		if p.SSRC != v.last.SSRC {
			v.t.Fatalf("%s: SSRC changed from %d to %d", v.name, v.last.SSRC, p.SSRC)
		}
		gap := p.SequenceNumber - v.last.SequenceNumber
		// A layer's own numbering starts about 20,000 away from another's:
		// an unspliced switch jumps by that much. A loaded machine may lose
		// packets on loopback (a second of them is 100).
		if gap == 0 || gap > 1000 {
			v.t.Fatalf("%s: sequence %d after %d (layer %q after %q)", v.name, p.SequenceNumber, v.last.SequenceNumber, p.Payload[2], v.last.Payload[2])
		}
		if dt := p.Timestamp - v.last.Timestamp; dt == 0 || dt > 90000*10 {
			v.t.Fatalf("%s: timestamp %d after %d (layer %q after %q)", v.name, p.Timestamp, v.last.Timestamp, p.Payload[2], v.last.Payload[2])
		}
		v.maxGap = max(v.maxGap, gap)
	}
	if p.Payload[2] != v.layer {
		if v.last != nil {
			v.jumps++
			// A switch lands on a keyframe of the new layer (unless that
			// packet was lost on the way).
			if p.Payload[1]&0x01 != 0 && p.SequenceNumber == v.last.SequenceNumber+1 {
				v.t.Fatalf("%s: switched to layer %q on an interframe", v.name, p.Payload[2])
			}
		}
		v.changed = append(v.changed, fmt.Sprintf("%c@%d", p.Payload[2], p.SequenceNumber))
		v.layer, v.run = p.Payload[2], 0
	}
	v.run++
	v.last = p
}

// TestSimulcastLayerPerViewer: a publisher sends three simulcast layers;
// each viewer gets one video track carrying the layer chosen for it: the
// quality it asks for with op 15, or the top one; a viewer whose REMB
// estimate cannot carry its layer gets a lower one. A switch waits for a
// keyframe of the new layer (asked for with a PLI on that layer) and the
// viewer's sequence numbers and timestamps continue across it.
func TestSimulcastLayerPerViewer(t *testing.T) {
	s := startSFU(t, func(c *voice.Config) { c.WebRTC = &voice.WebRTCConfig{UDPAddr: "127.0.0.1:0"} })
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	pub := joinSimulcaster(t, ctx, s, s.newUser(channelID))
	low := joinBrowser(t, ctx, s, s.newUser(channelID), 1, true)
	top := joinBrowser(t, ctx, s, s.newUser(channelID), 1, true)
	// Discord's op 15 shape: quality 0-100 for "any" stream (or per SSRC).
	low.gw.SendOp(signaling.OpMediaSinkWants, map[string]any{"any": 20})
	sendCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); pub.run(sendCtx, t) }()
	defer func() { stop(); <-done }()

	lv := &viewerStream{t: t, b: low, name: "quality-20 viewer"}
	tv := &viewerStream{t: t, b: top, name: "default viewer"}
	lv.await(ctx, "q", 30)
	tv.await(ctx, "f", 30)

	// The low viewer asks for the best layer: it moves to f at an f
	// keyframe the server asked the publisher for.
	fPLIs := pub.plis["f"].Load()
	low.gw.SendOp(signaling.OpMediaSinkWants, map[string]any{"any": 100, fmt.Sprint(low.videoSSRC.Load()): 100})
	lv.await(ctx, "f", 30)
	if pub.plis["f"].Load() <= fPLIs {
		t.Fatal("the switch to f happened without a PLI on the publisher's f layer")
	}
	// The default viewer reports (REMB) room for 20 kbit/s: f (~850
	// kbit/s at 100 frames/s) and h (~270) do not fit, even if a starved
	// publisher sends a tenth of its frames, so it gets the lowest layer.
	// The estimate is sent again every 25 packets until the layer drops
	// (the layers' rates are measured over a second of traffic).
	for i := 0; tv.layer != 'q'; i++ {
		if i%25 == 0 {
			if err := top.pc.WriteRTCP([]rtcp.Packet{&rtcp.ReceiverEstimatedMaximumBitrate{SenderSSRC: 1, Bitrate: 20_000, SSRCs: []uint32{top.videoSSRC.Load()}}}); err != nil {
				t.Fatal(err)
			}
		}
		tv.next(ctx, func() string { return "layer q after a 20 kbit/s REMB" })
	}
	tv.await(ctx, "q", 30)
	if lv.jumps < 1 || tv.jumps < 1 {
		t.Fatalf("layer changes: %v and %v", lv.changed, tv.changed)
	}
	s.waitCounter("concord_voice_simulcast_layer_switches_total", nil, 2)
	t.Logf("layer changes: %s %v (max gap %d); %s %v (max gap %d)", lv.name, lv.changed, lv.maxGap, tv.name, tv.changed, tv.maxGap)
}
