// Package readstaterole is the read-state role, built by the same Build
// in `concord dev` and in `concord serve --roles=readstate`: read markers
// and mention counts (runtime/readstate) in a table written through and
// fenced by the ring's revision (Cassandra in the store's keyspace when
// the store is shared, Pebble in the data directory otherwise), the mention consumer on the event log,
// and the seam every other role reaches read states through (Backend).
//
// The seams, by mode:
//   - visibility and role expansion: in `concord dev` the process's
//     guild service (provided under LocalGuilds); in `concord serve` the
//     guild node owning the channel's guild, over GuildNode.
//   - read states (acks, READY's read_state, the mention hand-off): the
//     user's owner on the read-state ring — this process's service when
//     it owns the user (in `concord dev` always), ReadStateNode on the
//     owner otherwise.
//   - the event log: the one the process already opened (LogKey: in
//     `concord dev` the outbox's), else its own.
package readstaterole

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"time"

	"github.com/concord-chat/concord/runtime/event"
	"github.com/concord-chat/concord/runtime/eventlog"
	eventlogbackend "github.com/concord-chat/concord/runtime/eventlog/backend"
	"github.com/concord-chat/concord/runtime/guild"
	"github.com/concord-chat/concord/runtime/lifecycle"
	"github.com/concord-chat/concord/runtime/readstate"
	readstatecassandra "github.com/concord-chat/concord/runtime/readstate/cassandra"
	readstatepebble "github.com/concord-chat/concord/runtime/readstate/pebble"
	"github.com/concord-chat/concord/runtime/registry"
	"github.com/concord-chat/concord/runtime/role"
	"github.com/concord-chat/concord/runtime/snowflake"
	"github.com/concord-chat/concord/runtime/store/cassandra"
	"github.com/concord-chat/concord/runtime/transport"
)

// Name is the role's --roles name.
const Name = "readstate"

// Role is the read-state role.
var Role = role.Role{Name: Name, Build: build}

// Guilds is what read states ask of the guilds: whether a user sees a
// channel (a mention in a hidden channel is not counted) and who holds a
// role (a role mention counts for each holder).
type Guilds interface {
	readstate.Visibility
	readstate.Roles
}

// Seams this role consumes and provides.
var (
	// LocalGuilds is the process's guild service when it runs every
	// guild (`concord dev`).
	LocalGuilds = role.Key[Guilds]{Name: "guild/local"}
	// LogKey is the process's event log when another part opened it.
	LogKey = role.Key[eventlog.Log]{Name: "eventlog"}
	// backendKey is the process's read-state backend (Backend).
	backendKey = role.Key[*Backend]{Name: "readstate/backend"}
)

// build opens the table, the event log and the service, runs the
// mention consumer, and provides the service to the process's Backend.
func build(ctx context.Context, b *role.Builder) (err error) {
	cfg := b.Config
	log := b.Logger.With("component", "readstate")
	var closers role.Closers
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
	evlog, ok := role.Lookup(b.Seams, LogKey)
	if !ok {
		if evlog, err = eventlogbackend.Open(ctx, LogSpec(cfg.EventLog), cfg.DataDir, log.With("component", "eventlog"), cfg.EventLogOptions()...); err != nil {
			return fmt.Errorf("event log: %w", err)
		}
		closers.Add(evlog.Close)
	}
	backend, err := Open(ctx, b.Parts)
	if err != nil {
		return err
	}
	var guilds Guilds
	var mentions readstate.Mentions
	if b.Dev() {
		if guilds, ok = role.Lookup(b.Seams, LocalGuilds); !ok {
			return errors.New("no guild service in the process to check visibility with")
		}
	} else {
		ring, err := role.Ring(ctx, b.Seams, b.Registry, registry.RoleGuild, registry.LocalRingConfig{Logger: b.Logger.With("component", "ring")})
		if err != nil {
			return err
		}
		// Visibility is asked of the guild owners; this service only
		// maps channels to guilds and answers private channels from the
		// store, and never loads an actor.
		local, err := guild.NewService(guild.Config{Logger: log.With("component", "readstate-guilds")},
			guild.Deps{Store: b.Store, Sink: discardSink{}, IDs: b.IDs, Auth: b.Auth})
		if err != nil {
			return fmt.Errorf("read-state guild service: %w", err)
		}
		closers.Add(local.Close)
		client := transport.NewGuildClient(b.ClientConfig, ring)
		closers.Add(client.Close)
		guilds = guildPerms{local: local, guilds: client, log: log}
		mentions = &mentionRouter{shards: backend, retry: cfg.RetryInterval, log: log}
	}
	var owns func(snowflake.ID) (int64, bool)
	if !b.Dev() {
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
	if b.Dev() {
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
// when the store is Cassandra, else Pebble under the data directory.
func openTable(ctx context.Context, b *role.Builder) (readstate.Store, error) {
	cfg := b.Config
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

// discardSink is the sink of a guild service that loads no actor.
type discardSink struct{}

func (discardSink) Deliver(context.Context, string, event.Batch) {}

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
