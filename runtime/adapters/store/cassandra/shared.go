package cassandra

import (
	"context"

	gocql "github.com/apache/cassandra-gocql-driver/v2"
)

// Sharing the store's connection. Adapters of other ports that keep their
// tables in the same keyspace (runtime/domain/bots/cassandra) use the store's
// session, so one process holds one connection pool with one set of
// credentials and settings, and create their tables with Migrate.

// Session returns the store's driver session, bound to Config.Keyspace at
// Config.Consistency (LOCAL_SERIAL for lightweight transactions). Callers
// must not close it: Store.Close does.
func (s *Store) Session() *gocql.Session { return s.session }

// Migrate applies the pending migrations of ms in the store's keyspace,
// with the same guarantees as the store's own schema (idempotent, safe
// from many processes at once). table names the set's record table, which
// also holds its lock row, for example "bots_schema_migrations"; each set
// needs its own. Errors wrap store.ErrUnavailable when the cluster cannot
// answer.
func (s *Store) Migrate(ctx context.Context, table string, ms []Migration) error {
	return migrateSet(ctx, s.session, s.cfg.Keyspace, table, ms, s.log)
}

// IsUnavailable reports whether a driver error means the cluster could not
// serve the request now (unavailable or overloaded replicas, timeouts, lost
// connections), as opposed to a bad request.
func IsUnavailable(err error) bool { return unavailable(err) }

// Keyspace is the keyspace the store's session is bound to.
func (s *Store) Keyspace() string { return s.cfg.Keyspace }
