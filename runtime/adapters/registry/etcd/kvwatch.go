package etcd

import (
	"context"
	"fmt"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/concord-chat/concord/runtime/adapters/registry"
)

var _ registry.KVWatcher = (*Registry)(nil)

// WatchKV implements registry.KVWatcher over a prefix watch of kv/<prefix>
// that requires a leader: losing the connection or the leader (found by
// the watch or by a count-only read every second), or a compacted
// revision, sends Lost and then a fresh listing once etcd answers again.
func (r *Registry) WatchKV(ctx context.Context, prefix string) (<-chan registry.KVUpdate, error) {
	if r.ctx.Err() != nil {
		return nil, registry.ErrClosed
	}
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(r.ctx, cancel)
	snap, rev, err := r.listKV(ctx, prefix)
	if err != nil {
		stop()
		cancel()
		return nil, err
	}
	out := make(chan registry.KVUpdate, 16)
	out <- snap
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		defer stop()
		defer cancel()
		defer close(out)
		r.followKV(ctx, prefix, rev, out)
	}()
	return out, nil
}

// followKV forwards watch events under prefix from rev+1 and recovers
// from a broken watch with Lost and a new listing.
func (r *Registry) followKV(ctx context.Context, prefix string, rev int64, out chan<- registry.KVUpdate) {
	send := func(u registry.KVUpdate) bool {
		select {
		case out <- u:
			return true
		case <-ctx.Done():
			return false
		}
	}
	base := r.kvKey("")
	backoff := 50 * time.Millisecond
	for ctx.Err() == nil {
		wctx, wcancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
		wch := r.cli.Watch(wctx, base+prefix, clientv3.WithPrefix(), clientv3.WithRev(rev+1))
		// The client re-dials a lost server without telling the watch,
		// so a probe ends the watch when etcd stops answering.
		go r.probeKV(wctx, wcancel, base+prefix)
		for resp := range wch {
			if err := resp.Err(); err != nil {
				r.log.Warn("registry kv watch interrupted", "prefix", prefix, "revision", rev, "err", err)
				break
			}
			u := registry.KVUpdate{Revision: resp.Header.Revision}
			for _, ev := range resp.Events {
				c := registry.KVChange{Key: strings.TrimPrefix(string(ev.Kv.Key), base)}
				if ev.Type == mvccpb.DELETE {
					c.Deleted = true
				} else {
					c.Value = ev.Kv.Value
				}
				u.Changes = append(u.Changes, c)
			}
			if resp.Header.Revision > rev {
				rev = resp.Header.Revision
			}
			if len(u.Changes) > 0 && !send(u) {
				wcancel()
				return
			}
			backoff = 50 * time.Millisecond
		}
		wcancel()
		if ctx.Err() != nil || !send(registry.KVUpdate{Lost: true}) {
			return
		}
		for ctx.Err() == nil {
			select {
			case <-ctx.Done():
				return
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, 2*time.Second)
			snap, srev, err := r.listKV(ctx, prefix)
			if err != nil {
				r.log.Warn("registry kv relist failed", "prefix", prefix, "err", err)
				continue
			}
			rev = srev
			if !send(snap) {
				return
			}
			break
		}
	}
}

// listKV reads every key under kv/<prefix> as a Snapshot update. The
// read requires a leader, so a partitioned member does not answer with
// stale data.
func (r *Registry) listKV(ctx context.Context, prefix string) (registry.KVUpdate, int64, error) {
	base := r.kvKey("")
	rctx, cancel := context.WithTimeout(ctx, r.cfg.RequestTimeout)
	defer cancel()
	resp, err := r.cli.Get(clientv3.WithRequireLeader(rctx), base+prefix, clientv3.WithPrefix())
	if err != nil {
		return registry.KVUpdate{}, 0, fmt.Errorf("registry: list kv %s: %w", prefix, err)
	}
	u := registry.KVUpdate{Snapshot: true, Revision: resp.Header.Revision}
	for _, kv := range resp.Kvs {
		u.Changes = append(u.Changes, registry.KVChange{Key: strings.TrimPrefix(string(kv.Key), base), Value: kv.Value})
	}
	return u, resp.Header.Revision, nil
}

// kvProbeEvery is how often a KV watch checks that etcd answers with a
// leader; kvProbeTimeout bounds each check.
const (
	kvProbeEvery   = time.Second
	kvProbeTimeout = time.Second
)

// probeKV reads the count of keys under key with a leader every
// kvProbeEvery and cancels the watch (cancel) at the first failure, until
// ctx ends.
func (r *Registry) probeKV(ctx context.Context, cancel context.CancelFunc, key string) {
	t := time.NewTicker(kvProbeEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		pctx, pcancel := context.WithTimeout(ctx, kvProbeTimeout)
		_, err := r.cli.Get(clientv3.WithRequireLeader(pctx), key, clientv3.WithPrefix(), clientv3.WithCountOnly())
		pcancel()
		if err != nil && ctx.Err() == nil {
			r.log.Warn("registry kv watch probe failed", "prefix", key, "err", err)
			cancel()
			return
		}
	}
}
