// Command concord runs Concord: `concord dev` starts every role in one
// process with embedded backends; `concord serve --roles=...` runs the
// chosen roles as one node of a cluster; `concord egress` is the proxy
// every call to a bot-chosen URL goes through.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := newRootCommand().ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "concord:", err)
		os.Exit(1)
	}
}

func newRootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:           "concord",
		Short:         "Concord: a Discord-compatible real-time communication platform",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newDevCommand(), newServeCommand(), newMigrateCommand(), newEgressCommand())
	return root
}
