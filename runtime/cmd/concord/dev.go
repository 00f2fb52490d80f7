package main

import (
	"fmt"
	"net"

	"github.com/spf13/cobra"

	"github.com/concord-chat/concord/runtime/app"
	"github.com/concord-chat/concord/runtime/httpserve"
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
	return cmd
}

// runPlatform starts a platform, prints where it listens and serves until
// the command's context ends (SIGINT/SIGTERM). The listener answers at
// once: while the backends connect (platform.New retries an unreachable
// Cassandra with backoff) an app.Gate serves /healthz 200, /readyz
// 503 and 503 for everything else; then it forwards to the platform.
func runPlatform(cmd *cobra.Command, cfg platform.Config) error {
	ctx := cmd.Context()
	l, err := net.Listen("tcp", cfg.HTTP)
	if err != nil {
		return fmt.Errorf("listen %s: %w", cfg.HTTP, err)
	}
	gate := &app.Gate{}
	srv := httpserve.NewServer(gate, cfg.ServingConfig())
	errc := make(chan error, 1)
	go func() { errc <- httpserve.Serve(srv, l, cfg.ServingConfig()) }()
	p, err := platform.New(ctx, cfg)
	if err != nil {
		srv.Close()
		return err
	}
	defer p.Close()
	gate.Open(p.Handler())
	addr := l.Addr().String()
	out := cmd.OutOrStdout()
	fmt.Fprintf(out, "Concord is listening on http://%s\n", addr)
	fmt.Fprintf(out, "  REST API:  http://%s/api/v10\n", addr)
	fmt.Fprintf(out, "  Gateway:   ws://%s/gateway\n", addr)
	if p.DevToken != "" {
		fmt.Fprintf(out, "  Dev token: %s\n", p.DevToken)
	}
	fmt.Fprintf(out, "  Metrics:   http://%s/metrics\n", addr)
	return p.Run(ctx, srv, errc)
}
