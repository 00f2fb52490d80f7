// Package readstaterole is the read-state role, built by the same Build
// in `concord dev` and in `concord serve --roles=readstate`: read markers
// and mention counts (runtime/domain/readstate) in a table written through and
// fenced by the ring's revision (Cassandra in the store's keyspace when
// the store is shared, Pebble in the data directory otherwise), the mention consumer on the event log,
// and the seam every other role reaches read states through (Backend).
//
// The ports (runtime/services/wiring) it consumes:
//   - wiring.ReadStates, the process's read-state seam (Backend): the role
//     sets its service there, and every other role calls it.
//   - wiring.EventLog, the process's event log, which it counts mentions
//     from.
//   - visibility and role expansion: the process's guild service
//     (wiring.GuildService) when the guilds are in this process; with
//     wiring.Placement the guild owners over GuildNode (wiring.GuildClient),
//     channels mapped to guilds by wiring.GuildReader.
package readstaterole

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"time"

	"github.com/concord-chat/concord/runtime/adapters/registry"
	"github.com/concord-chat/concord/runtime/adapters/store/cassandra"
	"github.com/concord-chat/concord/runtime/base/lifecycle"
	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/readstate"
	readstatecassandra "github.com/concord-chat/concord/runtime/domain/readstate/cassandra"
	readstatepebble "github.com/concord-chat/concord/runtime/domain/readstate/pebble"
	"github.com/concord-chat/concord/runtime/services/wiring"
)

// Name is the role's --roles name.
const Name = "readstate"

// Role is the read-state role.
var Role = wiring.Role{Name: Name, Build: build,
	Needs: []string{wiring.ReadStates.Name, wiring.EventLog.Name},
	Uses:  []string{wiring.Cassandra.Name, wiring.GuildService.Name, wiring.Placement.Name, wiring.GuildClient.Name, wiring.GuildReader.Name},
}

// Guilds is what read states ask of the guilds: whether a user sees a
// channel (a mention in a hidden channel is not counted) and who holds a
// role (a role mention counts for each holder).
type Guilds interface {
	readstate.Visibility
	readstate.Roles
}

// backendKey is the process's read-state backend (Backend).
var backendKey = wiring.Key[*Backend]{Name: "readstate/backend"}

// build opens the table, the event log and the service, runs the
// mention consumer, and provides the service to the process's Backend.
func build(ctx context.Context, b *wiring.Builder) (err error) {
	cfg := b.Config
	log := b.Logger.With("component", "readstate")
	var closers wiring.Closers
	defer func() {
		if err != nil {
			_ = closers.Close()
		}
	}()
	table, err := openTable(ctx, b)
	if err != nil {
		return err
	}
	closers.Add(table.Close)
	evlog, ok := wiring.Lookup(b.Seams, wiring.EventLog)
	if !ok {
		return errors.New("no event log in the process to count mentions from")
	}
	seam, ok := wiring.Lookup(b.Seams, wiring.ReadStates)
	if !ok {
		return errors.New("no read-state seam in the process")
	}
	backend, ok := seam.(*Backend)
	if !ok {
		return fmt.Errorf("the process's read-state seam %T is not the role's", seam)
	}
	var guilds Guilds
	var mentions readstate.Mentions
	var owns func(snowflake.ID) (int64, bool)
	if _, placed := wiring.Lookup(b.Seams, wiring.Placement); !placed {
		if guilds, ok = wiring.Lookup(b.Seams, wiring.GuildService); !ok {
			return errors.New("no guild service in the process to check visibility with")
		}
	} else {
		// Visibility is asked of the guild owners; the reader only
		// maps channels to guilds and answers private channels from the
		// store, and never loads an actor.
		local, ok := wiring.Lookup(b.Seams, wiring.GuildReader)
		client, ok2 := wiring.Lookup(b.Seams, wiring.GuildClient)
		if !ok || !ok2 {
			return errors.New("no guild reader and client in the process to check visibility with")
		}
		guilds = guildPerms{local: local, guilds: client, log: log}
		mentions = &mentionRouter{shards: backend, retry: cfg.RetryInterval, log: log}
		owns = ringEpoch(backend.ring, cfg.Node)
	}
	svc, err := readstate.New(readstate.Config{
		FlushInterval: cfg.ReadStateFlush, Group: cfg.ReadStateGroup, Mentions: mentions, Owns: owns, Registerer: b.Metrics, Logger: log,
	}, table, guilds, guilds)
	if err != nil {
		return fmt.Errorf("read states: %w", err)
	}
	closers.Add(func() error {
		// Flush what is only in memory before the table closes.
		cctx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
		defer cancel()
		return svc.Close(cctx)
	})
	backend.local = svc
	if err := b.Add(lifecycle.Part{
		Name: "consume",
		Run: func(ctx context.Context) error {
			if err := svc.Run(ctx, evlog); err != nil && !errors.Is(err, context.Canceled) && ctx.Err() == nil {
				log.Error("read-state consumer stopped", "err", err)
			}
			return nil
		},
		Close: closers.Close,
	}); err != nil {
		return err
	}
	if backend.ring == nil {
		// Every user is this process's: no ring to follow, no one to
		// serve ReadStateNode to.
		return nil
	}
	if b.GRPC != nil {
		b.GRPC.ReadStates = ownedReadStates{self: cfg.Node, ring: backend.ring, svc: svc}
	}
	return b.Add(lifecycle.Part{Name: "follow-ring", Run: func(ctx context.Context) error {
		followRing(ctx, svc, backend.ring, cfg.Node, cfg.RetryInterval, log)
		return nil
	}})
}

