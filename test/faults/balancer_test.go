//go:build faults

package faults

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/concord-chat/concord/internal/topology"
)

// balancerWatch records the HAProxy servers' state changes with their
// last check while the faults act: when a backend had no server up, and
// why each went down (a check timing out, a wrong status, a refused
// connection).
type balancerWatch struct {
	mu      sync.Mutex
	changes []string
	// empty is the time each backend spent with no server UP.
	empty map[string]time.Duration
}

// watchBalancer polls HAProxy's stats every 100 ms until ctx ends.
func watchBalancer(ctx context.Context, admin topology.Admin) *balancerWatch {
	w := &balancerWatch{empty: map[string]time.Duration{}}
	go func() {
		last := map[string]topology.Check{}
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		prev := time.Now()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			now := time.Now()
			checks, err := admin.Checks()
			if err != nil {
				prev = now
				continue
			}
			up := map[string]bool{}
			backends := map[string]bool{}
			w.mu.Lock()
			for name, c := range checks {
				be := strings.SplitN(name, "/", 2)[0]
				backends[be] = true
				if strings.HasPrefix(c.Status, "UP") {
					up[be] = true
				}
				if l, ok := last[name]; ok && l.Status != c.Status {
					w.changes = append(w.changes, fmt.Sprintf("%s %s: %s → %s (last check %s in %v)",
						now.Format("15:04:05.0"), name, l.Status, c.Status, c.Last, c.Took))
				}
				last[name] = c
			}
			for be := range backends {
				if !up[be] {
					w.empty[be] += now.Sub(prev)
				}
			}
			w.mu.Unlock()
			prev = now
		}
	}()
	return w
}

// String lists the changes and the time each backend had no server up.
func (w *balancerWatch) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var sb strings.Builder
	var bes []string
	for be := range w.empty {
		bes = append(bes, be)
	}
	sort.Strings(bes)
	for _, be := range bes {
		fmt.Fprintf(&sb, "backend %s had no server up for %v\n", be, w.empty[be].Round(100*time.Millisecond))
	}
	if len(bes) == 0 {
		sb.WriteString("no backend was ever without a server up\n")
	}
	for _, c := range w.changes {
		sb.WriteString(c + "\n")
	}
	return sb.String()
}
