// Package cassandra is the production read-state table: readstate.Store on
// Apache Cassandra or ScyllaDB through the Apache Cassandra Go driver.
//
// Layout:
//
//	read_states((user_id), channel_id) owner_epoch (static), last_read_id,
//	    mention_count, mention_ids (blob), flags, version, next_offset
//	read_state_channels((channel_id)) everyone, seen (blobs), next_offset
//
// A user's records are one partition, so READY loads them with one query and
// a write puts each user's changed records in one single-partition batch.
// User writes are fenced: the batch is a lightweight transaction whose
// condition is the partition's static owner_epoch (IF owner_epoch = the
// writer's epoch), and Claim raises owner_epoch by compare-and-set, so a
// replica whose claim was overtaken writes nothing. Writes are otherwise
// whole-row upserts; the read-state service makes replays harmless
// (readstate.Record.NextOffset), so partitions need not be written
// together.
package cassandra

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"

	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/readstate"
)

// Config configures a Store.
type Config struct {
	// Hosts are contact points, "host:port". Default ["127.0.0.1:9042"].
	Hosts []string
	// Keyspace holds the tables; created when missing. Default "concord".
	Keyspace string
	// Consistency of reads and writes. Default "LOCAL_QUORUM".
	Consistency string
	// ReplicationFactor of a keyspace this store creates (SimpleStrategy).
	// Default: the number of nodes the contacted node knows, at most 3 (as
	// runtime/adapters/store/cassandra decides, since both share a keyspace and
	// whichever starts first creates it). An existing keyspace is never
	// altered.
	ReplicationFactor int
	// Timeout bounds each request. Default 10s.
	Timeout time.Duration
	// Concurrency is how many partitions a Write writes at once. Default 16.
	Concurrency int
	// Username and Password log in with the driver's PasswordAuthenticator
	// when Username is set. Default none.
	Username, Password string
	// Logger receives diagnostics. Default slog.Default().
	Logger *slog.Logger
}

// Store is readstate.Store on Cassandra.
type Store struct {
	cfg Config
	s   *gocql.Session
	// shared: s is the caller's (NewShared), left open by Close.
	shared bool
}

var _ readstate.Store = (*Store)(nil)

// New connects, creates the keyspace and tables if missing, and returns the
// store.
func New(ctx context.Context, cfg Config) (*Store, error) {
	cfg, cons, err := complete(cfg)
	if err != nil {
		return nil, err
	}
	cluster := func(keyspace string) *gocql.ClusterConfig {
		c := gocql.NewCluster(cfg.Hosts...)
		c.Keyspace = keyspace
		c.Consistency = cons
		c.Timeout = cfg.Timeout
		c.ConnectTimeout = cfg.Timeout
		if cfg.Username != "" {
			c.Authenticator = gocql.PasswordAuthenticator{Username: cfg.Username, Password: cfg.Password}
		}
		c.PoolConfig.HostSelectionPolicy = gocql.TokenAwareHostPolicy(gocql.RoundRobinHostPolicy())
		return c
	}
	boot, err := cluster("").CreateSession()
	if err != nil {
		return nil, wrap("connect", err)
	}
	defer boot.Close()
	if err := createSchema(ctx, boot, cfg); err != nil {
		return nil, err
	}
	s, err := cluster(cfg.Keyspace).CreateSession()
	if err != nil {
		return nil, wrap("connect to keyspace", err)
	}
	return &Store{cfg: cfg, s: s}, nil
}

// NewShared returns the store on a session the caller opened and keeps
// (the chat store's, whose keyspace is cfg.Keyspace), creating the tables
// if missing: one Cassandra session per process. Close leaves the session
// open. cfg's Hosts, Consistency, Timeout and credentials are the
// session's own.
func NewShared(ctx context.Context, cfg Config, s *gocql.Session) (*Store, error) {
	cfg, _, err := complete(cfg)
	if err != nil {
		return nil, err
	}
	if err := createSchema(ctx, s, cfg); err != nil {
		return nil, err
	}
	return &Store{cfg: cfg, s: s, shared: true}, nil
}

