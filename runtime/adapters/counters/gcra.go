package counters

import (
	"fmt"
	"time"
)

// GCRA is one step of the bucket arithmetic every adapter implements (the
// Redis adapter repeats it in Lua, operation for operation). All values are
// whole microseconds. tat is the bucket's stored theoretical arrival time
// (zero for a missing bucket), now the caller's clock, limit and window the
// bucket's shape. It returns the decision and, when allowed, the new tat to
// store; the stored bucket may expire newTAT-now after now.
func GCRA(tat, now int64, limit int, window int64) (d Decision, newTAT int64) {
	interval := max(window/int64(limit), 1)
	tat = max(tat, now)
	next := tat + interval
	d.Limit = limit
	if next-now > window {
		d.ResetAfter = micros(tat - now)
		d.RetryAfter = micros(next - now - window)
		return d, tat
	}
	d.Allowed = true
	d.Remaining = int((window - (next - now)) / interval)
	d.ResetAfter = micros(next - now)
	if d.Remaining == 0 {
		d.RetryAfter = micros(next + interval - now - window)
	}
	return d, next
}

func micros(us int64) time.Duration { return time.Duration(us) * time.Microsecond }

// CheckKey validates a key for any call of the port.
func CheckKey(key string) error {
	if key == "" {
		return fmt.Errorf("%w: empty key", ErrInvalid)
	}
	return nil
}

// CheckTTL validates the ttl of Incr and Ban: at least a millisecond, the
// resolution of Redis expiry.
func CheckTTL(key string, ttl time.Duration) error {
	if ttl < time.Millisecond {
		return fmt.Errorf("%w: key %q: ttl %v below 1ms", ErrInvalid, key, ttl)
	}
	return nil
}

// CheckBucket validates the shape of a Take bucket: limit at least one and
// window at least a millisecond.
func CheckBucket(key string, limit int, window time.Duration) error {
	if limit < 1 || window < time.Millisecond {
		return fmt.Errorf("%w: key %q: bucket %d per %v", ErrInvalid, key, limit, window)
	}
	return nil
}
