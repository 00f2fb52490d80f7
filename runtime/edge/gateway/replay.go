package gateway

import (
	"unsafe"

	"github.com/prometheus/client_golang/prometheus"
)

// body is what a frame carries, shared by every session a batch reaches:
// a dispatch's event name and pre-serialised `d`, or a complete gateway
// frame in raw, or a WebSocket control frame (close, pong) with wsop set.
type body struct {
	t    string
	d    []byte
	raw  []byte
	wsop byte
	// sent is when the message a MESSAGE_CREATE carries was created (Unix
	// milliseconds, from its snowflake id), 0 for every other body: the
	// writer observes send-to-socket latency from it (deliveryage.go).
	sent int64
	// out counts the bytes written for a dispatch's event name (nil for
	// control frames), resolved once per batch rather than per session.
	out prometheus.Counter
}

// frame is one outbound payload for one session: its sequence number (for
// dispatches) and the shared body. It is kept small because every
// session's replay buffer holds thousands.
type frame struct {
	seq int64
	// at is when the frame was stamped (Unix nanoseconds), for replay ages.
	at int64
	b  *body
	// size is what the frame costs a replay buffer: its encoded length
	// plus frameOverhead.
	size int
}

// frameOverhead is the bookkeeping a buffered frame costs beyond its bytes,
// counted so that Config.ReplayMaxBytes bounds memory, not just payload.
const frameOverhead = int(unsafe.Sizeof(frame{}))

// replayBuffer holds a session's most recent dispatches for RESUME,
// bounded by frames, bytes and age. It is not safe for concurrent use; the
// session's lock guards it.
type replayBuffer struct {
	frames []frame
	head   int
	bytes  int
	// headAt is frames[head].at, kept here so that a push that drops
	// nothing does not read the oldest frame (another cache line per
	// delivery) to learn it is young enough.
	headAt int64
}

// replayLimits are the bounds trim enforces.
type replayLimits struct {
	maxEvents int
	maxBytes  int
	maxAge    int64 // nanoseconds
}

// len returns the number of frames held.
func (r *replayBuffer) len() int { return len(r.frames) - r.head }

// push appends f and drops the oldest frames past the limits. It returns
// the change in held bytes.
func (r *replayBuffer) push(f frame, lim replayLimits, now int64) int {
	before := r.bytes
	if r.len() == 0 {
		r.headAt = f.at
	}
	r.frames = append(r.frames, f)
	r.bytes += f.size
	r.trim(lim, now)
	return r.bytes - before
}

// trim drops frames from the front while any limit is exceeded. It returns
// the change in held bytes (zero or negative).
func (r *replayBuffer) trim(lim replayLimits, now int64) int {
	before := r.bytes
	for r.len() > 0 {
		if r.len() <= lim.maxEvents && r.bytes <= lim.maxBytes && now-r.headAt <= lim.maxAge {
			break
		}
		f := &r.frames[r.head]
		r.bytes -= f.size
		*f = frame{}
		r.head++
		if r.len() > 0 {
			r.headAt = r.frames[r.head].at
		}
	}
	// Compact once the dead prefix is at least half the slice.
	if r.head > 0 && r.head*2 >= len(r.frames) {
		n := copy(r.frames, r.frames[r.head:])
		clear(r.frames[n:])
		r.frames = r.frames[:n]
		r.head = 0
	}
	return r.bytes - before
}

// since returns the frames with seq > after, in order, and whether the
// buffer still holds every one of them (lastSeq is the session's latest
// stamped sequence).
func (r *replayBuffer) since(after, lastSeq int64) ([]frame, bool) {
	if after >= lastSeq {
		return nil, true
	}
	if r.len() == 0 {
		return nil, false
	}
	held := r.frames[r.head:]
	if held[0].seq > after+1 {
		return nil, false
	}
	i := 0
	for i < len(held) && held[i].seq <= after {
		i++
	}
	out := make([]frame, len(held)-i)
	copy(out, held[i:])
	return out, true
}

// reset drops every frame and returns the change in held bytes.
func (r *replayBuffer) reset() int {
	b := r.bytes
	*r = replayBuffer{}
	return -b
}