// complete fills cfg's defaults and checks it.
func complete(cfg Config) (Config, gocql.Consistency, error) {
	if len(cfg.Hosts) == 0 {
		cfg.Hosts = []string{"127.0.0.1:9042"}
	}
	if cfg.Keyspace == "" {
		cfg.Keyspace = "concord"
	}
	if cfg.Consistency == "" {
		cfg.Consistency = "LOCAL_QUORUM"
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 10 * time.Second
	}
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = 16
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if !validIdent(cfg.Keyspace) {
		return cfg, 0, fmt.Errorf("readstate cassandra: invalid keyspace %q", cfg.Keyspace)
	}
	cons, err := gocql.ParseConsistencyWrapper(cfg.Consistency)
	if err != nil {
		return cfg, 0, fmt.Errorf("readstate cassandra: consistency %q", cfg.Consistency)
	}
	return cfg, cons, nil
}

// createSchema creates the keyspace and tables if missing, on boot.
func createSchema(ctx context.Context, boot *gocql.Session, cfg Config) error {
	if cfg.ReplicationFactor <= 0 {
		// A fixed 1 here once made the shared keyspace unreplicated on a
		// three-node ring whenever a read-state node created it first.
		n, err := clusterSize(ctx, boot)
		if err != nil {
			return err
		}
		cfg.ReplicationFactor = min(n, 3)
	}
	stmts := []string{
		fmt.Sprintf(`CREATE KEYSPACE IF NOT EXISTS %s WITH replication = {'class': 'SimpleStrategy', 'replication_factor': %d}`,
			cfg.Keyspace, cfg.ReplicationFactor),
		`CREATE TABLE IF NOT EXISTS ` + cfg.Keyspace + `.read_states (
			user_id bigint, channel_id bigint, owner_epoch bigint static, last_read_id bigint, mention_count int,
			mention_ids blob, flags bigint, version bigint, next_offset bigint,
			PRIMARY KEY ((user_id), channel_id))`,
		`CREATE TABLE IF NOT EXISTS ` + cfg.Keyspace + `.read_state_channels (
			channel_id bigint PRIMARY KEY, everyone blob, seen blob, next_offset bigint)`,
	}
	// The statements are idempotent: a timeout (a loaded node, or
	// another replica creating the same tables) is retried a few times.
	for _, q := range stmts {
		var err error
		for attempt := range 5 {
			if err = boot.Query(q).ExecContext(ctx); err == nil || ctx.Err() != nil {
				break
			}
			select {
			case <-ctx.Done():
			case <-time.After(time.Duration(attempt+1) * time.Second):
			}
		}
		if err != nil {
			return wrap("create schema", err)
		}
	}
	if err := addColumns(ctx, boot, cfg.Keyspace); err != nil {
		return err
	}
	if err := boot.AwaitSchemaAgreement(ctx); err != nil {
		return wrap("await schema agreement", err)
	}
	return nil
}

// addColumns adds the columns a table created by an older version lacks.
func addColumns(ctx context.Context, s *gocql.Session, keyspace string) error {
	have := map[string]bool{}
	it := s.Query(`SELECT column_name FROM system_schema.columns WHERE keyspace_name = ? AND table_name = 'read_states'`,
		keyspace).IterContext(ctx)
	var name string
	for it.Scan(&name) {
		have[name] = true
	}
	if err := it.Close(); err != nil {
		return wrap("read schema", err)
	}
	for _, c := range []struct{ name, def string }{{"owner_epoch", "bigint static"}, {"mention_ids", "blob"}} {
		if have[c.name] {
			continue
		}
		err := s.Query(`ALTER TABLE ` + keyspace + `.read_states ADD ` + c.name + ` ` + c.def).ExecContext(ctx)
		// Another replica may have added it first.
		if err != nil && !strings.Contains(err.Error(), "already exist") {
			return wrap("add column "+c.name, err)
		}
	}
	return nil
}

func validIdent(s string) bool {
	if s == "" || len(s) > 48 {
		return false
	}
	for i, r := range s {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r == '_' || r >= '0' && r <= '9' && i > 0
		if !ok {
			return false
		}
	}
	return true
}

// wrap turns a driver error into a store error carrying only its text.
func wrap(what string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%w: cassandra %s: %s", readstate.ErrStore, what, err.Error())
}