// openTable opens the read-state table: in the shared store's keyspace
// when the store is Cassandra (through the process's session, port
// wiring.Cassandra), else Pebble under the data directory.
func openTable(ctx context.Context, b *wiring.Builder) (readstate.Store, error) {
	cfg := b.Config
	if cs, ok := wiring.Lookup(b.Seams, wiring.Cassandra); ok {
		table, err := readstatecassandra.NewShared(ctx, readstatecassandra.Config{Keyspace: cs.Keyspace(),
			Logger: b.Logger.With("component", "readstate-table")}, cs.Session())
		if err != nil {
			return nil, fmt.Errorf("read-state table: %w", err)
		}
		return table, nil
	}
	if !sharedStore(cfg.Store) {
		table, err := readstatepebble.New(readstatepebble.Config{Dir: filepath.Join(cfg.DataDir, "readstate")})
		if err != nil {
			return nil, fmt.Errorf("read-state table: %w", err)
		}
		return table, nil
	}
	cc, err := cassandra.ParseURL(cfg.Store)
	if err != nil {
		return nil, fmt.Errorf("--store: %w", err)
	}
	cfg.ApplyCassandraAuth(&cc)
	table, err := readstatecassandra.New(ctx, readstatecassandra.Config{
		Hosts: cc.Hosts, Keyspace: cc.Keyspace, Consistency: cc.Consistency, ReplicationFactor: cc.ReplicationFactor,
		Username: cc.Username, Password: cc.Password,
		Logger: b.Logger.With("component", "readstate-table"),
	})
	if err != nil {
		return nil, fmt.Errorf("read-state table: %w", err)
	}
	return table, nil
}

// sharedStore reports whether a --store URL names a store processes
// share (Cassandra or Scylla).
func sharedStore(url string) bool {
	return strings.HasPrefix(url, "cassandra://") || strings.HasPrefix(url, "scylla://")
}

// LogSpec is the event log URL of an --eventlog value: "mem" names the
// persisted in-process log.
func LogSpec(spec string) string {
	if spec == "mem" {
		return "memlog"
	}
	return spec
}

// followRing releases the users this node stops owning whenever the ring
// of read-state nodes changes (readstate.Service.Release): their changes
// are written and their cached records forgotten, so the next owner
// loads them whole and this node reloads them if they come back.
func followRing(ctx context.Context, svc *readstate.Service, ring *registry.LocalRing, self string, retry time.Duration, log *slog.Logger) {
	owned := func(u snowflake.ID) bool {
		n, ok := ring.Owner(u)
		return ok && n.Name == self
	}
	changes := ring.Changes(ctx)
	pending := false
	for {
		var tick <-chan time.Time
		if pending {
			tick = time.After(retry)
		}
		select {
		case _, ok := <-changes:
			if !ok {
				return
			}
		case <-tick:
		case <-ctx.Done():
			return
		}
		if err := svc.Release(ctx, owned); err != nil {
			pending = ctx.Err() == nil
			log.Warn("release read states of moved users", "err", err)
			continue
		}
		pending = false
		log.Info("read-state ring changed", "nodes", ring.View().Ring().Len())
	}
}
