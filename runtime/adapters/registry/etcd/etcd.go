// Package etcd implements registry.Registry over etcd: node entries and
// ephemeral keys bound to one lease per Registry kept alive in the
// background, pins and settings as plain keys, and Watch as a prefix
// watch that resumes from its last revision after a lost connection.
//
// StartEmbedded runs an etcd server in-process for `concord dev` and
// tests.
//
// Key layout under Config.Prefix: nodes/<name> (JSON registry.Node, on a
// lease), draining/<name> (on the node entry's lease), pins/<guild id>
// (node name) and kv/<key> (Put and Claim).
package etcd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/concord-chat/concord/runtime/adapters/registry"
	"github.com/concord-chat/concord/runtime/base/snowflake"
)

// Config configures a Registry. Zero fields take the stated defaults.
type Config struct {
	// Endpoints are etcd client URLs. Required.
	Endpoints []string
	// Prefix namespaces every key (default "/concord/").
	Prefix string
	// LeaseTTL is how long a dead process's entries outlive it (default
	// 5s; etcd rounds values below its minimum, about 2s, up).
	LeaseTTL time.Duration
	// DialTimeout bounds the initial connection (default 5s).
	DialTimeout time.Duration
	// RequestTimeout bounds each background request (default 5s).
	RequestTimeout time.Duration
	// Logger receives the registry's log lines (default: discard).
	Logger *slog.Logger
}

// Registry is the etcd-backed registry.Registry.
type Registry struct {
	cfg    Config
	cli    *clientv3.Client
	log    *slog.Logger
	ctx    context.Context // canceled by Close
	cancel context.CancelFunc
	wg     sync.WaitGroup

	// mu guards the lease and the keys written on it, and is held while
	// the keep-alive loop replaces a lost lease, so no write uses a dead one.
	mu    sync.Mutex
	lease clientv3.LeaseID
	owned map[string]string // full key → value, re-put on a new lease
	// claims are keys held with Claim: re-put on a new lease only if no
	// one took them meanwhile.
	claims map[string]*claim
	// granted are the leases this process granted that may still exist:
	// the current one, and any a failed renewal could not revoke. A
	// renewal whose request timed out on the client may still have been
	// applied by etcd, leaving a claim on one of them: the claim is still
	// this process's, not lost to another.
	granted map[clientv3.LeaseID]bool
	closed  bool
	// leaseSet is closed (and replaced) each time lease changes: a write
	// that found its lease gone waits on it for the next one.
	leaseSet chan struct{}
}

// claim is one key held with Claim.
type claim struct {
	value string
	lost  chan struct{}
}

var (
	_ registry.Registry = (*Registry)(nil)
	_ registry.Claimer  = (*Registry)(nil)
)

// New validates cfg, fills defaults and connects to etcd.
func New(cfg Config) (*Registry, error) {
	if len(cfg.Endpoints) == 0 {
		return nil, fmt.Errorf("%w: etcd: no endpoints", registry.ErrInvalid)
	}
	if cfg.Prefix == "" {
		cfg.Prefix = "/concord/"
	}
	if !strings.HasSuffix(cfg.Prefix, "/") {
		cfg.Prefix += "/"
	}
	if cfg.LeaseTTL <= 0 {
		cfg.LeaseTTL = 5 * time.Second
	}
	if cfg.DialTimeout <= 0 {
		cfg.DialTimeout = 5 * time.Second
	}
	if cfg.RequestTimeout <= 0 {
		cfg.RequestTimeout = 5 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:            cfg.Endpoints,
		DialTimeout:          cfg.DialTimeout,
		DialKeepAliveTime:    2 * time.Second,
		DialKeepAliveTimeout: 2 * time.Second,
		Logger:               zap.NewNop(),
	})
	if err != nil {
		return nil, fmt.Errorf("registry: etcd connect: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Registry{
		cfg:      cfg,
		cli:      cli,
		log:      cfg.Logger,
		ctx:      ctx,
		cancel:   cancel,
		owned:    make(map[string]string),
		claims:   make(map[string]*claim),
		granted:  make(map[clientv3.LeaseID]bool),
		leaseSet: make(chan struct{}),
	}, nil
}