// LoadUser implements readstate.Store.
func (st *Store) LoadUser(ctx context.Context, user snowflake.ID) ([]readstate.Record, error) {
	it := st.s.Query(`SELECT channel_id, owner_epoch, last_read_id, mention_count, mention_ids, flags, version, next_offset
		FROM read_states WHERE user_id = ?`, int64(user)).IterContext(ctx)
	var (
		out                               []readstate.Record
		ch, epoch, last, flags, ver, next int64
		count                             int
		ids                               []byte
	)
	for it.Scan(&ch, &epoch, &last, &count, &ids, &flags, &ver, &next) {
		if ch == 0 {
			continue // a claimed partition without records: its static row
		}
		out = append(out, readstate.Record{UserID: user, ChannelID: snowflake.ID(ch), LastReadID: snowflake.ID(last),
			MentionCount: int32(count), Mentions: decodeIDs(ids), Flags: uint32(flags), Version: ver, NextOffset: next, Epoch: epoch})
	}
	if err := it.Close(); err != nil {
		return nil, wrap("load user", err)
	}
	return out, nil
}

func decodeIDs(b []byte) []snowflake.ID {
	var out []snowflake.ID
	for ; len(b) >= 8; b = b[8:] {
		out = append(out, snowflake.ID(binary.BigEndian.Uint64(b)))
	}
	return out
}

func encodeIDs(ids []snowflake.ID) []byte {
	b := make([]byte, 0, 8*len(ids))
	for _, id := range ids {
		b = binary.BigEndian.AppendUint64(b, uint64(id))
	}
	return b
}

// Claim implements readstate.Store: compare-and-set of the partition's
// owner_epoch, from the value read back by each attempt that lost.
func (st *Store) Claim(ctx context.Context, user snowflake.ID, epoch int64) (int64, error) {
	if epoch <= 0 {
		return 0, fmt.Errorf("readstate cassandra: claim at epoch %d", epoch)
	}
	var cur int64 // 0: null, never claimed
	for range 16 {
		q := st.s.Query(`UPDATE read_states SET owner_epoch = ? WHERE user_id = ? IF owner_epoch = ?`, epoch, int64(user), cur)
		if cur == 0 {
			q = st.s.Query(`UPDATE read_states SET owner_epoch = ? WHERE user_id = ? IF owner_epoch = null`, epoch, int64(user))
		}
		var held *int64
		applied, err := q.SerialConsistency(gocql.LocalSerial).ScanCASContext(ctx, &held)
		if err != nil {
			return 0, wrap("claim user", err)
		}
		if applied {
			return cur, nil
		}
		next := int64(0)
		if held != nil {
			next = *held
		}
		switch {
		case next > epoch:
			return next, fmt.Errorf("%w: user %d held at %d, claimed at %d", readstate.ErrFenced, user, next, epoch)
		case next == epoch:
			return next, nil
		}
		cur = next
	}
	return 0, fmt.Errorf("%w: cassandra claim user %d: the epoch kept changing", readstate.ErrStore, user)
}

// LoadChannel implements readstate.Store.
func (st *Store) LoadChannel(ctx context.Context, channel snowflake.ID) (readstate.ChannelRecord, bool, error) {
	var (
		everyone, seen []byte
		next           int64
	)
	err := st.s.Query(`SELECT everyone, seen, next_offset FROM read_state_channels WHERE channel_id = ?`,
		int64(channel)).ScanContext(ctx, &everyone, &seen, &next)
	if errors.Is(err, gocql.ErrNotFound) {
		return readstate.ChannelRecord{}, false, nil
	}
	if err != nil {
		return readstate.ChannelRecord{}, false, wrap("load channel", err)
	}
	r := readstate.ChannelRecord{ChannelID: channel, NextOffset: next}
	for b := everyone; len(b) >= 16; b = b[16:] {
		r.Everyone = append(r.Everyone, readstate.ChannelMention{
			MessageID: snowflake.ID(binary.BigEndian.Uint64(b)), AuthorID: snowflake.ID(binary.BigEndian.Uint64(b[8:]))})
	}
	for b := seen; len(b) >= 16; b = b[16:] {
		r.Seen = append(r.Seen, readstate.SeenMessage{
			MessageID: snowflake.ID(binary.BigEndian.Uint64(b)), Offset: int64(binary.BigEndian.Uint64(b[8:]))})
	}
	return r, true, nil
}

