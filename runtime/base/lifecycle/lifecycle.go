// Package lifecycle runs the parts of one Concord process as a group:
// each role contributes parts (a loop to run, a readiness check, a
// resource to close) in the order it builds them; Start runs them in that
// order, Stop ends them in the reverse order, and Ready reports the
// process ready only while every part is. A part that stops on its own
// with an error fails the group, which the process then shuts down.
package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// Part is one piece of a process.
type Part struct {
	// Name names the part in errors and readiness reports.
	Name string
	// Run, when set, runs until its context ends. Returning an error
	// before that fails the group; returning nil early is allowed (a
	// loop with nothing left to do).
	Run func(ctx context.Context) error
	// Ready, when set, reports why the part cannot serve yet (nil: it
	// can). A part without Ready is ready once started.
	Ready func() error
	// Close, when set, releases the part after its Run returned.
	Close func() error
	// Drain, when set, runs in a graceful shutdown before the servers
	// stop: the part hands what it serves to the rest of the fleet (a
	// live gateway its viewers) and returns when it is done or ctx ends.
	Drain func(ctx context.Context)
}

// Group runs parts. The zero value is empty and ready to use.
type Group struct {
	mu      sync.Mutex
	parts   []*running
	started bool
	stopped bool
	failed  chan error
}

// running is a part with its goroutine's state.
type running struct {
	Part
	cancel context.CancelFunc
	done   chan struct{}
	on     bool
}

// Add appends a part; parts added after Start start at once. Add after
// Stop is an error.
func (g *Group) Add(p Part) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.stopped {
		return fmt.Errorf("lifecycle: add %s: group stopped", p.Name)
	}
	r := &running{Part: p}
	g.parts = append(g.parts, r)
	if g.started {
		g.startLocked(context.Background(), r)
	}
	return nil
}

// Start runs every part's Run in the order they were added. ctx bounds
// nothing but carries values; Stop ends the parts.
func (g *Group) Start(ctx context.Context) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.started || g.stopped {
		return
	}
	g.started = true
	for _, r := range g.parts {
		g.startLocked(ctx, r)
	}
}

func (g *Group) startLocked(ctx context.Context, r *running) {
	if g.failed == nil {
		g.failed = make(chan error, 1)
	}
	r.on = true
	r.done = make(chan struct{})
	if r.Run == nil {
		close(r.done)
		return
	}
	rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	r.cancel = cancel
	go func() {
		defer close(r.done)
		if err := r.Run(rctx); err != nil && rctx.Err() == nil {
			select {
			case g.failed <- fmt.Errorf("%s: %w", r.Name, err):
			default:
			}
		}
	}()
}

// Failed receives the first error a part's Run returned before Stop.
func (g *Group) Failed() <-chan error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.failed == nil {
		g.failed = make(chan error, 1)
	}
	return g.failed
}

// Ready reports nil when every started part is ready, else why not.
func (g *Group) Ready() error {
	g.mu.Lock()
	parts := append([]*running(nil), g.parts...)
	started, stopped := g.started, g.stopped
	g.mu.Unlock()
	if !started {
		return errors.New("not started")
	}
	if stopped {
		return errors.New("stopping")
	}
	var errs []error
	for _, r := range parts {
		if r.Ready == nil {
			continue
		}
		if err := r.Ready(); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", r.Name, err))
		}
	}
	return errors.Join(errs...)
}

// Drain runs every started part's Drain at once and returns when all
// returned (each is bounded by ctx).
func (g *Group) Drain(ctx context.Context) {
	g.mu.Lock()
	var drains []func(context.Context)
	for _, r := range g.parts {
		if r.on && r.Drain != nil {
			drains = append(drains, r.Drain)
		}
	}
	g.mu.Unlock()
	var wg sync.WaitGroup
	for _, d := range drains {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d(ctx)
		}()
	}
	wg.Wait()
}

// Stop ends the parts in reverse order: each Run's context is cancelled
// and awaited (at most until ctx ends), then its Close runs. It returns
// the Close errors and the parts that did not stop in time. Stop is
// idempotent; parts never started are only closed.
func (g *Group) Stop(ctx context.Context) error {
	g.mu.Lock()
	if g.stopped {
		g.mu.Unlock()
		return nil
	}
	g.stopped = true
	parts := append([]*running(nil), g.parts...)
	g.mu.Unlock()
	var errs []error
	for i := len(parts) - 1; i >= 0; i-- {
		r := parts[i]
		if r.on {
			if r.cancel != nil {
				r.cancel()
			}
			select {
			case <-r.done:
			case <-ctx.Done():
				errs = append(errs, fmt.Errorf("%s: did not stop: %w", r.Name, ctx.Err()))
				continue
			}
		}
		if r.Close != nil {
			if err := r.Close(); err != nil {
				errs = append(errs, fmt.Errorf("%s: close: %w", r.Name, err))
			}
		}
	}
	return errors.Join(errs...)
}
