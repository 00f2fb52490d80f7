package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/concord-chat/concord/runtime/app"
	"github.com/concord-chat/concord/runtime/config"
)

func newDevCommand() *cobra.Command {
	cfg := config.Default()
	cfg.DevUser = true
	var logFormat, logLevel string
	cmd := &cobra.Command{
		Use:   "dev",
		Short: "Run every role in one process with embedded backends",
		Long: `concord dev runs the REST API, the gateway, guild actors and storage in one
process on one HTTP listener. Data lives in --data-dir; acknowledged writes
survive a restart. On first start it creates a "dev" user and prints its
token and the URLs.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log, err := newLogger(logFormat, logLevel)
			if err != nil {
				return err
			}
			cfg.Logger = log
			cfg.DevUser = true
			if err := followFaultClock(cmd.Context(), cfg); err != nil {
				return err
			}
			return runPlatform(cmd, cfg)
		},
	}
	bindConfigFlags(cmd.Flags(), &cfg, &logFormat, &logLevel)
	bindTracingFlags(cmd.Flags(), &cfg, 0)
	return cmd
}

// runPlatform opens `concord dev` (app.Open with every role of the role
// tables in one process), prints
// where it listens and serves until the command's context ends
// (SIGINT/SIGTERM). The listener answers at once: while the backends
// connect (an unreachable Cassandra is retried with backoff) its Gate
// serves /healthz 200, /readyz 503 and 503 for everything else.
func runPlatform(cmd *cobra.Command, cfg config.Config) error {
	ctx := cmd.Context()
	// Every role of the tables, in this process.
	cfg.Roles = app.DefaultTables().Names()
	p, err := app.Open(ctx, cfg, app.Options{})
	if err != nil {
		return fmt.Errorf("concord dev: %w", err)
	}
	defer p.Close()
	addr := p.HTTPAddr()
	out := cmd.OutOrStdout()
	fmt.Fprintf(out, "Concord is listening on http://%s\n", addr)
	fmt.Fprintf(out, "  REST API:  http://%s/api/v10\n", addr)
	fmt.Fprintf(out, "  Gateway:   ws://%s/gateway\n", addr)
	if tok := p.DevToken(); tok != "" {
		fmt.Fprintf(out, "  Dev token: %s\n", tok)
	}
	fmt.Fprintf(out, "  Metrics:   http://%s/metrics\n", addr)
	if err := p.Serve(ctx); err != nil {
		return fmt.Errorf("concord dev: %w", err)
	}
	return nil
}
