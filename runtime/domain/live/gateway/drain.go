package gateway

import (
	"context"
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"time"
)

// A gateway that stops (a scale-down, a rolling update) holds viewers that
// all need another gateway. Closed at once they would reconnect at once,
// each EventSource after its reconnection time (a few seconds in
// browsers, the same for all), and the stream's other gateways would take
// the whole audience in one burst: every join is an authentication, a
// ring replay and, on a gateway new to the stream, a subscription. Drain
// spreads that burst instead: each viewer is sent a `retry:` field with a
// reconnection time drawn at random from [minDrainRetry, DrainSpread], and
// its connection is closed once what was queued for it is written. Its
// client comes back after that time with Last-Event-ID, through the edge,
// which no longer places viewers here (the node left the registry first),
// and resumes from the new gateway's ring without a loss or a duplicate.
// The reconnection time stays the client's until another `retry:` (at
// most DrainSpread, the order of a browser's own default).

// minDrainRetry is the shortest reconnection time Drain gives a viewer.
const minDrainRetry = 250 * time.Millisecond

// Drain stops taking viewers (503 with Retry-After) and sends every viewer
// away with a jittered reconnection time, then waits until every
// connection closed or ctx ends. It returns the viewers sent away.
func (g *Gateway) Drain(ctx context.Context) int {
	g.mu.Lock()
	if g.draining.Load() {
		g.mu.Unlock()
		return 0
	}
	g.draining.Store(true)
	g.gone = make(chan struct{})
	if g.viewers == 0 {
		close(g.gone)
	}
	gone := g.gone
	hubs := slices.Collect(maps.Values(g.hubs))
	g.mu.Unlock()
	sent := 0
	for _, h := range hubs {
		h.mu.Lock()
		vs := slices.Collect(maps.Keys(h.viewers))
		h.mu.Unlock()
		for _, v := range vs {
			if g.sendAway(v) {
				sent++
			}
		}
	}
	g.log.Info("draining: viewers sent to reconnect elsewhere", "viewers", sent, "spread", g.cfg.DrainSpread)
	g.m.drained.Add(float64(sent))
	select {
	case <-gone:
	case <-ctx.Done():
		g.log.Warn("drain ended before every viewer left", "left", g.Viewers(), "err", ctx.Err())
	}
	return sent
}

// Draining reports whether Drain was called (an atomic read: every
// viewer's join asks it).
func (g *Gateway) Draining() bool { return g.draining.Load() }

// sendAway queues v's farewell: a reconnection time drawn from
// [minDrainRetry, DrainSpread]; v's connection closes once it is written.
// It reports false when v was already cut or sent away.
func (g *Gateway) sendAway(v *viewer) bool {
	span := max(g.cfg.DrainSpread-minDrainRetry, 0)
	retry := minDrainRetry + time.Duration(rand.Int64N(int64(span)+1))
	return v.farewell([]byte("retry: " + strconv.FormatInt(retry.Milliseconds(), 10) + "\n\n"))
}

// joinedWhileDraining sends v away when the gateway drains: a viewer that
// joined its hub after Drain looked at it.
func (g *Gateway) joinedWhileDraining(v *viewer) {
	if g.Draining() {
		g.sendAway(v)
	}
}

// farewell queues frame as v's last and marks v leaving: nothing more is
// queued for it, and its writer closes the connection once the queue is
// written. false: v was already cut or leaving.
func (v *viewer) farewell(frame []byte) bool {
	v.mu.Lock()
	if v.isCut || v.leaving {
		v.mu.Unlock()
		return false
	}
	if len(v.buf) == 0 {
		v.queued = time.Now()
	}
	v.buf = append(v.buf, frame...)
	v.leaving = true
	v.mu.Unlock()
	v.signal()
	return true
}

// sentAway reports whether v was sent away and everything queued for it,
// its farewell last, was taken to be written.
func (v *viewer) sentAway() bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.leaving && len(v.buf) == 0
}
