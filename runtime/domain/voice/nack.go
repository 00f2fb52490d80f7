package voice

import (
	"strings"
	"sync"

	"github.com/pion/interceptor"
	"github.com/pion/interceptor/pkg/nack"
	"github.com/pion/rtp"
	"github.com/pion/webrtc/v4"
	"github.com/prometheus/client_golang/prometheus"
)

// Retransmission: every video packet the SFU sends a browser is kept in a
// per-slot ring of the last nackBuffer packets (pion's NACK responder,
// keyed by sequence number), and a generic NACK from the browser is
// answered by sending the named packets again, byte-identical on the same
// SSRC. Audio is not buffered: Opus is negotiated without "nack" feedback
// (browsers do not offer it; a late voice packet is useless and Opus FEC
// covers loss), so the responder's stream filter skips audio slots.
const nackBuffer = 1024

// registerInterceptors builds the interceptor chain of the WebRTC API: a
// retransmission counter innermost, then pion's defaults (NACK generator
// and responder, RTCP reports, TWCC, stats) with the responder's buffer
// size set. The counter sits below the responder so it sees the resends
// the responder writes.
func registerInterceptors(me *webrtc.MediaEngine, ir *interceptor.Registry, resent prometheus.Counter) error {
	ir.Add(&resendCounterFactory{resent: resent})
	return webrtc.RegisterDefaultInterceptorsWithOptions(me, ir,
		webrtc.WithNackResponderOptions(nack.ResponderSize(nackBuffer)))
}

// resendCounterFactory makes a resendCounter per peer connection.
type resendCounterFactory struct{ resent prometheus.Counter }

// NewInterceptor implements interceptor.Factory.
func (f *resendCounterFactory) NewInterceptor(string) (interceptor.Interceptor, error) {
	return &resendCounter{resent: f.resent}, nil
}

// resendCounter counts packets written on a local stream whose sequence
// number is not newer than the highest already written: the NACK
// responder's retransmissions (the forwarder only moves forward).
type resendCounter struct {
	interceptor.NoOp
	resent prometheus.Counter
}

// BindLocalStream implements interceptor.Interceptor.
func (c *resendCounter) BindLocalStream(info *interceptor.StreamInfo, w interceptor.RTPWriter) interceptor.RTPWriter {
	if info.MimeType == "" || !isVideoMime(info.MimeType) {
		return w
	}
	var mu sync.Mutex
	var highest uint16
	started := false
	return interceptor.RTPWriterFunc(func(h *rtp.Header, payload []byte, a interceptor.Attributes) (int, error) {
		mu.Lock()
		switch d := h.SequenceNumber - highest; {
		case !started:
			started, highest = true, h.SequenceNumber
		case d != 0 && d < 1<<15:
			highest = h.SequenceNumber
		default:
			c.resent.Inc()
		}
		mu.Unlock()
		return w.Write(h, payload, a)
	})
}

func isVideoMime(m string) bool {
	return len(m) > 6 && strings.EqualFold(m[:6], "video/")
}
