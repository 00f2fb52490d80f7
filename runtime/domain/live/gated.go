package live

import "sync"

// Gated is a subscriber's deliver func that can be stopped: once Stop
// returned, the func is not called again. Relay adapters use it to keep
// the Relay contract for cancel when a reader goroutine already holds a
// message for the subscription (Stop waits out a delivery in progress).
type Gated struct {
	mu      sync.Mutex
	stopped bool
	deliver func([]byte)
}

// NewGated gates deliver.
func NewGated(deliver func([]byte)) *Gated { return &Gated{deliver: deliver} }

// Deliver calls the gated func unless Stop was called.
func (g *Gated) Deliver(msg []byte) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.stopped {
		g.deliver(msg)
	}
}

// Stop ends deliveries; it returns after a delivery in progress ends.
// It must not be called from the gated func itself.
func (g *Gated) Stop() {
	g.mu.Lock()
	g.stopped = true
	g.mu.Unlock()
}
