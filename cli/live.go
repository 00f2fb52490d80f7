package cli

import (
	"context"
	"fmt"
	"io"
	"strconv"

	"github.com/spf13/cobra"
)

func newLiveCommand(env *Env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "live",
		Short: "Inspect live comments: streams by viewers",
	}
	cmd.AddCommand(newLiveStreamsCommand(env))
	return cmd
}

// LiveStreamsOptions is `live streams`.
type LiveStreamsOptions struct {
	*Env
	WatchFlags
	Limit int
}

func newLiveStreamsCommand(env *Env) *cobra.Command {
	o := &LiveStreamsOptions{Env: env, Limit: 20}
	cmd := &cobra.Command{
		Use:   "streams",
		Short: "List live streams by viewers (summed over the live gateways), with their gateways and sampled mode",
		Example: `  kubectl concord live streams
  kubectl concord live streams --limit 5 --watch`,
		Args: cobra.NoArgs,
		RunE: runOptions(o, nil),
	}
	cmd.Flags().IntVar(&o.Limit, "limit", o.Limit, "number of streams to show (0: all)")
	o.WatchFlags.add(cmd)
	return cmd
}

// Validate checks --limit, --watch and the global flags.
func (o *LiveStreamsOptions) Validate() error {
	if o.Limit < 0 {
		return fmt.Errorf("--limit must not be negative")
	}
	if err := o.WatchFlags.validate(); err != nil {
		return err
	}
	return o.Env.Validate()
}

// Run prints the streams, refreshing them with --watch.
func (o *LiveStreamsOptions) Run(ctx context.Context) error {
	cluster, err := o.ClusterName(ctx)
	if err != nil {
		return err
	}
	return o.watch(ctx, o.WatchFlags, "live streams", func(ctx context.Context, w io.Writer) error {
		streams, err := o.Admin.LiveStreams(ctx, o.Namespace, cluster, o.Limit)
		if err != nil {
			return fmt.Errorf("%w (does the cluster run live comments? `kubectl get pods -l concord.dev/role=live-api`)", err)
		}
		t := table{header: []string{"STREAM", "VIEWERS", "GATEWAYS", "SAMPLED"}}
		for _, s := range streams {
			t.rows = append(t.rows, []string{s.StreamID, strconv.FormatInt(s.Viewers, 10), strconv.Itoa(s.Gateways), strconv.FormatBool(s.Sampled)})
		}
		return print(w, o.Output, streams, t)
	})
}
