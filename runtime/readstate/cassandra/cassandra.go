// Package cassandra is the production read-state table: readstate.Store on
// Apache Cassandra or ScyllaDB through the Apache Cassandra Go driver.
//
// Layout:
//
//	read_states((user_id), channel_id) last_read_id, mention_count, flags,
//	    version, next_offset
//	read_state_channels((channel_id)) everyone, seen (blobs), next_offset
//
// A user's records are one partition, so READY loads them with one query and
// a flush writes each user's changed records in one single-partition
// (atomic, unlogged) batch. Writes are upserts of whole rows; the read-state
// service makes replays harmless (readstate.Record.NextOffset), so
// partitions need not be written together.
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

	"github.com/concord-chat/concord/runtime/readstate"
	"github.com/concord-chat/concord/runtime/snowflake"
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
	// Default 1. An existing keyspace is never altered.
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
}

var _ readstate.Store = (*Store)(nil)

// New connects, creates the keyspace and tables if missing, and returns the
// store.
func New(ctx context.Context, cfg Config) (*Store, error) {
	if len(cfg.Hosts) == 0 {
		cfg.Hosts = []string{"127.0.0.1:9042"}
	}
	if cfg.Keyspace == "" {
		cfg.Keyspace = "concord"
	}
	if cfg.Consistency == "" {
		cfg.Consistency = "LOCAL_QUORUM"
	}
	if cfg.ReplicationFactor <= 0 {
		cfg.ReplicationFactor = 1
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
		return nil, fmt.Errorf("readstate cassandra: invalid keyspace %q", cfg.Keyspace)
	}
	cons, err := gocql.ParseConsistencyWrapper(cfg.Consistency)
	if err != nil {
		return nil, fmt.Errorf("readstate cassandra: consistency %q", cfg.Consistency)
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
	stmts := []string{
		fmt.Sprintf(`CREATE KEYSPACE IF NOT EXISTS %s WITH replication = {'class': 'SimpleStrategy', 'replication_factor': %d}`,
			cfg.Keyspace, cfg.ReplicationFactor),
		`CREATE TABLE IF NOT EXISTS ` + cfg.Keyspace + `.read_states (
			user_id bigint, channel_id bigint, last_read_id bigint, mention_count int,
			flags bigint, version bigint, next_offset bigint,
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
			return nil, wrap("create schema", err)
		}
	}
	if err := boot.AwaitSchemaAgreement(ctx); err != nil {
		return nil, wrap("await schema agreement", err)
	}
	s, err := cluster(cfg.Keyspace).CreateSession()
	if err != nil {
		return nil, wrap("connect to keyspace", err)
	}
	return &Store{cfg: cfg, s: s}, nil
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
	it := st.s.Query(`SELECT channel_id, last_read_id, mention_count, flags, version, next_offset
		FROM read_states WHERE user_id = ?`, int64(user)).IterContext(ctx)
	var (
		out                        []readstate.Record
		ch, last, flags, ver, next int64
		count                      int
	)
	for it.Scan(&ch, &last, &count, &flags, &ver, &next) {
		out = append(out, readstate.Record{UserID: user, ChannelID: snowflake.ID(ch), LastReadID: snowflake.ID(last),
			MentionCount: int32(count), Flags: uint32(flags), Version: ver, NextOffset: next})
	}
	if err := it.Close(); err != nil {
		return nil, wrap("load user", err)
	}
	return out, nil
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

// Write implements readstate.Store: one unlogged single-partition batch per
// user and one insert per channel, Concurrency at a time. On error some
// partitions may be written; the caller retries the whole Write.
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
		wg    sync.WaitGroup
		sem   = make(chan struct{}, st.cfg.Concurrency)
		mu    sync.Mutex
		first error
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
			b := st.s.Batch(gocql.UnloggedBatch)
			for _, r := range recs {
				b.Query(`INSERT INTO read_states (user_id, channel_id, last_read_id, mention_count, flags, version, next_offset)
					VALUES (?, ?, ?, ?, ?, ?, ?)`, int64(r.UserID), int64(r.ChannelID), int64(r.LastReadID),
					int(r.MentionCount), int64(r.Flags), r.Version, r.NextOffset)
			}
			return wrap("write user", b.ExecContext(ctx))
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
	return first
}

// Close implements readstate.Store.
func (st *Store) Close() error {
	st.s.Close()
	return nil
}

// String names the store for logs.
func (st *Store) String() string {
	return "cassandra(" + strings.Join(st.cfg.Hosts, ",") + "/" + st.cfg.Keyspace + ")"
}
