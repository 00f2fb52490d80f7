package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/concord-chat/concord/runtime/adapters/migrate"
	cassandrastore "github.com/concord-chat/concord/runtime/adapters/store/cassandra"
	pebblestore "github.com/concord-chat/concord/runtime/adapters/store/pebble"
)

func newMigrateCommand() *cobra.Command {
	var from, to, checkpoint, logFormat, logLevel string
	var workers, samples int
	cmd := &cobra.Command{
		Use:   "migrate",
		Short: "Copy message history from a Pebble store to Cassandra/ScyllaDB",
		Long: `concord migrate copies every channel's history from --from (pebble:DIR) to
--to (cassandra://host:port/keyspace) in parallel by channel-id ranges, with a
progress bar. It saves progress to --checkpoint and resumes from it when run
again, then verifies by comparing sampled history reads on both sides.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log, err := newLogger(logFormat, logLevel)
			if err != nil {
				return err
			}
			dir, ok := strings.CutPrefix(from, "pebble:")
			if !ok || dir == "" {
				return fmt.Errorf("--from must be pebble:DIR, got %q", from)
			}
			src, err := pebblestore.New(pebblestore.Config{Dir: dir, Logger: log})
			if err != nil {
				return fmt.Errorf("open source: %w", err)
			}
			defer src.Close()
			ccfg, err := cassandrastore.ParseURL(to)
			if err != nil {
				return fmt.Errorf("--to: %w", err)
			}
			ccfg.Logger = log
			ccfg.Narrowing.Disabled = true // a bulk copy is no channel's live rate
			dst, err := cassandrastore.New(cmd.Context(), ccfg)
			if err != nil {
				return fmt.Errorf("open destination: %w", err)
			}
			defer dst.Close()
			rep, err := migrate.Run(cmd.Context(), migrate.Config{
				From: src, To: dst, Workers: workers, Checkpoint: checkpoint, Progress: os.Stderr, Logger: log,
			})
			if err != nil {
				return fmt.Errorf("migrate: %w", err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "copied %+v\n", rep)
			vrep, err := migrate.Verify(cmd.Context(), migrate.VerifyConfig{From: src, To: dst, Samples: samples})
			if err != nil {
				return fmt.Errorf("verify: %w", err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "verified %+v\n", vrep)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&from, "from", "", "source store, pebble:DIR")
	f.StringVar(&to, "to", "", "destination, cassandra://host:port[,host:port]/keyspace")
	f.StringVar(&checkpoint, "checkpoint", "concord-migrate.checkpoint", "progress file; a rerun resumes from it")
	f.IntVar(&workers, "workers", 8, "ranges copied in parallel")
	f.IntVar(&samples, "verify-samples", 100, "channels compared after the copy")
	f.StringVar(&logFormat, "log-format", "text", "log format: text or json")
	f.StringVar(&logLevel, "log-level", "info", "log level")
	return cmd
}
