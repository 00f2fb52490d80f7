package snowflake

import (
	"fmt"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/concord-chat/concord/runtime/base/clock"
)

// Layout of an id, least significant bit first.
const (
	SequenceBits = 12
	ProcessBits  = 5
	WorkerBits   = 5
	TimeBits     = 42

	MaxWorker   = 1<<WorkerBits - 1
	MaxProcess  = 1<<ProcessBits - 1
	MaxSequence = 1<<SequenceBits - 1

	processShift = SequenceBits
	workerShift  = SequenceBits + ProcessBits
	timeShift    = SequenceBits + ProcessBits + WorkerBits
	maxMillis    = 1<<TimeBits - 1
)

// DefaultMaxBackwardsWait is Config.MaxBackwardsWait when it is zero.
const DefaultMaxBackwardsWait = 2 * time.Second

// Config configures a Generator.
type Config struct {
	// Worker and Process place the generator in the id space; 0..31 each.
	// Two generators running at once must differ in at least one of them.
	Worker, Process int
	// MaxBackwardsWait is how far the clock may step back behind the last
	// id issued before Next refuses with ErrClockBackwards instead of
	// waiting for it to catch up. Default 2s; negative means never wait.
	MaxBackwardsWait time.Duration
	// Now reads the wall clock, for tests; every Next calls it. Default: the
	// wall clock read with time.Now at most every WallResync and advanced
	// by the monotonic clock in between, which costs half as much per id;
	// a step of the wall clock is seen within WallResync. The default is
	// moved by clock.Offset (runtime/base/clock), at once: the fault
	// suite skews a node's ids through that seam.
	Now func() time.Time
	// Sleep waits while the clock catches up. Default time.Sleep; for tests.
	Sleep func(time.Duration)
	// Registerer receives the concord_snowflake_clock_backwards_total
	// counter; nil registers nothing. Generators sharing a registerer share
	// the counter.
	Registerer prometheus.Registerer
}

// Generator mints ids. It is safe for concurrent use and never returns
// the same id twice, nor an id smaller than one it returned before: its
// whole state is the last id issued, advanced by compare-and-swap.
//
// When the clock steps back (NTP), Next waits for it to pass the last id's
// millisecond if that is at most MaxBackwardsWait away, and fails with
// ErrClockBackwards otherwise. When the 4096 ids of a millisecond are used
// up, Next waits for the next millisecond, so ids never run ahead of the
// clock: one generator mints at most 4,096,000 ids a second.
type Generator struct {
	last      atomic.Uint64 // last id issued; starts at node bits, time 0
	node      uint64
	maxWait   time.Duration
	now       func() time.Time // nil: clock
	clock     wallClock
	sleep     func(time.Duration)
	backwards prometheus.Counter
}

// New validates cfg, fills its defaults and returns a generator.
func New(cfg Config) (*Generator, error) {
	if cfg.Worker < 0 || cfg.Worker > MaxWorker {
		return nil, fmt.Errorf("%w: worker %d not in 0..%d", ErrConfig, cfg.Worker, MaxWorker)
	}
	if cfg.Process < 0 || cfg.Process > MaxProcess {
		return nil, fmt.Errorf("%w: process %d not in 0..%d", ErrConfig, cfg.Process, MaxProcess)
	}
	if cfg.MaxBackwardsWait == 0 {
		cfg.MaxBackwardsWait = DefaultMaxBackwardsWait
	}
	if cfg.Sleep == nil {
		cfg.Sleep = time.Sleep
	}
	counter := prometheus.NewCounter(prometheus.CounterOpts{
		Name: "concord_snowflake_clock_backwards_total",
		Help: "Times a snowflake generator saw the wall clock behind the last id it issued.",
	})
	if cfg.Registerer != nil {
		if err := cfg.Registerer.Register(counter); err != nil {
			are, ok := err.(prometheus.AlreadyRegisteredError)
			if !ok {
				return nil, fmt.Errorf("snowflake: register metrics: %w", err)
			}
			existing, ok := are.ExistingCollector.(prometheus.Counter)
			if !ok {
				return nil, fmt.Errorf("snowflake: register metrics: %w", err)
			}
			counter = existing
		}
	}
	g := &Generator{
		node:      uint64(cfg.Worker)<<workerShift | uint64(cfg.Process)<<processShift,
		maxWait:   cfg.MaxBackwardsWait,
		now:       cfg.Now,
		sleep:     cfg.Sleep,
		backwards: counter,
	}
	g.last.Store(g.node)
	g.clock.resync()
	return g, nil
}

