package voice

import (
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pion/rtp"
	"github.com/pion/webrtc/v4"

	"github.com/concord-chat/concord/runtime/domain/voice/signaling"
)

// Simulcast: a browser may publish its camera as several encodings of one
// track (RFC 8853), told apart by the rid header extension; pion's OnTrack
// fires once per rid. Each viewer still gets ONE video slot per publisher,
// and the server picks per viewer which layer feeds it: the quality the
// viewer asked for with op 15 (media sink wants), lowered while the
// viewer's REMB estimate cannot carry it. A change of layer waits for a
// keyframe on the new layer (the server sends the publisher a PLI for
// it) and is spliced so the viewer sees one stream: its sequence numbers
// continue by one, its timestamps by the wall-clock time since the last
// packet, on the slot's one SSRC.

// videoLayer is one incoming video stream of a publisher: its only one, or
// one simulcast encoding.
type videoLayer struct {
	rid    string
	rank   int
	stream *videoStream
	track  *webrtc.TrackRemote
	mime   string
	// rate is the layer's bit rate over the last measured second; bytes
	// and since are the current window, touched only by the reader.
	rate  atomic.Uint64
	bytes uint64
	since time.Time
}

// measure adds a packet to the layer's rate window.
func (l *videoLayer) measure(n int, now time.Time) {
	if l.since.IsZero() {
		l.since = now
	}
	l.bytes += uint64(n)
	if d := now.Sub(l.since); d >= time.Second {
		l.rate.Store(l.bytes * 8 * uint64(time.Second) / uint64(d))
		l.bytes, l.since = 0, now
	}
}

// ridRank orders simulcast layers from the lowest resolution up: the
// names browsers' and SFUs' clients use ("q", "h", "f"; "low", "mid",
// "high"; "0", "1", "2"). Other rids sort by name after these.
func ridRank(rid string) int {
	switch rid {
	case "q", "l", "low", "0":
		return 0
	case "h", "m", "mid", "1":
		return 1
	case "f", "high", "2", "":
		return 2
	}
	return 3
}

// videoStream is one video track of a publisher (its camera, its screen):
// the layers received for one m-line, lowest first, copy-on-write under
// the publisher's lmu. Each is forwarded to a viewer on its own slot.
type videoStream struct {
	layers atomic.Pointer[[]*videoLayer]
}

func (v *videoStream) snapshot() []*videoLayer {
	if l := v.layers.Load(); l != nil {
		return *l
	}
	return nil
}

// addLayer records an incoming video track of this (publishing) peer:
// a new stream for a new receiver (m-line), another layer of its stream
// for another rid on the same one.
func (p *rtcPeer) addLayer(track *webrtc.TrackRemote, recv *webrtc.RTPReceiver) *videoLayer {
	l := &videoLayer{rid: track.RID(), rank: ridRank(track.RID()), track: track, mime: track.Codec().MimeType}
	p.lmu.Lock()
	defer p.lmu.Unlock()
	st := p.streams[recv]
	if st == nil {
		st = &videoStream{}
		p.streams[recv] = st
	}
	l.stream = st
	old := st.snapshot()
	next := make([]*videoLayer, 0, len(old)+1)
	for _, o := range old {
		if o.rid != l.rid {
			next = append(next, o)
		}
	}
	next = append(next, l)
	sort.SliceStable(next, func(i, j int) bool {
		if next[i].rank != next[j].rank {
			return next[i].rank < next[j].rank
		}
		return next[i].rid < next[j].rid
	})
	st.layers.Store(&next)
	return l
}

// removeLayer drops a video track that ended.
func (p *rtcPeer) removeLayer(l *videoLayer) {
	p.lmu.Lock()
	defer p.lmu.Unlock()
	old := l.stream.snapshot()
	next := make([]*videoLayer, 0, len(old))
	for _, o := range old {
		if o != l {
			next = append(next, o)
		}
	}
	l.stream.layers.Store(&next)
}

