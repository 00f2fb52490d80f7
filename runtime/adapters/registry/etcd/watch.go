package etcd

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/concord-chat/concord/runtime/adapters/registry"
	"github.com/concord-chat/concord/runtime/base/snowflake"
)

// watchState is the part of the key space a Watch follows.
type watchState struct {
	nodes    map[string]registry.Node
	draining map[string]bool
	pins     map[snowflake.ID]string
}

// Watch implements registry.Registry. It lists nodes, draining flags and
// pins at one revision, then follows a prefix watch from the next
// revision; after a compaction or a lost leader it lists again. The
// current snapshot is sent first; later ones only when the role's view
// changed.
func (r *Registry) Watch(ctx context.Context, role string) (<-chan registry.Snapshot, error) {
	if r.ctx.Err() != nil {
		return nil, registry.ErrClosed
	}
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(r.ctx, cancel)
	st, rev, err := r.list(ctx)
	if err != nil {
		stop()
		cancel()
		return nil, err
	}
	out := make(chan registry.Snapshot, 1)
	last := st.snapshot(role, rev)
	out <- last
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		defer stop()
		defer cancel()
		defer close(out)
		r.follow(ctx, role, st, rev, last, out)
	}()
	return out, nil
}

// follow applies watch events to st and sends changed snapshots to out.
func (r *Registry) follow(ctx context.Context, role string, st *watchState, rev int64, last registry.Snapshot, out chan registry.Snapshot) {
	send := func(s registry.Snapshot) {
		if sameView(s, last) {
			return
		}
		last = s
		select {
		case out <- s:
		default:
			select {
			case <-out:
			default:
			}
			out <- s
		}
	}
	backoff := 50 * time.Millisecond
	for ctx.Err() == nil {
		wctx, wcancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
		wch := r.cli.Watch(wctx, r.cfg.Prefix, clientv3.WithPrefix(), clientv3.WithRev(rev+1))
		for resp := range wch {
			if err := resp.Err(); err != nil {
				r.log.Warn("registry watch interrupted", "role", role, "revision", rev, "err", err)
				break
			}
			for _, ev := range resp.Events {
				st.apply(r.cfg.Prefix, ev)
			}
			if resp.Header.Revision > rev {
				rev = resp.Header.Revision
			}
			if len(resp.Events) > 0 {
				send(st.snapshot(role, rev))
			}
			backoff = 50 * time.Millisecond
		}
		wcancel()
		// The watch ended: the context is done, the revision was
		// compacted, or the connection or leader was lost. List afresh.
		for ctx.Err() == nil {
			select {
			case <-ctx.Done():
				return
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, 2*time.Second)
			fresh, frev, err := r.list(ctx)
			if err != nil {
				r.log.Warn("registry relist failed", "role", role, "err", err)
				continue
			}
			st, rev = fresh, frev
			send(st.snapshot(role, rev))
			break
		}
	}
}

// list reads nodes, draining flags and pins at one revision.
func (r *Registry) list(ctx context.Context) (*watchState, int64, error) {
	p := r.cfg.Prefix
	resp, err := r.cli.Txn(ctx).Then(
		clientv3.OpGet(p+"nodes/", clientv3.WithPrefix()),
		clientv3.OpGet(p+"draining/", clientv3.WithPrefix()),
		clientv3.OpGet(p+"pins/", clientv3.WithPrefix()),
	).Commit()
	if err != nil {
		return nil, 0, fmt.Errorf("registry: etcd list: %w", err)
	}
	st := &watchState{
		nodes:    make(map[string]registry.Node),
		draining: make(map[string]bool),
		pins:     make(map[snowflake.ID]string),
	}
	for _, op := range resp.Responses {
		for _, kv := range op.GetResponseRange().Kvs {
			st.apply(p, &clientv3.Event{Type: mvccpb.PUT, Kv: kv})
		}
	}
	return st, resp.Header.Revision, nil
}

// apply folds one event into the state; keys outside the followed
// directories and undecodable values are ignored.
func (st *watchState) apply(prefix string, ev *clientv3.Event) {
	key := strings.TrimPrefix(string(ev.Kv.Key), prefix)
	put := ev.Type == mvccpb.PUT
	switch {
	case strings.HasPrefix(key, "nodes/"):
		name := strings.TrimPrefix(key, "nodes/")
		if !put {
			delete(st.nodes, name)
			return
		}
		var n registry.Node
		if err := json.Unmarshal(ev.Kv.Value, &n); err != nil || n.Name != name {
			return
		}
		st.nodes[name] = n
	case strings.HasPrefix(key, "draining/"):
		name := strings.TrimPrefix(key, "draining/")
		if put {
			st.draining[name] = true
		} else {
			delete(st.draining, name)
		}
	case strings.HasPrefix(key, "pins/"):
		id, err := strconv.ParseUint(strings.TrimPrefix(key, "pins/"), 10, 64)
		if err != nil {
			return
		}
		if put {
			st.pins[snowflake.ID(id)] = string(ev.Kv.Value)
		} else {
			delete(st.pins, snowflake.ID(id))
		}
	}
}

// snapshot returns the view of role; it shares nothing with st.
func (st *watchState) snapshot(role string, rev int64) registry.Snapshot {
	s := registry.Snapshot{Revision: rev, Pins: maps.Clone(st.pins)}
	for _, n := range st.nodes {
		if !n.HasRole(role) {
			continue
		}
		n.Draining = st.draining[n.Name]
		s.Nodes = append(s.Nodes, n)
	}
	slices.SortFunc(s.Nodes, func(a, b registry.Node) int { return strings.Compare(a.Name, b.Name) })
	return s
}

// sameView reports whether two snapshots differ only in revision.
func sameView(a, b registry.Snapshot) bool {
	if !maps.Equal(a.Pins, b.Pins) || len(a.Nodes) != len(b.Nodes) {
		return false
	}
	for i := range a.Nodes {
		x, y := a.Nodes[i], b.Nodes[i]
		if x.Name != y.Name || x.Addr != y.Addr || x.HTTPAddr != y.HTTPAddr || x.Zone != y.Zone ||
			x.Draining != y.Draining || !slices.Equal(x.Roles, y.Roles) || !maps.Equal(x.Labels, y.Labels) {
			return false
		}
	}
	return true
}
