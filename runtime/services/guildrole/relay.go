package guildrole

import (
	"context"
	"encoding/json"
	"hash/fnv"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/concord-chat/concord/runtime/adapters/registry"
	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/event"
	"github.com/concord-chat/concord/runtime/domain/guild"
	"github.com/concord-chat/concord/runtime/services/transport"
)

// The relay tier of big guilds: the operator's RelayTier controller runs
// relay pods (runtime/services/relayrole) and writes their gRPC addresses under
// relays/<guild id>; guild nodes follow those keys.

// relaysPrefix is the registry kv prefix of the relay lists (JSON arrays
// of host:port), one key per guild (operator/fleet/etcdfleet.RelaysKey).
const relaysPrefix = "relays/"

// relayRouter is a guild node's guild.Relayer: it follows the relay lists
// and sends a relayed guild's dispatches to its relays, each gateway node
// always through the same relay of the list (rendezvous hashing, so a
// relay joining or leaving moves only its own share of nodes).
//
// While a guild's relay list stays the same, a gateway node receives the
// guild's events on one path, in order. When the list changes, events
// already in flight on the old path may arrive after the first ones on
// the new path: the same window as a guild moving between guild nodes.
type relayRouter struct {
	client transport.RelayClient
	log    *slog.Logger
	failed prometheus.Counter
	sent   prometheus.Counter

	mu     sync.RWMutex
	relays map[snowflake.ID][]string
}

var _ guild.Relayer = (*relayRouter)(nil)

func newRelayRouter(client transport.RelayClient, reg prometheus.Registerer, log *slog.Logger) (*relayRouter, error) {
	r := &relayRouter{client: client, log: log, relays: make(map[snowflake.ID][]string),
		sent: prometheus.NewCounter(prometheus.CounterOpts{Name: "concord_cluster_relayed_dispatches_total",
			Help: "Guild dispatches this guild node sent through relays (one per relay)."}),
		failed: prometheus.NewCounter(prometheus.CounterOpts{Name: "concord_cluster_relay_failures_total",
			Help: "Relay requests a relay did not take; their gateway nodes got the dispatch directly."}),
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{r.sent, r.failed} {
			if err := reg.Register(c); err != nil {
				return nil, err
			}
		}
	}
	return r, nil
}

// Relay implements guild.Relayer.
func (r *relayRouter) Relay(ctx context.Context, guildID snowflake.ID, typ string, payloads []json.RawMessage, byNode map[string][]event.Target) (bool, []string) {
	r.mu.RLock()
	relays := r.relays[guildID]
	r.mu.RUnlock()
	if len(relays) == 0 {
		return false, nil
	}
	groups := make(map[string]map[string][]event.Target, len(relays))
	for node, ts := range byNode {
		addr := pickRelay(relays, node)
		if groups[addr] == nil {
			groups[addr] = make(map[string][]event.Target)
		}
		groups[addr][node] = ts
	}
	var failed []string
	for _, addr := range relays {
		g := groups[addr]
		if g == nil {
			continue
		}
		if err := r.client.Relay(ctx, addr, typ, payloads, g); err != nil {
			r.failed.Inc()
			r.log.Warn("relay failed; delivering directly", "guild_id", guildID, "relay", addr, "err", err)
			for node := range g {
				failed = append(failed, node)
			}
			continue
		}
		r.sent.Inc()
	}
	return true, failed
}

// pickRelay is the relay of relays with the highest hash of (relay, node).
func pickRelay(relays []string, node string) string {
	best, bestScore := "", uint64(0)
	for _, addr := range relays {
		h := fnv.New64a()
		h.Write([]byte(addr))
		h.Write([]byte{0})
		h.Write([]byte(node))
		if s := mix64(h.Sum64()); best == "" || s > bestScore {
			best, bestScore = addr, s
		}
	}
	return best
}

// mix64 is the splitmix64 finalizer: FNV alone barely changes its high
// bits for addresses that differ in one character.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ x>>31
}

// follow keeps the relay lists up to date until ctx ends: through a kv
// watch when the registry has one, else by listing every interval.
func (r *relayRouter) follow(ctx context.Context, reg registry.Registry, interval time.Duration) {
	if w, ok := reg.(registry.KVWatcher); ok {
		for ctx.Err() == nil {
			ch, err := w.WatchKV(ctx, relaysPrefix)
			if err != nil {
				r.log.Warn("watch relay lists", "err", err)
				if !sleepCtx(ctx, interval) {
					return
				}
				continue
			}
			for upd := range ch {
				r.apply(upd)
			}
		}
		return
	}
	for {
		kv, err := reg.List(ctx, relaysPrefix)
		if err == nil {
			upd := registry.KVUpdate{Snapshot: true}
			for k, v := range kv {
				upd.Changes = append(upd.Changes, registry.KVChange{Key: k, Value: v})
			}
			r.apply(upd)
		} else if ctx.Err() == nil {
			r.log.Warn("list relay lists", "err", err)
		}
		if !sleepCtx(ctx, interval) {
			return
		}
	}
}

// apply folds one kv update into the relay lists. A Lost update keeps the
// lists as they are: relays keep working while the registry is away.
func (r *relayRouter) apply(upd registry.KVUpdate) {
	if upd.Lost {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if upd.Snapshot {
		clear(r.relays)
	}
	for _, c := range upd.Changes {
		id, err := strconv.ParseUint(strings.TrimPrefix(c.Key, relaysPrefix), 10, 64)
		if err != nil {
			continue
		}
		gid := snowflake.ID(id)
		var list []string
		if !c.Deleted {
			if err := json.Unmarshal(c.Value, &list); err != nil {
				r.log.Warn("bad relay list ignored", "key", c.Key, "err", err)
				continue
			}
		}
		list = slices.DeleteFunc(list, func(s string) bool { return s == "" })
		if len(list) == 0 {
			delete(r.relays, gid)
			continue
		}
		slices.Sort(list)
		r.relays[gid] = slices.Compact(list)
	}
}

// sleepCtx waits d or until ctx ends; false when ctx ended.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