func (r *Registry) nodeKey(name string) string  { return r.cfg.Prefix + "nodes/" + name }
func (r *Registry) drainKey(name string) string { return r.cfg.Prefix + "draining/" + name }
func (r *Registry) pinKey(id snowflake.ID) string {
	return r.cfg.Prefix + "pins/" + strconv.FormatUint(uint64(id), 10)
}
func (r *Registry) kvKey(key string) string { return r.cfg.Prefix + "kv/" + key }

func validName(s string) bool { return s != "" && !strings.ContainsAny(s, "/\x00") }

// ensureLease grants the Registry's lease and starts keeping it alive if
// that has not happened yet. r.mu must be held.
func (r *Registry) ensureLease(ctx context.Context) error {
	if r.closed {
		return registry.ErrClosed
	}
	if r.lease != clientv3.NoLease {
		return nil
	}
	ttl := int64((r.cfg.LeaseTTL + time.Second - 1) / time.Second)
	g, err := r.cli.Grant(ctx, ttl)
	if err != nil {
		return fmt.Errorf("registry: etcd grant lease: %w", err)
	}
	r.granted[g.ID] = true
	ka, err := r.cli.KeepAlive(r.ctx, g.ID)
	if err != nil {
		return fmt.Errorf("registry: etcd keep-alive: %w", err)
	}
	r.setLease(g.ID)
	r.wg.Add(1)
	go r.keepAlive(g.ID, ka)
	return nil
}

// setLease makes id the lease new writes use and wakes the writes waiting
// for one (withLease). r.mu is held.
func (r *Registry) setLease(id clientv3.LeaseID) {
	r.lease = id
	close(r.leaseSet)
	r.leaseSet = make(chan struct{})
}

// withLease runs write with r.mu held and the process's lease. A lease
// that ran out under it (etcd was away for longer than the TTL, and the
// keep-alive loop has not granted the next one yet) is answered "lease not
// found": then it waits for the loop's new lease and writes again, so a
// node registering just as etcd comes back does not fail.
func (r *Registry) withLease(ctx context.Context, write func(lease clientv3.LeaseID) error) error {
	for {
		r.mu.Lock()
		err := r.ensureLease(ctx)
		if err == nil {
			err = write(r.lease)
		}
		if err == nil || !errors.Is(err, rpctypes.ErrLeaseNotFound) {
			r.mu.Unlock()
			return err
		}
		next := r.leaseSet
		r.mu.Unlock()
		select {
		case <-next:
		case <-ctx.Done():
			return fmt.Errorf("%w (waiting for a new lease: %v)", err, ctx.Err())
		case <-r.ctx.Done():
			return registry.ErrClosed
		}
	}
}

// keepAlive drains the keep-alive responses of lease id. When the channel
// closes before Close, the lease is gone (expired during a partition):
// a new lease is granted and every owned key is written again.
func (r *Registry) keepAlive(id clientv3.LeaseID, ka <-chan *clientv3.LeaseKeepAliveResponse) {
	defer r.wg.Done()
	for {
		for range ka {
		}
		if r.ctx.Err() != nil {
			return
		}
		r.log.Warn("registry lease lost", "lease", int64(id))
		leaseLosses.Inc()
		leaseRenewing.Set(1)
		backoff := 100 * time.Millisecond
		for {
			next, nka, err := r.renew()
			if err == nil {
				leaseRenewing.Set(0)
				id, ka = next, nka
				r.log.Info("registry lease renewed", "lease", int64(id))
				break
			}
			r.log.Warn("registry lease renewal failed", "err", err)
			select {
			case <-r.ctx.Done():
				leaseRenewing.Set(0)
				return
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, r.cfg.LeaseTTL)
		}
	}
}

