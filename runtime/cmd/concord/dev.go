package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/concord-chat/concord/runtime/platform"
)

func newDevCommand() *cobra.Command {
	cfg := platform.DefaultConfig()
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
			return runPlatform(cmd, cfg)
		},
	}
	bindConfigFlags(cmd.Flags(), &cfg, &logFormat, &logLevel)
	bindTracingFlags(cmd.Flags(), &cfg, 0)
	return cmd
}

// runPlatform opens `concord dev` (every role in one process), prints
// where it listens and serves until the command's context ends
// (SIGINT/SIGTERM). The listener answers at once: while the backends
// connect (an unreachable Cassandra is retried with backoff) its Gate
// serves /healthz 200, /readyz 503 and 503 for everything else.
func runPlatform(cmd *cobra.Command, cfg platform.Config) error {
	ctx := cmd.Context()
	p, err := platform.New(ctx, cfg)
	if err != nil {
		return err
	}
	defer p.Close()
	addr := p.HTTPAddr()
	out := cmd.OutOrStdout()
	fmt.Fprintf(out, "Concord is listening on http://%s\n", addr)
	fmt.Fprintf(out, "  REST API:  http://%s/api/v10\n", addr)
	fmt.Fprintf(out, "  Gateway:   ws://%s/gateway\n", addr)
	if p.DevToken != "" {
		fmt.Fprintf(out, "  Dev token: %s\n", p.DevToken)
	}
	fmt.Fprintf(out, "  Metrics:   http://%s/metrics\n", addr)
	return p.Serve(ctx)
}
