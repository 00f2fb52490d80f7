// Package fleet is the voice fleet as the guild tier sees it: which SFUs
// are alive, in which region, under how much load. It implements the
// guild's VoiceAllocator twice: Local over the servers of this process
// (`concord dev`), Registry over the load every SFU of a `concord serve`
// cluster reports to the registry every couple of seconds (Reporter).
package fleet

import (
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/concord-chat/concord/runtime/domain/guild"
	"github.com/concord-chat/concord/runtime/domain/voice"
)

// ErrNoServer means no healthy voice server is known.
var ErrNoServer = errors.New("fleet: no healthy voice server")

// pick returns the least-loaded healthy load of region (any region when
// none there), ties broken by server id so placement is deterministic.
// Servers whose recent quality is poor are passed over while any other
// takes calls (quality.go).
func pick(loads []voice.Load, region string, poor func(server string) bool) (voice.Load, error) {
	live := loads[:0:0]
	for _, l := range loads {
		if !l.Draining {
			live = append(live, l)
		}
	}
	if len(live) == 0 {
		return voice.Load{}, ErrNoServer
	}
	ok := live[:0:0]
	for _, l := range live {
		if poor == nil || !poor(l.Server) {
			ok = append(ok, l)
		}
	}
	if len(ok) == 0 {
		ok = live
	}
	in := ok[:0:0]
	for _, l := range ok {
		if region == "" || l.Region == region {
			in = append(in, l)
		}
	}
	if len(in) == 0 {
		in = ok
	}
	return slices.MinFunc(in, func(a, b voice.Load) int {
		if a.Participants != b.Participants {
			return a.Participants - b.Participants
		}
		if a.Calls != b.Calls {
			return a.Calls - b.Calls
		}
		return strings.Compare(a.Server, b.Server)
	}), nil
}

func server(l voice.Load) guild.VoiceServer {
	return guild.VoiceServer{ID: l.Server, Endpoint: l.Endpoint, Region: l.Region}
}

// regions lists the distinct regions of the healthy loads.
func regions(loads []voice.Load) []guild.VoiceRegion {
	seen := map[string]bool{}
	var out []guild.VoiceRegion
	for _, l := range loads {
		if l.Draining || seen[l.Region] {
			continue
		}
		seen[l.Region] = true
		out = append(out, guild.VoiceRegion{ID: l.Region, Name: l.Region})
	}
	slices.SortFunc(out, func(a, b guild.VoiceRegion) int { return strings.Compare(a.ID, b.ID) })
	return out
}

// fresh reports whether a load report is recent enough to trust.
func fresh(l voice.Load, now time.Time, ttl time.Duration) bool {
	return now.Sub(l.At) <= ttl
}

// nodeRegion is the region of the healthy servers that report from node
// (the voice server runs in the process of that gateway node), "" when
// none does; with servers of several regions on one node the first by
// region id wins, so the answer is stable.
func nodeRegion(loads []voice.Load, node string) string {
	best := ""
	for _, l := range loads {
		n := l.Node
		if n == "" {
			n = l.Server
		}
		if l.Draining || n != node || l.Region == "" {
			continue
		}
		if best == "" || l.Region < best {
			best = l.Region
		}
	}
	return best
}