// renew grants a new lease and re-creates the owned keys on it. The old
// lease may still be alive: the keep-alive stream also ends when the
// member it ran on dies and the client fails over to another one slower
// than the TTL. A claim still held by the old lease is this process's and
// moves to the new lease; only a key someone else holds is a lost claim.
func (r *Registry) renew() (clientv3.LeaseID, <-chan *clientv3.LeaseKeepAliveResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	ctx, cancel := context.WithTimeout(r.ctx, r.cfg.RequestTimeout)
	defer cancel()
	ttl := int64((r.cfg.LeaseTTL + time.Second - 1) / time.Second)
	g, err := r.cli.Grant(ctx, ttl)
	if err != nil {
		return 0, nil, fmt.Errorf("registry: etcd grant lease: %w", err)
	}
	r.granted[g.ID] = true
	ops := make([]clientv3.Op, 0, len(r.owned))
	for k, v := range r.owned {
		ops = append(ops, clientv3.OpPut(k, v, clientv3.WithLease(g.ID)))
	}
	if len(ops) > 0 {
		if _, err := r.cli.Txn(ctx).Then(ops...).Commit(); err != nil {
			r.revoke(g.ID)
			return 0, nil, fmt.Errorf("registry: etcd re-register: %w", err)
		}
	}
	for k, c := range r.claims {
		resp, err := r.cli.Txn(ctx).
			If(clientv3.Compare(clientv3.CreateRevision(k), "=", 0)).
			Then(clientv3.OpPut(k, c.value, clientv3.WithLease(g.ID))).
			Commit()
		if err != nil {
			r.revoke(g.ID)
			return 0, nil, fmt.Errorf("registry: etcd re-claim: %w", err)
		}
		if resp.Succeeded {
			continue
		}
		// The key exists: it is still this process's if one of its own
		// leases holds it (the old one, alive, or one an earlier attempt
		// granted and could not revoke), and then moves to the new one.
		kept := false
		held, err := r.cli.Get(ctx, k)
		if err != nil {
			r.revoke(g.ID)
			return 0, nil, fmt.Errorf("registry: etcd re-claim: %w", err)
		}
		if len(held.Kvs) == 1 && r.granted[clientv3.LeaseID(held.Kvs[0].Lease)] {
			moved, err := r.cli.Txn(ctx).
				If(clientv3.Compare(clientv3.LeaseValue(k), "=", held.Kvs[0].Lease)).
				Then(clientv3.OpPut(k, c.value, clientv3.WithLease(g.ID))).
				Commit()
			if err != nil {
				r.revoke(g.ID)
				return 0, nil, fmt.Errorf("registry: etcd re-claim: %w", err)
			}
			kept = moved.Succeeded
		}
		if !kept {
			r.log.Error("registry claim lost to another process", "key", k)
			close(c.lost)
			delete(r.claims, k)
		}
	}
	ka, err := r.cli.KeepAlive(r.ctx, g.ID)
	if err != nil {
		return 0, nil, fmt.Errorf("registry: etcd keep-alive: %w", err)
	}
	r.setLease(g.ID)
	// Nothing is left on the old lease or on those of failed attempts;
	// end them rather than let them run out (they may already have).
	for id := range r.granted {
		if id != g.ID {
			r.revoke(id)
		}
	}
	return g.ID, ka, nil
}

// revoke ends lease id, on a request of its own: the renewal that calls
// it may have run out of time already, and a lease left behind would hold
// a claim this process gave up until its TTL. A lease that cannot be
// revoked stays in granted, so a later renewal still knows it for this
// process's. r.mu is held.
func (r *Registry) revoke(id clientv3.LeaseID) {
	ctx, cancel := context.WithTimeout(r.ctx, r.cfg.RequestTimeout)
	defer cancel()
	if _, err := r.cli.Revoke(ctx, id); err == nil || errors.Is(err, rpctypes.ErrLeaseNotFound) {
		delete(r.granted, id)
	}
}

