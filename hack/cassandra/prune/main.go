// Command prune drops the test keyspaces a Cassandra node has kept longer
// than a test run lasts. Tests create a keyspace each (concord_<suite>_…)
// and drop it at cleanup, but a test killed by a timeout or an interrupted
// run leaves its keyspace behind; every keyspace holds a few dozen tables
// and every table costs the node heap, so left alone they accumulate until
// the small test node runs out of memory in the middle of a run.
//
// A keyspace's age is the age of its directory under the node's data
// directory (the node creates it with the keyspace). Keyspaces younger
// than -older may belong to a run in progress and are kept.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"
)

func main() {
	addr := flag.String("addr", envOr("CONCORD_CASSANDRA", "127.0.0.1:9042"), "CQL address of the node (env CONCORD_CASSANDRA)")
	dataDir := flag.String("data", os.Getenv("CASSANDRA_DATA"), "the node's data directory (its data/ holds one directory per keyspace; env CASSANDRA_DATA)")
	prefix := flag.String("prefix", "concord", "drop only keyspaces whose name starts with this")
	older := flag.Duration("older", 2*time.Hour, "drop only keyspaces older than this")
	dry := flag.Bool("dry-run", false, "list what would be dropped, drop nothing")
	flag.Parse()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	if *dataDir == "" {
		log.Error("prune: -data (or CASSANDRA_DATA) is required: a keyspace's age is read from it")
		os.Exit(2)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	n, err := prune(ctx, log, *addr, filepath.Join(*dataDir, "data"), *prefix, *older, *dry)
	if err != nil {
		log.Error("prune", "err", err)
		os.Exit(1)
	}
	log.Info("prune: done", "dropped", n)
}

func prune(ctx context.Context, log *slog.Logger, addr, dir, prefix string, older time.Duration, dry bool) (int, error) {
	c := gocql.NewCluster(addr)
	c.Timeout = 30 * time.Second
	c.ConnectTimeout = 10 * time.Second
	s, err := c.CreateSession()
	if err != nil {
		return 0, fmt.Errorf("connect %s: %w", addr, err)
	}
	defer s.Close()
	var names []string
	it := s.Query("SELECT keyspace_name FROM system_schema.keyspaces").IterContext(ctx)
	var name string
	for it.Scan(&name) {
		names = append(names, name)
	}
	if err := it.Close(); err != nil {
		return 0, fmt.Errorf("list keyspaces: %w", err)
	}
	var stale []string
	for _, ks := range names {
		if !strings.HasPrefix(ks, prefix) {
			continue
		}
		fi, err := os.Stat(filepath.Join(dir, ks))
		if err != nil || time.Since(fi.ModTime()) < older {
			continue // no directory to date it by, or young enough to be in use
		}
		stale = append(stale, ks)
	}
	log.Info("prune: stale test keyspaces", "count", len(stale), "of", len(names), "older_than", older)
	if dry {
		for _, ks := range stale {
			fmt.Println(ks)
		}
		return 0, nil
	}
	dropped := 0
	for i, ks := range stale {
		// Names come from the node's own schema; quoting keeps any case.
		q := `DROP KEYSPACE IF EXISTS "` + strings.ReplaceAll(ks, `"`, `""`) + `"`
		if err := s.Query(q).ExecContext(ctx); err != nil {
			return dropped, fmt.Errorf("drop %s: %w", ks, err)
		}
		dropped++
		if (i+1)%25 == 0 {
			log.Info("prune: progress", "dropped", dropped, "of", len(stale))
		}
	}
	return dropped, nil
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}
