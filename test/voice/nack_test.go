package voice

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/pion/rtcp"
	"github.com/pion/rtp"

	"github.com/concord-chat/concord/runtime/domain/voice"
)

// TestBrowserVideoNACKRetransmission: a viewer that treats a video packet
// as lost and NACKs it gets the same packet again from the SFU (same
// sequence number, timestamp, SSRC, payload type and payload), and the
// retransmission is counted.
func TestBrowserVideoNACKRetransmission(t *testing.T) {
	s := startSFU(t, func(c *voice.Config) { c.WebRTC = &voice.WebRTCConfig{UDPAddr: "127.0.0.1:0"} })
	ctx := ctxT(t)
	a := joinBrowser(t, ctx, s, s.newUser(channelID), 1, true)
	// The viewer ignores the first copy of the packet it pretends to have
	// lost, so its SRTP replay check must let the second copy through (a
	// packet really lost never reached it).
	b := joinBrowserWith(t, ctx, s, s.newUser(channelID), browserOptions{listenSlots: 1, camera: true, acceptReplays: true})

	seq := uint16(1000)
	frame := func(i int) []byte {
		return append([]byte{0x10, 0x01}, []byte(fmt.Sprintf("frame-%04d-", i)+string(bytes.Repeat([]byte{byte(i)}, 80)))...)
	}
	write := func(p []byte) {
		t.Helper()
		if err := a.cam.WriteRTP(&rtp.Packet{Header: rtp.Header{Version: 2, PayloadType: 96, SequenceNumber: seq, Timestamp: uint32(seq) * 3000, Marker: true}, Payload: p}); err != nil {
			t.Fatal(err)
		}
		seq++
	}
	// Send frames until one reaches the viewer: that one is "lost".
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	var lost *rtp.Packet
	for i := 0; lost == nil; i++ {
		write(frame(i))
		select {
		case p := <-b.videoRTP:
			lost = p
		case <-tick.C:
		case <-ctx.Done():
			t.Fatal("no video packet ever reached the viewer")
		}
	}
	nackIt := func() {
		t.Helper()
		err := b.pc.WriteRTCP([]rtcp.Packet{&rtcp.TransportLayerNack{SenderSSRC: 1, MediaSSRC: b.videoSSRC.Load(),
			Nacks: []rtcp.NackPair{{PacketID: lost.SequenceNumber}}}})
		if err != nil {
			t.Fatal(err)
		}
	}
	nackIt()
	// The NACK itself may be lost on a loaded loopback: repeat it until
	// the packet comes back (the responder resends at most once per RTT).
	retry := time.NewTicker(500 * time.Millisecond)
	defer retry.Stop()
	for {
		select {
		case p := <-b.videoRTP:
			if p.SequenceNumber != lost.SequenceNumber {
				continue
			}
			if p.Timestamp != lost.Timestamp || p.SSRC != lost.SSRC || p.PayloadType != lost.PayloadType || p.Marker != lost.Marker || !bytes.Equal(p.Payload, lost.Payload) {
				t.Fatalf("retransmission of %d differs: got ts %d ssrc %d pt %d payload %q, sent ts %d ssrc %d pt %d payload %q",
					lost.SequenceNumber, p.Timestamp, p.SSRC, p.PayloadType, p.Payload, lost.Timestamp, lost.SSRC, lost.PayloadType, lost.Payload)
			}
			s.waitCounter("concord_voice_rtp_retransmitted_packets_total", nil, 1)
			return
		case <-retry.C:
			nackIt()
		case <-ctx.Done():
			t.Fatalf("packet %d NACKed but never sent again", lost.SequenceNumber)
		}
	}
}