// Claim implements registry.Claimer with a transaction that writes the
// key on the Registry's lease only if it does not exist.
func (r *Registry) Claim(ctx context.Context, key string, value []byte) (<-chan struct{}, error) {
	if key == "" {
		return nil, fmt.Errorf("%w: empty key", registry.ErrInvalid)
	}
	full := r.kvKey(key)
	var c *claim
	err := r.withLease(ctx, func(lease clientv3.LeaseID) error {
		resp, err := r.cli.Txn(ctx).
			If(clientv3.Compare(clientv3.CreateRevision(full), "=", 0)).
			Then(clientv3.OpPut(full, string(value), clientv3.WithLease(lease))).
			Commit()
		if err != nil {
			return fmt.Errorf("registry: claim %s: %w", key, err)
		}
		if !resp.Succeeded {
			return fmt.Errorf("%w: %s is claimed", registry.ErrExists, key)
		}
		c = &claim{value: string(value), lost: make(chan struct{})}
		r.claims[full] = c
		return nil
	})
	if err != nil {
		return nil, err
	}
	return c.lost, nil
}

// Register implements registry.Registry.
func (r *Registry) Register(ctx context.Context, n registry.Node) (registry.Registration, error) {
	if !validName(n.Name) {
		return nil, fmt.Errorf("%w: node name %q", registry.ErrInvalid, n.Name)
	}
	n.Draining = false
	val, err := json.Marshal(n)
	if err != nil {
		return nil, fmt.Errorf("registry: encode node %s: %w", n.Name, err)
	}
	key := r.nodeKey(n.Name)
	err = r.withLease(ctx, func(lease clientv3.LeaseID) error {
		resp, err := r.cli.Txn(ctx).
			If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
			Then(clientv3.OpPut(key, string(val), clientv3.WithLease(lease)),
				clientv3.OpDelete(r.drainKey(n.Name))).
			Commit()
		if err != nil {
			return fmt.Errorf("registry: register %s: %w", n.Name, err)
		}
		if !resp.Succeeded {
			return fmt.Errorf("%w: %s", registry.ErrExists, n.Name)
		}
		r.owned[key] = string(val)
		return nil
	})
	if err != nil {
		return nil, err
	}
	r.log.Info("node registered", "node", n.Name, "roles", n.Roles, "addr", n.Addr)
	return &registration{r: r, name: n.Name}, nil
}

type registration struct {
	r    *Registry
	name string
	once sync.Once
}

// Close deletes the node entry and its draining flag.
func (g *registration) Close(ctx context.Context) error {
	var err error
	g.once.Do(func() {
		r := g.r
		key := r.nodeKey(g.name)
		r.mu.Lock()
		delete(r.owned, key)
		r.mu.Unlock()
		_, err = r.cli.Txn(ctx).Then(clientv3.OpDelete(key), clientv3.OpDelete(r.drainKey(g.name))).Commit()
		if err != nil {
			err = fmt.Errorf("registry: deregister %s: %w", g.name, err)
		}
	})
	return err
}

// Pin implements registry.Registry.
func (r *Registry) Pin(ctx context.Context, guildID snowflake.ID, node string) error {
	if !validName(node) || guildID == 0 {
		return fmt.Errorf("%w: pin %d to %q", registry.ErrInvalid, guildID, node)
	}
	if _, err := r.cli.Put(ctx, r.pinKey(guildID), node); err != nil {
		return fmt.Errorf("registry: pin %d: %w", guildID, err)
	}
	return nil
}

// Unpin implements registry.Registry.
func (r *Registry) Unpin(ctx context.Context, guildID snowflake.ID) error {
	if _, err := r.cli.Delete(ctx, r.pinKey(guildID)); err != nil {
		return fmt.Errorf("registry: unpin %d: %w", guildID, err)
	}
	return nil
}

