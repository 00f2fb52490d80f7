package cassandra

import (
	"context"
	"crypto/sha1"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"
)

// Schema migrations are versioned and idempotent, and safe to run from
// many processes at once:
//
//   - every statement is CREATE ... IF NOT EXISTS, and every table is
//     created WITH ID = a UUID derived from its keyspace and name, so two
//     processes that race to create a table create the same table (on
//     Cassandra; ScyllaDB rejects the option and the store retries without
//     it, relying on the lock alone);
//   - a process takes the migration lock — the row version = -1 of
//     schema_migrations, claimed with INSERT ... IF NOT EXISTS USING TTL —
//     before applying anything; the others wait until every version is
//     recorded or the lock expires;
//   - each applied migration is recorded as a row of schema_migrations
//     after the cluster agrees on the schema.
//
// Table options (tombstone lifetime). gc_grace_seconds is how long a
// tombstone must live before compaction may purge it; it must exceed the
// longest time a replica can miss a delete (hinted handoff plus repair
// interval). Cassandra's default is 10 days. Concord sets it per table:
//
//   - messages: 2 days, as Discord did: deletes are frequent and every read
//     of a partition skips its tombstones. Run repair at least every 2 days
//     (or rely on hints only when nodes are never down longer than
//     max_hint_window, default 3h).
//   - channel_buckets: 2 days, for the same reason (emptied buckets).
//   - every other table: 10 days (Cassandra's default): rows change rarely.

// Migration is one schema version of a set of tables. Adapters of other
// ports that keep their tables in the store's keyspace (runtime/domain/bots/cassandra)
// declare their own list and apply it with Store.Migrate.
type Migration struct {
	// Version numbers a set's migrations from 1 upwards.
	Version int
	// Name says what the migration adds.
	Name string
	// Stmts run in order; each must be idempotent (IF NOT EXISTS).
	Stmts []string
}

// messageTableOpts are the options of the messages-like tables.
const messageTableOpts = `gc_grace_seconds = 172800
	AND compaction = {'class': 'SizeTieredCompactionStrategy'}
	AND comment = 'Concord messages: see runtime/adapters/store/cassandra'`

