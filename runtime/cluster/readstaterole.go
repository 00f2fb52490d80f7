package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"

	"github.com/concord-chat/concord/runtime/eventlog"
	eventlogbackend "github.com/concord-chat/concord/runtime/eventlog/backend"
	"github.com/concord-chat/concord/runtime/eventlog/outbox"
	"github.com/concord-chat/concord/runtime/guild"
	"github.com/concord-chat/concord/runtime/readstate"
	readstatecassandra "github.com/concord-chat/concord/runtime/readstate/cassandra"
	readstatepebble "github.com/concord-chat/concord/runtime/readstate/pebble"
	"github.com/concord-chat/concord/runtime/snowflake"
	"github.com/concord-chat/concord/runtime/store/cassandra"
	"github.com/concord-chat/concord/runtime/transport"
)

// RoleReadState is the read-state role (runtime/readstate): read markers
// and mention counts, fed from the event log, served over ReadStateNode.
const RoleReadState = "readstate"

// kafkaLog reports whether an --eventlog URL names Kafka, the only event
// log processes of a cluster can share.
func kafkaLog(spec string) bool { return strings.HasPrefix(spec, "kafka://") }

// readStateRole is the read-state role of a node: the read-state table
// (Cassandra in the store's keyspace, or Pebble in the data directory for
// a single process), the event log the mention consumer reads as group
// "readstate", and the readstate.Service served over ReadStateNode.
type readStateRole struct {
	log    eventlog.Log
	table  readstate.Store
	svc    *readstate.Service
	guilds transport.GuildClient
	local  *guild.Service
	logger *slog.Logger
}

// openReadStateRole opens the table, the event log and the service.
// Visibility and role expansion are asked of the guild owners (guildPerms).
// Mention counts go through mentions (mentionRouter: to the users'
// owners on the read-state ring).
func openReadStateRole(ctx context.Context, cfg Config, n *Node, local *guild.Service, guilds transport.GuildClient, mentions readstate.Mentions) (_ *readStateRole, err error) {
	log := n.log.With("component", "readstate")
	r := &readStateRole{guilds: guilds, local: local, logger: log}
	defer func() {
		if err != nil {
			r.close(ctx)
		}
	}()
	if sharedStore(cfg.Store) {
		cc, err := cassandra.ParseURL(cfg.Store)
		if err != nil {
			return nil, fmt.Errorf("cluster: --store: %w", err)
		}
		cfg.ApplyCassandraAuth(&cc)
		// Through a local: a failed New must not leave a typed nil in
		// r.table for close to call.
		table, err := readstatecassandra.New(ctx, readstatecassandra.Config{
			Hosts: cc.Hosts, Keyspace: cc.Keyspace, Consistency: cc.Consistency, ReplicationFactor: cc.ReplicationFactor,
			Username: cc.Username, Password: cc.Password,
			Logger: log.With("component", "readstate-table"),
		})
		if err != nil {
			return nil, fmt.Errorf("cluster: read-state table: %w", err)
		}
		r.table = table
	} else {
		table, err := readstatepebble.New(readstatepebble.Config{Dir: filepath.Join(cfg.DataDir, "readstate")})
		if err != nil {
			return nil, fmt.Errorf("cluster: read-state table: %w", err)
		}
		r.table = table
	}
	if r.log, err = eventlogbackend.Open(ctx, cfg.EventLog, cfg.DataDir, log.With("component", "eventlog"), cfg.EventLogOptions()...); err != nil {
		return nil, fmt.Errorf("cluster: event log: %w", err)
	}
	perms := guildPerms{local: local, guilds: guilds, log: log}
	if r.svc, err = readstate.New(readstate.Config{
		FlushInterval: cfg.ReadStateFlush, Group: "readstate", Mentions: mentions, Registerer: n.metrics, Logger: log,
	}, r.table, perms, perms); err != nil {
		return nil, fmt.Errorf("cluster: read states: %w", err)
	}
	return r, nil
}

// run consumes the event log until ctx ends.
func (r *readStateRole) run(ctx context.Context) {
	if err := r.svc.Run(ctx, r.log); err != nil && !errors.Is(err, context.Canceled) && ctx.Err() == nil {
		r.logger.Error("read-state consumer stopped", "err", err)
	}
}

// close flushes the read states and closes the table and the log.
func (r *readStateRole) close(ctx context.Context) error {
	var errs []error
	if r.svc != nil {
		errs = append(errs, r.svc.Close(ctx))
	}
	if r.table != nil {
		errs = append(errs, r.table.Close())
	}
	if r.log != nil {
		errs = append(errs, r.log.Close())
	}
	return errors.Join(errs...)
}

// guildPerms is readstate.Visibility and readstate.Roles for a read-state
// node, which holds no guild actor: it asks the guild node owning the
// channel's guild (GuildNode.CanView and GuildNode.RoleMembers, answered
// by guildBackend). The channel → guild
// lookup and private channels (no guild) are answered from the store by a
// guild.Service that loads no actor. A guild owner that cannot be reached
// counts as "cannot see": a mention consumed meanwhile is not counted.
type guildPerms struct {
	local  *guild.Service
	guilds transport.GuildClient
	log    *slog.Logger
}

// CanView implements readstate.Visibility.
func (p guildPerms) CanView(ctx context.Context, user, channel snowflake.ID) bool {
	gid, err := p.local.ChannelGuild(ctx, channel)
	if err != nil {
		return false
	}
	if gid == 0 {
		return p.local.CanView(ctx, user, channel)
	}
	ok, err := p.guilds.CanView(ctx, gid, user, channel)
	if err != nil {
		p.log.Warn("visibility check on the guild owner failed", "guild_id", gid, "channel_id", channel, "err", err)
		return false
	}
	return ok
}

// RoleMembers implements readstate.Roles.
func (p guildPerms) RoleMembers(ctx context.Context, guildID, role snowflake.ID) ([]snowflake.ID, error) {
	ids, err := p.guilds.RoleMembers(ctx, guildID, role)
	if err != nil {
		return nil, fmt.Errorf("cluster: role members of %d in guild %d: %w", role, guildID, err)
	}
	return ids, nil
}

// publisher is the event log and outbox of a guild node: the REST API
// publishes message events through the outbox (under the data directory)
// to the shared Kafka log.
type publisher struct {
	log    eventlog.Log
	outbox *outbox.Outbox
}

// openPublisher opens the event log and the node's outbox.
func openPublisher(ctx context.Context, cfg Config, n *Node) (*publisher, error) {
	p := &publisher{}
	var err error
	if p.log, err = eventlogbackend.Open(ctx, cfg.EventLog, cfg.DataDir, n.log.With("component", "eventlog"), cfg.EventLogOptions()...); err != nil {
		return nil, fmt.Errorf("cluster: event log: %w", err)
	}
	// One outbox per node name, so that processes sharing a data
	// directory do not share a queue.
	if p.outbox, err = outbox.New(outbox.Config{
		Dir: filepath.Join(cfg.DataDir, "outbox", cfg.Node), Registerer: n.metrics, Logger: n.log.With("component", "outbox"),
	}, p.log); err != nil {
		p.log.Close()
		return nil, fmt.Errorf("cluster: outbox: %w", err)
	}
	return p, nil
}

// close stops the outbox relay (queued events stay queued for the next
// start on the same directory) and closes the log.
func (p *publisher) close() error {
	if p == nil {
		return nil
	}
	return errors.Join(p.outbox.Close(), p.log.Close())
}