// SetDraining implements registry.Registry. The flag is written on the
// node entry's lease, so it disappears with the entry.
func (r *Registry) SetDraining(ctx context.Context, node string, draining bool) error {
	if !validName(node) {
		return fmt.Errorf("%w: node name %q", registry.ErrInvalid, node)
	}
	key := r.nodeKey(node)
	if !draining {
		if _, err := r.cli.Delete(ctx, r.drainKey(node)); err != nil {
			return fmt.Errorf("registry: undrain %s: %w", node, err)
		}
		return nil
	}
	get, err := r.cli.Get(ctx, key)
	if err != nil {
		return fmt.Errorf("registry: drain %s: %w", node, err)
	}
	if len(get.Kvs) == 0 {
		return fmt.Errorf("%w: node %s", registry.ErrNotFound, node)
	}
	kv := get.Kvs[0]
	resp, err := r.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.ModRevision(key), "=", kv.ModRevision)).
		Then(clientv3.OpPut(r.drainKey(node), "1", clientv3.WithLease(clientv3.LeaseID(kv.Lease)))).
		Commit()
	if err != nil {
		return fmt.Errorf("registry: drain %s: %w", node, err)
	}
	if !resp.Succeeded {
		return fmt.Errorf("%w: node %s changed while draining", registry.ErrNotFound, node)
	}
	return nil
}

// Put implements registry.Registry.
func (r *Registry) Put(ctx context.Context, key string, value []byte, lifetime registry.Lifetime) error {
	if key == "" {
		return fmt.Errorf("%w: empty key", registry.ErrInvalid)
	}
	full := r.kvKey(key)
	if lifetime != registry.WhileAlive {
		r.mu.Lock()
		delete(r.owned, full)
		delete(r.claims, full)
		r.mu.Unlock()
		if _, err := r.cli.Put(ctx, full, string(value)); err != nil {
			return fmt.Errorf("registry: put %s: %w", key, err)
		}
		return nil
	}
	return r.withLease(ctx, func(lease clientv3.LeaseID) error {
		if _, err := r.cli.Put(ctx, full, string(value), clientv3.WithLease(lease)); err != nil {
			return fmt.Errorf("registry: put %s: %w", key, err)
		}
		r.owned[full] = string(value)
		delete(r.claims, full)
		return nil
	})
}

// Get implements registry.Registry.
func (r *Registry) Get(ctx context.Context, key string) ([]byte, error) {
	resp, err := r.cli.Get(ctx, r.kvKey(key))
	if err != nil {
		return nil, fmt.Errorf("registry: get %s: %w", key, err)
	}
	if len(resp.Kvs) == 0 {
		return nil, fmt.Errorf("%w: key %s", registry.ErrNotFound, key)
	}
	return resp.Kvs[0].Value, nil
}

// List implements registry.Registry.
func (r *Registry) List(ctx context.Context, prefix string) (map[string][]byte, error) {
	base := r.kvKey("")
	resp, err := r.cli.Get(ctx, base+prefix, clientv3.WithPrefix())
	if err != nil {
		return nil, fmt.Errorf("registry: list %s: %w", prefix, err)
	}
	out := make(map[string][]byte, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		out[strings.TrimPrefix(string(kv.Key), base)] = kv.Value
	}
	return out, nil
}

// Delete implements registry.Registry.
func (r *Registry) Delete(ctx context.Context, key string) error {
	full := r.kvKey(key)
	r.mu.Lock()
	delete(r.owned, full)
	delete(r.claims, full)
	r.mu.Unlock()
	if _, err := r.cli.Delete(ctx, full); err != nil {
		return fmt.Errorf("registry: delete %s: %w", key, err)
	}
	return nil
}

// Close implements registry.Registry: it stops the keep-alive without
// revoking the lease, so entries expire within the TTL.
func (r *Registry) Close() error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil
	}
	r.closed = true
	r.mu.Unlock()
	r.cancel()
	r.wg.Wait()
	if err := r.cli.Close(); err != nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("registry: etcd close: %w", err)
	}
	return nil
}
