package lifecycle

import (
	"context"
	"time"
)

// Every calls f every interval, the first time one interval from now,
// until ctx ends: the loop of a part that does its work periodically.
func Every(ctx context.Context, interval time.Duration, f func(context.Context)) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			f(ctx)
		}
	}
}
