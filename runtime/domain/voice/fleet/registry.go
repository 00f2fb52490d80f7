package fleet

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/concord-chat/concord/runtime/adapters/registry"
	"github.com/concord-chat/concord/runtime/domain/guild"
	"github.com/concord-chat/concord/runtime/domain/voice"
)

// Prefix is the registry key prefix of the voice servers' load reports:
// Prefix + server id.
const Prefix = "voice/load/"

// Reporter publishes a server's load to the registry (voice.LoadReporter).
// The key lives while the reporting process's lease does, and every
// report carries its time, so a reader trusts only recent reports: a
// server that dies drops out within a few periods even before its lease
// expires.
type Reporter struct {
	Registry registry.Registry
}

// ReportLoad implements voice.LoadReporter.
func (r Reporter) ReportLoad(ctx context.Context, l voice.Load) error {
	b, err := json.Marshal(l)
	if err != nil {
		return fmt.Errorf("fleet: encode load: %w", err)
	}
	if err := r.Registry.Put(ctx, Prefix+l.Server, b, registry.WhileAlive); err != nil {
		return fmt.Errorf("fleet: report load of %s: %w", l.Server, err)
	}
	return nil
}

// RegistryConfig configures a Registry fleet. Zero fields take the
// defaults stated.
type RegistryConfig struct {
	// Poll is how often the loads are read. Default 1 s.
	Poll time.Duration
	// TTL is how old a report may be before its server counts as dead.
	// Default 6 s: three of the servers' 2 s periods.
	TTL time.Duration
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// Now is the clock; default time.Now.
	Now func() time.Time
	// Dial opens the probe connection of Suspect; default a net.Dialer
	// with a 1 s timeout.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// Client posts the servers' commands (control.go); default one
	// whose requests time out after 2 s.
	Client *http.Client
}

// Registry is the voice fleet of a cluster, read from the load reports in
// the registry. Run keeps it current; Pick and Healthy answer from memory.
type Registry struct {
	reg registry.Registry
	cfg RegistryConfig

	mu    sync.Mutex
	loads map[string]voice.Load
	// dead holds when a probe of a suspected server failed; the server is
	// unhealthy until it reports again after that.
	dead map[string]time.Time
	// probing are the servers being probed now.
	probing map[string]bool
	// nodes are the voice nodes' HTTP addresses by node name.
	nodes map[string]string
	// key signs commands; queues hold them per server (control.go).
	key    ed25519.PrivateKey
	queues map[string]*commandQueue
	// quality is the servers' recent quality (quality.go).
	quality *qualities
	// loaded closes after the first Refresh, seen after the first
	// snapshot of the voice nodes: a roster asked for before waits.
	loaded, seen         chan struct{}
	loadedOnce, seenOnce sync.Once
}

var (
	_ guild.VoiceAllocator = (*Registry)(nil)
	_ guild.VoiceSuspector = (*Registry)(nil)
	_ guild.VoiceNearest   = (*Registry)(nil)
)