// WallResync is how often the default clock reads the wall clock.
const WallResync = 100 * time.Millisecond

// wallClock is the wall clock advanced by the monotonic clock between
// reads of the wall clock: time.Since on a time with a monotonic reading
// reads one clock where time.Now reads two.
type wallClock struct{ anchor atomic.Pointer[wallAnchor] }

type wallAnchor struct {
	at     time.Time // carries the monotonic reading
	wallNs int64     // at's Unix wall time in ns
}

func (c *wallClock) resync() int64 {
	now := time.Now()
	a := &wallAnchor{at: now, wallNs: now.UnixNano()}
	c.anchor.Store(a)
	return a.wallNs
}

// unixMilli is the wall clock in Unix ms, moved by clock.Offset (zero
// outside fault tests).
func (c *wallClock) unixMilli() int64 {
	off := int64(clock.Offset())
	a := c.anchor.Load()
	elapsed := time.Since(a.at)
	if elapsed < 0 || elapsed >= WallResync {
		return (c.resync() + off) / 1e6
	}
	return (a.wallNs + int64(elapsed) + off) / 1e6
}

// Next returns a new id.
func (g *Generator) Next() (ID, error) {
	var (
		waited  time.Duration
		counted bool
	)
	for {
		last := g.last.Load()
		lastMs := int64(last >> timeShift)
		var ms int64
		if g.now != nil {
			ms = g.now().UnixMilli() - Epoch
		} else {
			ms = g.clock.unixMilli() - Epoch
		}
		if ms < 0 || ms > maxMillis {
			return 0, fmt.Errorf("%w: %d ms after the epoch", ErrTimeRange, ms)
		}
		var next uint64
		switch {
		case ms > lastMs:
			next = uint64(ms)<<timeShift | g.node
		case ms == lastMs:
			if last&MaxSequence == MaxSequence {
				// This millisecond is used up: wait for the next one.
				runtime.Gosched()
				continue
			}
			next = last + 1
		default:
			behind := time.Duration(lastMs-ms) * time.Millisecond
			if !counted {
				counted = true
				g.backwards.Inc()
			}
			if waited+behind > g.maxWait {
				return 0, fmt.Errorf("%w: %v behind the last id issued, more than the %v it may wait",
					ErrClockBackwards, behind, g.maxWait)
			}
			g.sleep(behind)
			waited += behind
			continue
		}
		if g.last.CompareAndSwap(last, next) {
			return ID(next), nil
		}
	}
}

// Worker returns the worker bits of the id.
func (id ID) Worker() int { return int(uint64(id) >> workerShift & MaxWorker) }

// Process returns the process bits of the id.
func (id ID) Process() int { return int(uint64(id) >> processShift & MaxProcess) }

// Sequence returns the per-millisecond sequence bits of the id.
func (id ID) Sequence() int { return int(uint64(id) & MaxSequence) }

// Compose builds an id from its parts; out-of-range parts are truncated to
// their bit widths and times before Epoch give time 0.
func Compose(t time.Time, worker, process, seq int) ID {
	return FromTime(t)&(maxMillis<<timeShift) |
		ID(uint64(worker)&MaxWorker)<<workerShift |
		ID(uint64(process)&MaxProcess)<<processShift |
		ID(uint64(seq)&MaxSequence)
}