var migrations = []Migration{
	{1, "messages and buckets", []string{
		`CREATE TYPE IF NOT EXISTS attachment (
			id bigint, filename text, size int, url text, content_type text)`,
		`CREATE TABLE IF NOT EXISTS messages (
			channel_id bigint,
			bucket bigint,
			message_id bigint,
			guild_id bigint,
			author_id bigint,
			content text,
			type int,
			flags int,
			tts boolean,
			pinned boolean,
			edited_at timestamp,
			reference_id bigint,
			mention_everyone boolean,
			mentions frozen<list<bigint>>,
			mention_roles frozen<list<bigint>>,
			attachments frozen<list<frozen<attachment>>>,
			nonce text,
			PRIMARY KEY ((channel_id, bucket), message_id)
		) WITH CLUSTERING ORDER BY (message_id DESC) AND ` + messageTableOpts,
		`CREATE TABLE IF NOT EXISTS channel_buckets (
			channel_id bigint,
			bucket bigint,
			PRIMARY KEY ((channel_id), bucket)
		) WITH CLUSTERING ORDER BY (bucket DESC) AND gc_grace_seconds = 172800`,
		`CREATE TABLE IF NOT EXISTS channel_bucket_widths (
			channel_id bigint,
			from_message_id bigint,
			width_ms bigint,
			reason text,
			PRIMARY KEY ((channel_id), from_message_id)
		) WITH CLUSTERING ORDER BY (from_message_id DESC)`,
	}},
	{2, "guild state and accounts", []string{
		// Records of guild state are stored as JSON documents (column
		// doc) beside the key columns the queries need: they are read
		// whole, written whole and rarely.
		`CREATE TABLE IF NOT EXISTS users (user_id bigint PRIMARY KEY, doc text)`,
		`CREATE TABLE IF NOT EXISTS usernames (name text PRIMARY KEY, user_id bigint)`,
		`CREATE TABLE IF NOT EXISTS guilds (guild_id bigint PRIMARY KEY, doc text)`,
		`CREATE TABLE IF NOT EXISTS channels (channel_id bigint PRIMARY KEY, guild_id bigint, doc text)`,
		`CREATE TABLE IF NOT EXISTS guild_channels (
			guild_id bigint, channel_id bigint, doc text, PRIMARY KEY ((guild_id), channel_id))`,
		`CREATE TABLE IF NOT EXISTS private_channels (
			user_id bigint, channel_id bigint, PRIMARY KEY ((user_id), channel_id))`,
		`CREATE TABLE IF NOT EXISTS roles (
			guild_id bigint, role_id bigint, doc text, PRIMARY KEY ((guild_id), role_id))`,
		`CREATE TABLE IF NOT EXISTS members (
			guild_id bigint, user_id bigint, doc text, PRIMARY KEY ((guild_id), user_id))`,
		`CREATE TABLE IF NOT EXISTS user_guilds (
			user_id bigint, guild_id bigint, PRIMARY KEY ((user_id), guild_id))`,
		`CREATE TABLE IF NOT EXISTS invites (code text PRIMARY KEY, guild_id bigint, doc text)`,
		`CREATE TABLE IF NOT EXISTS guild_invites (
			guild_id bigint, code text, PRIMARY KEY ((guild_id), code))`,
	}},
	{3, "message embeds and components", []string{
		`ALTER TABLE messages ADD IF NOT EXISTS (embeds text, components text)`,
	}},
	{4, "reactions, pins, bans and audit log", []string{
		// Reactions are partitioned like messages (by a fixed-width
		// bucket of the message id), so a page of history reads its
		// counts from a few partitions.
		`CREATE TABLE IF NOT EXISTS reactions (
			channel_id bigint, bucket bigint, message_id bigint, emoji text, user_id bigint, reacted_at timestamp,
			PRIMARY KEY ((channel_id, bucket), message_id, emoji, user_id)
		) WITH gc_grace_seconds = 172800`,
		`CREATE TABLE IF NOT EXISTS pins (
			channel_id bigint, message_id bigint, pinned_at timestamp, PRIMARY KEY ((channel_id), message_id))`,
		`CREATE TABLE IF NOT EXISTS bans (
			guild_id bigint, user_id bigint, doc text, PRIMARY KEY ((guild_id), user_id))`,
		`CREATE TABLE IF NOT EXISTS audit_log (
			guild_id bigint, entry_id bigint, doc text, PRIMARY KEY ((guild_id), entry_id)
		) WITH CLUSTERING ORDER BY (entry_id DESC) AND default_time_to_live = 3888000`,
	}},
	{5, "webhooks and thread members", []string{
		`ALTER TABLE messages ADD IF NOT EXISTS (webhook_id bigint, webhook_name text, webhook_avatar text)`,
		`CREATE TABLE IF NOT EXISTS webhooks (webhook_id bigint PRIMARY KEY, guild_id bigint, doc text)`,
		`CREATE TABLE IF NOT EXISTS guild_webhooks (
			guild_id bigint, webhook_id bigint, PRIMARY KEY ((guild_id), webhook_id))`,
		`CREATE TABLE IF NOT EXISTS thread_members (
			thread_id bigint, user_id bigint, doc text, PRIMARY KEY ((thread_id), user_id))`,
	}},
	{6, "transactional outbox", []string{
		// Events committed in one logged batch with the message write
		// they describe; relays drain a shard oldest first (outbox.go).
		// A short gc_grace_seconds: a drained row that a missed delete
		// brings back is only relayed again, which consumers dedupe, and
		// the tombstones of drained rows are what a drain reads past; the
		// tombstone compaction options let a single sstable whose cells
		// are mostly tombstones be compacted on its own, so they are
		// purged soon after gc_grace_seconds rather than when size-tiered
		// compaction happens to pick the sstable.
		`CREATE TABLE IF NOT EXISTS outbox (
			shard int, id timeuuid, topic text, key blob, value blob,
			PRIMARY KEY ((shard), id)
		) WITH CLUSTERING ORDER BY (id ASC) AND gc_grace_seconds = 3600
			AND compaction = {'class': 'SizeTieredCompactionStrategy', 'unchecked_tombstone_compaction': 'true',
				'tombstone_threshold': '0.2', 'tombstone_compaction_interval': '3600'}`,
	}},
}