// NewRegistry returns a fleet following reg's load reports.
func NewRegistry(reg registry.Registry, cfg RegistryConfig) *Registry {
	if cfg.Poll <= 0 {
		cfg.Poll = time.Second
	}
	if cfg.TTL <= 0 {
		cfg.TTL = 6 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Dial == nil {
		d := &net.Dialer{Timeout: time.Second}
		cfg.Dial = d.DialContext
	}
	if cfg.Client == nil {
		cfg.Client = &http.Client{Timeout: 2 * time.Second}
	}
	return &Registry{reg: reg, cfg: cfg, loads: map[string]voice.Load{}, dead: map[string]time.Time{}, probing: map[string]bool{},
		nodes: map[string]string{}, queues: map[string]*commandQueue{}, quality: newQualities(),
		loaded: make(chan struct{}), seen: make(chan struct{})}
}

// Refresh reads the reports once.
func (r *Registry) Refresh(ctx context.Context) error {
	kv, err := r.reg.List(ctx, Prefix)
	if err != nil {
		return fmt.Errorf("fleet: list loads: %w", err)
	}
	loads := make(map[string]voice.Load, len(kv))
	for k, v := range kv {
		var l voice.Load
		if err := json.Unmarshal(v, &l); err != nil || l.Server != strings.TrimPrefix(k, Prefix) {
			r.cfg.Logger.Warn("voice load report ignored", "key", k, "err", err)
			continue
		}
		loads[l.Server] = l
		r.quality.observe(l)
	}
	r.quality.forget(loads)
	r.mu.Lock()
	r.loads = loads
	r.mu.Unlock()
	r.loadedOnce.Do(func() { close(r.loaded) })
	return nil
}

// Run refreshes every Poll, and follows the voice nodes' addresses, until
// ctx ends.
func (r *Registry) Run(ctx context.Context) error {
	watched := make(chan struct{})
	defer func() { <-watched }()
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	go func() { defer close(watched); r.watchNodes(wctx) }()
	t := time.NewTicker(r.cfg.Poll)
	defer t.Stop()
	for {
		if err := r.Refresh(ctx); err != nil && ctx.Err() == nil {
			r.cfg.Logger.Warn("voice fleet refresh failed", "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// live returns the recent reports.
func (r *Registry) live() []voice.Load {
	now := r.cfg.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]voice.Load, 0, len(r.loads))
	for _, l := range r.loads {
		if d, ok := r.dead[l.Server]; ok && !l.At.After(d) {
			continue
		}
		if fresh(l, now, r.cfg.TTL) {
			out = append(out, l)
		}
	}
	return out
}

// Suspect implements guild.VoiceSuspector: it opens a TCP connection to
// the server's voice gateway in the background. A server whose process
// died refuses it at once (its host answers with a reset), so the call
// moves in well under the report TTL; a server that accepts stays
// healthy. A server that fails the probe is healthy again once it
// reports after the failure.
func (r *Registry) Suspect(id string) {
	r.mu.Lock()
	l, ok := r.loads[id]
	if !ok || r.probing[id] {
		r.mu.Unlock()
		return
	}
	r.probing[id] = true
	r.mu.Unlock()
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		c, err := r.cfg.Dial(ctx, "tcp", l.Endpoint)
		r.mu.Lock()
		defer r.mu.Unlock()
		delete(r.probing, id)
		if err == nil {
			c.Close()
			return
		}
		r.dead[id] = r.cfg.Now()
		r.cfg.Logger.Warn("voice server failed its probe; calls move off it", "server", id, "endpoint", l.Endpoint, "err", err)
	}()
}

// Pick implements guild.VoiceAllocator. When the loads in memory name no
// healthy server it reads the registry once more before refusing: a voice
// server that came up since the last poll (a cluster just started, an SFU
// just scaled up) takes the call instead of the join failing for up to one
// Poll.
func (r *Registry) Pick(ctx context.Context, region string) (guild.VoiceServer, error) {
	l, err := pick(r.live(), region, r.quality.poor)
	if errors.Is(err, ErrNoServer) {
		if rerr := r.Refresh(ctx); rerr != nil {
			return guild.VoiceServer{}, fmt.Errorf("%w (and %w)", err, rerr)
		}
		l, err = pick(r.live(), region, r.quality.poor)
	}
	if err != nil {
		return guild.VoiceServer{}, err
	}
	return server(l), nil
}

// Healthy implements guild.VoiceAllocator.
func (r *Registry) Healthy(id string) bool {
	for _, l := range r.live() {
		if l.Server == id {
			return !l.Draining
		}
	}
	return false
}

// Regions implements guild.VoiceAllocator.
func (r *Registry) Regions() []guild.VoiceRegion { return regions(r.live()) }

// NodeRegion implements guild.VoiceNearest.
func (r *Registry) NodeRegion(node string) string { return nodeRegion(r.live(), node) }