// pickLayer chooses the layer for a viewer: quality q of 1–99 selects
// layer ⌊q·n/100⌋ of n (lowest first), 100 or no request the top one, 0
// none (the viewer paused the video); then, while a bandwidth budget is
// known, the highest layer at or below it whose rate fits.
func pickLayer(layers []*videoLayer, quality int, budget uint64) *videoLayer {
	if len(layers) == 0 || quality == 0 {
		return nil
	}
	i := len(layers) - 1
	if quality > 0 && quality < 100 {
		i = min(quality*len(layers)/100, len(layers)-1)
	}
	for budget > 0 && i > 0 && layers[i].rate.Load() > budget {
		i--
	}
	return layers[i]
}

// layerSelector is one video slot's view of its publisher's layers: which
// one it forwards, which it waits to switch to, and the offsets that
// splice them into one stream.
type layerSelector struct {
	mu      sync.Mutex
	cur     *videoLayer
	target  *videoLayer
	sent    bool
	lastSeq uint16
	lastTS  uint32
	lastAt  time.Time
	seqOff  uint16
	tsOff   uint32
	pliAt   time.Time
}

// admitted is what a selector decided for one packet.
type admitted struct {
	forward  bool
	seq      uint16
	ts       uint32
	pli      *videoLayer // ask the publisher for a keyframe on this layer
	switched bool        // the slot just changed layers
}

// pliInterval spaces repeated keyframe requests while a switch waits.
const pliInterval = 300 * time.Millisecond

// admit decides for a packet of layer l, want being the layer the viewer
// should see (nil: none).
func (s *layerSelector) admit(l, want *videoLayer, simulcast bool, pkt *rtp.Packet, now time.Time) admitted {
	s.mu.Lock()
	defer s.mu.Unlock()
	var r admitted
	if want == nil {
		s.cur, s.target = nil, nil
		return r
	}
	if s.cur != want {
		if s.target != want {
			s.target, s.pliAt = want, time.Time{} // a new target is asked for at once
		}
		// A plain (single-layer) stream starts at once, as it always
		// did; a decoder catches up at the keyframe its PLI asks for.
		start := !simulcast && s.cur == nil && !s.sent
		if l == want && (start || isKeyframe(l.mime, pkt.Payload)) {
			r.switched = s.cur != nil
			s.cur, s.target = want, nil
			if s.sent {
				s.seqOff = s.lastSeq + 1 - pkt.SequenceNumber
				gap := uint32(now.Sub(s.lastAt) * 90 / time.Millisecond) // 90 kHz video clock
				s.tsOff = s.lastTS + max(gap, 1) - pkt.Timestamp
			}
		} else {
			if now.Sub(s.pliAt) >= pliInterval {
				s.pliAt, r.pli = now, want
			}
			if s.cur == nil || l != s.cur {
				return r
			}
		}
	}
	if l != s.cur {
		return r
	}
	r.forward, r.seq, r.ts = true, pkt.SequenceNumber+s.seqOff, pkt.Timestamp+s.tsOff
	if d := r.seq - s.lastSeq; !s.sent || (d != 0 && d < 1<<15) {
		s.lastSeq, s.lastTS, s.lastAt = r.seq, r.ts, now
	}
	s.sent = true
	return r
}

// keyframeLayer is the layer a viewer's PLI should reach: the one being
// switched to, else the one forwarded.
func (s *layerSelector) keyframeLayer() *videoLayer {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.target != nil {
		return s.target
	}
	return s.cur
}

// reset forgets the publisher (it left the slot), keeping the sequence
// state so the slot's next publisher continues the same numbering.
func (s *layerSelector) reset() {
	s.mu.Lock()
	s.cur, s.target = nil, nil
	s.mu.Unlock()
}

// sinkWants is what a viewer asked for with op 15.
type sinkWants struct {
	mu   sync.Mutex
	any  int
	ssrc map[uint32]int
}

// set replaces the viewer's wants.
func (w *sinkWants) set(m signaling.MediaSinkWants) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.any, w.ssrc = m.Any, m.SSRCs
}

// quality is the quality wanted for a slot: by the slot's SSRC, then by
// the publisher's (the SSRC of its audio, as in voice Ready and op 5),
// then "any"; -1 when never asked.
func (w *sinkWants) quality(slot, publisher uint32) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	if q, ok := w.ssrc[slot]; ok {
		return q
	}
	if q, ok := w.ssrc[publisher]; ok {
		return q
	}
	return w.any
}
