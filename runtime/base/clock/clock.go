// Package clock is Concord's wall clock for what several processes
// compare: snowflake ids (their order is the order of messages in a
// channel), write timestamps the store resolves by last-write-wins,
// token and lease expiry. Now is time.Now plus a process-wide offset
// that is zero unless fault testing moves it (Follow, enabled only by
// `concord serve --fault-clock-file`): libfaketime cannot skew a Go
// binary, which reads the clock through the vDSO, so the fault suite
// (test/faults) skews a Concord node's clock through this seam instead.
//
// Durations measured inside one process (timeouts, metrics, logs) keep
// using time.Now and time.Since: a skew of the wall clock leaves them
// alone, as a real NTP step leaves the monotonic clock alone.
package clock

import (
	"sync/atomic"
	"time"
)

// offset is added to time.Now by Now, in nanoseconds.
var offset atomic.Int64

// Now returns the wall clock: time.Now moved by Offset. The monotonic
// reading moves with it, so comparisons of two Now values stay right
// across a change of the offset only as far as the offset is constant.
func Now() time.Time {
	if d := offset.Load(); d != 0 {
		return time.Now().Add(time.Duration(d))
	}
	return time.Now()
}

// Offset is how far Now is from time.Now (zero outside fault tests).
func Offset() time.Duration { return time.Duration(offset.Load()) }

// SetOffset moves Now by d from time.Now and returns the offset before.
// It is for fault tests and Follow; production code never calls it.
func SetOffset(d time.Duration) time.Duration {
	return time.Duration(offset.Swap(int64(d)))
}