// SchemaVersion is the newest schema version this package knows.
func SchemaVersion() int { return migrations[len(migrations)-1].Version }

// ensureKeyspace creates the keyspace when missing.
func ensureKeyspace(ctx context.Context, s *gocql.Session, cfg Config, log *slog.Logger) error {
	var name string
	err := s.Query(`SELECT keyspace_name FROM system_schema.keyspaces WHERE keyspace_name = ?`, cfg.Keyspace).
		Consistency(gocql.One).ScanContext(ctx, &name)
	if err == nil {
		return nil
	}
	if !errors.Is(err, gocql.ErrNotFound) {
		return wrapErr("look up keyspace", err)
	}
	rf := cfg.ReplicationFactor
	if rf == 0 {
		rf, err = clusterSize(ctx, s)
		if err != nil {
			return err
		}
		rf = min(rf, 3)
	}
	repl := fmt.Sprintf(`{'class': 'SimpleStrategy', 'replication_factor': %d}`, rf)
	if cfg.DataCenter != "" {
		repl = fmt.Sprintf(`{'class': 'NetworkTopologyStrategy', '%s': %d}`,
			strings.ReplaceAll(cfg.DataCenter, "'", "''"), rf)
	}
	log.Info("creating keyspace", "replication", repl)
	if err := s.Query(`CREATE KEYSPACE IF NOT EXISTS ` + cfg.Keyspace + ` WITH replication = ` + repl).
		ExecContext(ctx); err != nil {
		return wrapErr("create keyspace", err)
	}
	return wrapErr("await schema agreement", s.AwaitSchemaAgreement(ctx))
}

// clusterSize counts the nodes the contacted node knows.
func clusterSize(ctx context.Context, s *gocql.Session) (int, error) {
	n := 1
	iter := s.Query(`SELECT peer FROM system.peers`).Consistency(gocql.One).IterContext(ctx)
	var peer any
	for iter.Scan(&peer) {
		n++
	}
	return n, wrapErr("count peers", iter.Close())
}

// tableID derives the UUID a table is created with, so that concurrent
// creators agree.
func tableID(keyspace, table string) string {
	h := sha1.Sum([]byte("concord/" + keyspace + "." + table))
	h[6] = h[6]&0x0f | 0x50 // version 5
	h[8] = h[8]&0x3f | 0x80 // RFC 4122 variant
	u, _ := gocql.UUIDFromBytes(h[:16])
	return u.String()
}

// withTableID adds "WITH ID = ..." to a CREATE TABLE statement.
func withTableID(keyspace, stmt string) string {
	fields := strings.Fields(stmt)
	if len(fields) < 6 || !strings.EqualFold(fields[0], "CREATE") || !strings.EqualFold(fields[1], "TABLE") {
		return stmt
	}
	table := strings.TrimSuffix(fields[5], "(")
	opt := "ID = " + tableID(keyspace, table)
	if i := strings.Index(stmt, ") WITH "); i >= 0 && strings.LastIndex(stmt, ") WITH ") == i {
		return stmt[:i] + ") WITH " + opt + " AND " + stmt[i+len(") WITH "):]
	}
	return stmt + " WITH " + opt
}

const lockVersion = -1

// migrate applies the store's pending migrations under the migration lock.
func migrate(ctx context.Context, s *gocql.Session, keyspace string, log *slog.Logger) error {
	return migrateSet(ctx, s, keyspace, "schema_migrations", migrations, log)
}

