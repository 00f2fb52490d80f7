package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/concord-chat/concord/runtime/platform"
)

// allRoles are the roles one process can run together.
var allRoles = []string{"gateway", "api", "guild"}

func newServeCommand() *cobra.Command {
	cfg := platform.DefaultConfig()
	var logFormat, logLevel, roles string
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the chosen roles as one node of a Concord cluster",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log, err := newLogger(logFormat, logLevel)
			if err != nil {
				return err
			}
			want := strings.Split(roles, ",")
			if !sameRoles(want, allRoles) {
				return fmt.Errorf("--roles=%s: this build runs the roles %s together only", roles, strings.Join(allRoles, ","))
			}
			cfg.Logger = log
			cfg.DevUser = false
			return runPlatform(cmd, cfg)
		},
	}
	bindPlatformFlags(cmd.Flags(), &cfg, &logFormat, &logLevel)
	cmd.Flags().StringVar(&roles, "roles", strings.Join(allRoles, ","), "comma-separated roles to run (env CONCORD_ROLES)")
	return cmd
}

func sameRoles(a, b []string) bool {
	seen := map[string]bool{}
	for _, r := range a {
		seen[strings.TrimSpace(r)] = true
	}
	for _, r := range b {
		if !seen[r] {
			return false
		}
	}
	return len(seen) == len(b)
}
