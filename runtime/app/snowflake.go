package app

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/concord-chat/concord/runtime/adapters/registry"
)

// snowflakePairs is the number of snowflake worker/process pairs: 32
// workers of 32 processes (5 bits each).
const snowflakePairs = 32 * 32

// snowflakeKey is the registry key a node claims for its pair.
func snowflakeKey(worker, process int) string {
	return fmt.Sprintf("snowflake/%d-%d", worker, process)
}

const snowflakePrefix = "snowflake/"

// claimSnowflake gives the node its snowflake worker/process pair and
// returns cfg with it, plus a channel closed if the claim is lost.
//
// With cfg.SnowflakeAuto the node claims the first pair, in order, that
// no live node claimed or shows in its registry label: the operator
// starts many pods with one environment, so pairs cannot be set by hand.
// Otherwise it claims cfg.Worker/Process, waiting out the lease
// of a previous process of the same name (killed, not yet expired) like
// register does, and fails when another node holds the pair. Either way
// the claim lives on the registry lease, so a dead node's pair is free
// again within the lease TTL. The claim is not released at shutdown: it
// expires with the lease, so a successor cannot mint ids in the same
// millisecond as the process that held the pair before. checkUnique then
// also compares the pair with every live node's label.
func claimSnowflake(ctx context.Context, reg registry.Registry, cfg Config) (Config, <-chan struct{}, error) {
	claimer, ok := reg.(registry.Claimer)
	if !ok {
		if cfg.SnowflakeAuto {
			return cfg, nil, errors.New("--snowflake-id=auto needs a registry that can claim keys (etcd)")
		}
		return cfg, nil, checkUnique(ctx, reg, cfg)
	}
	var lost <-chan struct{}
	var err error
	if cfg.SnowflakeAuto {
		cfg.Worker, cfg.Process, lost, err = claimFreePair(ctx, reg, claimer, cfg)
	} else {
		lost, err = claimPair(ctx, reg, claimer, cfg)
	}
	if err != nil {
		return cfg, nil, err
	}
	if err := checkUnique(ctx, reg, cfg); err != nil {
		_ = reg.Delete(context.WithoutCancel(ctx), snowflakeKey(cfg.Worker, cfg.Process))
		return cfg, nil, err
	}
	cfg.Logger.Info("snowflake pair claimed", "node", cfg.Node,
		"worker", cfg.Worker, "process", cfg.Process, "auto", cfg.SnowflakeAuto)
	return cfg, lost, nil
}

// claimFreePair claims the first pair no live node claimed or labels.
func claimFreePair(ctx context.Context, reg registry.Registry, c registry.Claimer, cfg Config) (worker, process int, lost <-chan struct{}, err error) {
	used, err := labelledPairs(ctx, reg, cfg.Node)
	if err != nil {
		return 0, 0, nil, err
	}
	claimed, err := reg.List(ctx, snowflakePrefix)
	if err != nil {
		return 0, 0, nil, fmt.Errorf("list snowflake claims: %w", err)
	}
	for i := range snowflakePairs {
		w, p := i/32, i%32
		key := snowflakeKey(w, p)
		if used[snowflakeLabel(w, p)] || claimed[key] != nil {
			continue
		}
		lost, err := c.Claim(ctx, key, []byte(cfg.Node))
		if errors.Is(err, registry.ErrExists) {
			continue // another node took it since the List
		}
		if err != nil {
			return 0, 0, nil, fmt.Errorf("claim snowflake pair %d/%d: %w", w, p, err)
		}
		return w, p, lost, nil
	}
	return 0, 0, nil, fmt.Errorf("every one of the %d snowflake worker/process pairs is held by a live node", snowflakePairs)
}

// claimPair claims the configured pair. A pair held under this node's
// own name belongs to a previous process of this node that died: its
// lease expires within the TTL, so the claim is retried until then.
func claimPair(ctx context.Context, reg registry.Registry, c registry.Claimer, cfg Config) (<-chan struct{}, error) {
	w, p := cfg.Worker, cfg.Process
	key := snowflakeKey(w, p)
	deadline := time.Now().Add(2*cfg.LeaseTTL + time.Second)
	for {
		lost, err := c.Claim(ctx, key, []byte(cfg.Node))
		if err == nil {
			return lost, nil
		}
		if !errors.Is(err, registry.ErrExists) {
			return nil, fmt.Errorf("claim snowflake pair %d/%d: %w", w, p, err)
		}
		holder, gerr := reg.Get(ctx, key)
		if gerr != nil && !errors.Is(gerr, registry.ErrNotFound) {
			return nil, fmt.Errorf("read snowflake claim %d/%d: %w", w, p, gerr)
		}
		if gerr == nil && string(holder) != cfg.Node {
			return nil, fmt.Errorf("node %s already mints ids as worker/process %s; give each process its own --worker/--process, or --snowflake-id=auto",
				holder, snowflakeLabel(w, p))
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("snowflake pair %s is still held by a previous %s after %s", snowflakeLabel(w, p), cfg.Node, 2*cfg.LeaseTTL+time.Second)
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("claim snowflake pair: %w", ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// labelledPairs returns the snowflake labels of every live node but self.
func labelledPairs(ctx context.Context, reg registry.Registry, self string) (map[string]bool, error) {
	used := map[string]bool{}
	err := eachLiveNode(ctx, reg, func(n registry.Node) error {
		if n.Name != self && n.Labels[labelSnowflake] != "" {
			used[n.Labels[labelSnowflake]] = true
		}
		return nil
	})
	return used, err
}