// migrateSet applies the pending migrations of ms, recorded in table (which
// also holds the set's lock row), under that lock.
func migrateSet(ctx context.Context, s *gocql.Session, keyspace, table string, ms []Migration, log *slog.Logger) error {
	if !validIdent(table) {
		return fmt.Errorf("%w: migrations table %q", ErrConfig, table)
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	if err := execDDL(ctx, s, keyspace, `CREATE TABLE IF NOT EXISTS `+table+` (
		version int PRIMARY KEY, name text, applied_at timestamp, applied_by text)`); err != nil {
		return err
	}
	host, _ := os.Hostname()
	owner := fmt.Sprintf("%s/%d/%d", host, os.Getpid(), time.Now().UnixNano())
	for {
		applied, err := appliedVersions(ctx, s, table)
		if err != nil {
			return err
		}
		if len(pending(ms, applied)) == 0 {
			return nil
		}
		var holder string
		var v int
		var name string
		var at time.Time
		got, err := s.Query(`INSERT INTO `+table+` (version, name, applied_at, applied_by)
			VALUES (?, 'lock', toTimestamp(now()), ?) IF NOT EXISTS USING TTL 120`, lockVersion, owner).
			ScanCASContext(ctx, &v, &at, &holder, &name)
		if err != nil {
			return wrapErr("take migration lock", err)
		}
		if !got {
			log.Info("waiting for another process to migrate the schema", "table", table, "holder", holder)
			select {
			case <-ctx.Done():
				return fmt.Errorf("cassandra store: wait for migration lock held by %s: %w", holder, ctx.Err())
			case <-time.After(time.Second):
			}
			continue
		}
		err = applyPending(ctx, s, keyspace, table, ms, owner, log)
		if uerr := s.Query(`DELETE FROM `+table+` WHERE version = ? IF applied_by = ?`, lockVersion, owner).
			ExecContext(context.WithoutCancel(ctx)); uerr != nil && err == nil {
			err = wrapErr("release migration lock", uerr)
		}
		return err
	}
}

func appliedVersions(ctx context.Context, s *gocql.Session, table string) (map[int]bool, error) {
	applied := map[int]bool{}
	iter := s.Query(`SELECT version FROM ` + table).IterContext(ctx)
	var v int
	for iter.Scan(&v) {
		applied[v] = true
	}
	return applied, wrapErr("read "+table, iter.Close())
}

func pending(ms []Migration, applied map[int]bool) []Migration {
	var out []Migration
	for _, m := range ms {
		if !applied[m.Version] {
			out = append(out, m)
		}
	}
	return out
}

func applyPending(ctx context.Context, s *gocql.Session, keyspace, table string, ms []Migration, owner string, log *slog.Logger) error {
	applied, err := appliedVersions(ctx, s, table)
	if err != nil {
		return err
	}
	for _, m := range pending(ms, applied) {
		start := time.Now()
		for _, stmt := range m.Stmts {
			if err := execDDL(ctx, s, keyspace, stmt); err != nil {
				return fmt.Errorf("migration %d (%s): %w", m.Version, m.Name, err)
			}
		}
		if err := s.Query(`INSERT INTO `+table+` (version, name, applied_at, applied_by)
			VALUES (?, ?, toTimestamp(now()), ?)`, m.Version, m.Name, owner).ExecContext(ctx); err != nil {
			return wrapErr("record migration", err)
		}
		log.Info("schema migrated", "table", table, "version", m.Version, "name", m.Name,
			"took", time.Since(start).Round(time.Millisecond))
	}
	return nil
}

// execDDL runs one schema statement with a deterministic table id (when
// the server accepts it) and waits for schema agreement.
func execDDL(ctx context.Context, s *gocql.Session, keyspace, stmt string) error {
	withID := withTableID(keyspace, stmt)
	err := s.Query(withID).ExecContext(ctx)
	// A schema change that timed out on the client may still be applied
	// by the coordinator; the statements are IF NOT EXISTS with a table
	// id derived from the name, so sending it again is safe and either
	// applies it or finds it (a busy node can take longer than one
	// request timeout to agree on a schema change).
	for attempt := 1; attempt < 5 && errors.Is(err, gocql.ErrTimeoutNoResponse); attempt++ {
		select {
		case <-ctx.Done():
			return wrapErr("schema: "+firstLine(stmt), ctx.Err())
		case <-time.After(time.Duration(attempt) * time.Second):
		}
		err = s.Query(withID).ExecContext(ctx)
	}
	if err != nil && withID != stmt && strings.Contains(strings.ToLower(err.Error()), "id") {
		err = s.Query(stmt).ExecContext(ctx) // ScyllaDB: no WITH ID
	}
	if err != nil {
		return wrapErr("schema: "+firstLine(stmt), err)
	}
	return wrapErr("await schema agreement", s.AwaitSchemaAgreement(ctx))
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return strings.TrimSpace(s[:i])
	}
	return s
}
