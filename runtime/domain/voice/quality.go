package voice

import "time"

// streamQuality tracks one incoming stream's loss and interarrival jitter
// the way an RTCP receiver report would (RFC 3550 §6.4.1 and A.8), at the
// Opus clock of 48 kHz.
type streamQuality struct {
	started  bool
	maxSeq   uint16
	cycles   uint32
	baseSeq  uint32
	received uint64
	// transit and jitter are in RTP clock units.
	transit int64
	jitter  float64

	// Snapshot at the last report, for per-period loss.
	lastExpected uint64
	lastReceived uint64
}

const opusClock = 48000

// update records one packet with RTP sequence seq and timestamp ts that
// arrived at now; it returns how many packets the jump over seq skipped.
func (q *streamQuality) update(seq uint16, ts uint32, now time.Time) (gap int) {
	arrival := now.UnixNano() * opusClock / int64(time.Second)
	transit := arrival - int64(ts)
	if !q.started {
		q.started, q.maxSeq, q.baseSeq, q.transit = true, seq, uint32(seq), transit
		q.received = 1
		return 0
	}
	q.received++
	d := seq - q.maxSeq
	if d > 0 && d < 1<<15 {
		if seq < q.maxSeq {
			q.cycles += 1 << 16
		}
		gap = int(d) - 1
		q.maxSeq = seq
	}
	dt := transit - q.transit
	if dt < 0 {
		dt = -dt
	}
	q.transit = transit
	q.jitter += (float64(dt) - q.jitter) / 16
	return gap
}

// period returns the packets expected and lost since the last committed
// call and the current jitter; commit starts a new period (the load
// report's), a look between reports does not.
func (q *streamQuality) period(commit bool) (expected, lost uint64, jitter time.Duration) {
	if !q.started {
		return 0, 0, 0
	}
	ext := uint64(q.cycles) + uint64(q.maxSeq)
	total := ext - uint64(q.baseSeq) + 1
	expected = total - q.lastExpected
	got := q.received - q.lastReceived
	if commit {
		q.lastExpected, q.lastReceived = total, q.received
	}
	if got < expected {
		lost = expected - got
	}
	return expected, lost, time.Duration(q.jitter / opusClock * float64(time.Second))
}