// Write implements readstate.Store: one conditional single-partition batch
// per user (applied only while the partition's owner_epoch is the
// records' Epoch) and one insert per channel, Concurrency at a time. On
// error some partitions may be written; the caller retries the whole
// Write.
func (st *Store) Write(ctx context.Context, users []readstate.Record, channels []readstate.ChannelRecord) error {
	byUser := map[snowflake.ID][]readstate.Record{}
	var order []snowflake.ID
	for _, r := range users {
		if _, ok := byUser[r.UserID]; !ok {
			order = append(order, r.UserID)
		}
		byUser[r.UserID] = append(byUser[r.UserID], r)
	}
	var (
		wg     sync.WaitGroup
		sem    = make(chan struct{}, st.cfg.Concurrency)
		mu     sync.Mutex
		first  error
		fenced []snowflake.ID
	)
	do := func(f func() error) {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			if err := f(); err != nil {
				mu.Lock()
				if first == nil {
					first = err
				}
				mu.Unlock()
			}
		}()
	}
	for _, u := range order {
		recs := byUser[u]
		do(func() error {
			b := st.s.Batch(gocql.UnloggedBatch).SerialConsistency(gocql.LocalSerial)
			epoch := recs[0].Epoch
			cond, args := `IF owner_epoch = ?`, []any{epoch}
			if epoch == 0 {
				cond, args = `IF owner_epoch = null`, nil
			}
			for _, r := range recs {
				b.Query(`UPDATE read_states SET last_read_id = ?, mention_count = ?, mention_ids = ?, flags = ?, version = ?, next_offset = ?
					WHERE user_id = ? AND channel_id = ? `+cond, append([]any{int64(r.LastReadID), int(r.MentionCount), encodeIDs(r.Mentions),
					int64(r.Flags), r.Version, r.NextOffset, int64(r.UserID), int64(r.ChannelID)}, args...)...)
			}
			// Not applied, the answer carries the rows the condition
			// read; only whether it applied matters.
			applied, iter, err := b.MapExecCASContext(ctx, map[string]any{})
			if iter != nil {
				iter.Close()
			}
			if err != nil {
				return wrap("write user", err)
			}
			if !applied {
				mu.Lock()
				fenced = append(fenced, u)
				mu.Unlock()
			}
			return nil
		})
	}
	for _, c := range channels {
		do(func() error {
			everyone := make([]byte, 0, 16*len(c.Everyone))
			for _, m := range c.Everyone {
				everyone = binary.BigEndian.AppendUint64(everyone, uint64(m.MessageID))
				everyone = binary.BigEndian.AppendUint64(everyone, uint64(m.AuthorID))
			}
			seen := make([]byte, 0, 16*len(c.Seen))
			for _, m := range c.Seen {
				seen = binary.BigEndian.AppendUint64(seen, uint64(m.MessageID))
				seen = binary.BigEndian.AppendUint64(seen, uint64(m.Offset))
			}
			return wrap("write channel", st.s.Query(`INSERT INTO read_state_channels (channel_id, everyone, seen, next_offset)
				VALUES (?, ?, ?, ?)`, int64(c.ChannelID), everyone, seen, c.NextOffset).ExecContext(ctx))
		})
	}
	wg.Wait()
	if first == nil && len(fenced) > 0 {
		return &readstate.FencedError{Users: fenced}
	}
	return first
}

// Close implements readstate.Store.
func (st *Store) Close() error {
	if !st.shared {
		st.s.Close()
	}
	return nil
}

// String names the store for logs.
func (st *Store) String() string {
	return "cassandra(" + strings.Join(st.cfg.Hosts, ",") + "/" + st.cfg.Keyspace + ")"
}

// clusterSize counts the nodes the contacted node knows: itself and its
// peers.
func clusterSize(ctx context.Context, s *gocql.Session) (int, error) {
	n := 1
	iter := s.Query(`SELECT peer FROM system.peers`).Consistency(gocql.One).IterContext(ctx)
	var peer any
	for iter.Scan(&peer) {
		n++
	}
	if err := iter.Close(); err != nil {
		return 0, wrap("count peers", err)
	}
	return n, nil
}
