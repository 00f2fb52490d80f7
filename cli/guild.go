package cli

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strconv"
	"time"

	"github.com/spf13/cobra"
	"sigs.k8s.io/controller-runtime/pkg/client"

	concordv1 "github.com/concord-chat/concord/apis/v1alpha1"
	"github.com/concord-chat/concord/operator/fleet"
)

func newGuildCommand(env *Env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "guild",
		Short: "Inspect guilds: placement, load, relays",
	}
	cmd.AddCommand(newGuildGetCommand(env), newGuildTopCommand(env))
	return cmd
}

// GuildInfo is what `guild get` shows.
type GuildInfo struct {
	GuildID     string        `json:"guildID"`
	Placement   string        `json:"placement"`
	Phase       string        `json:"phase,omitempty"`
	Node        string        `json:"node,omitempty"`
	Pod         string        `json:"pod,omitempty"`
	Members     int64         `json:"members"`
	Online      int64         `json:"online"`
	Relays      int32         `json:"relays"`
	RelaysReady int32         `json:"relaysReady"`
	RelayTier   string        `json:"relayTier,omitempty"`
	EventAgeP50 time.Duration `json:"eventAgeP50"`
	EventAgeP99 time.Duration `json:"eventAgeP99"`
	QueueLength int64         `json:"queueLength"`
	VoiceCalls  int64         `json:"voiceCalls"`
}

// GuildGetOptions is `guild get <id>`.
type GuildGetOptions struct {
	*Env
	GuildID string
}

func newGuildGetCommand(env *Env) *cobra.Command {
	o := &GuildGetOptions{Env: env}
	return &cobra.Command{
		Use:   "get <guild-id>",
		Short: "Show a guild's placement, node, members and online, relays, event age p50/p99, queue length and voice calls",
		Example: `  kubectl concord guild get 81384788765712384
  kubectl concord guild get 81384788765712384 -o json`,
		Args: cobra.ExactArgs(1),
		RunE: runOptions(o, func(args []string) { o.GuildID = args[0] }),
	}
}

// Validate checks the guild id and the global flags.
func (o *GuildGetOptions) Validate() error {
	if _, err := strconv.ParseUint(o.GuildID, 10, 64); err != nil {
		return fmt.Errorf("guild id %q is not a snowflake (a decimal number)", o.GuildID)
	}
	return o.Env.Validate()
}

// Run prints the guild.
func (o *GuildGetOptions) Run(ctx context.Context) error {
	cluster, err := o.ClusterName(ctx)
	if err != nil {
		return err
	}
	info := GuildInfo{GuildID: o.GuildID, Placement: "ring"}
	s, err := o.Admin.Guild(ctx, o.Namespace, cluster, o.GuildID)
	if err != nil {
		return fmt.Errorf("%w (is the %s-api Service up? `kubectl get pods -l concord.dev/role=api`)", err, cluster)
	}
	info.Members, info.Online, info.Node, info.Pod = s.Members, s.Online, s.Node, s.Pod
	info.EventAgeP50, info.EventAgeP99, info.QueueLength, info.VoiceCalls = s.EventAgeP50, s.EventAgeP99, s.QueueLength, s.VoiceCalls

	var pls concordv1.GuildPlacementList
	if err := o.Client.List(ctx, &pls, client.InNamespace(o.Namespace)); err != nil {
		return fmt.Errorf("list GuildPlacements: %w", err)
	}
	for _, p := range pls.Items {
		if p.Spec.GuildID == o.GuildID && p.Spec.ClusterRef.Name == cluster {
			info.Placement = "dedicated (" + p.Name + ")"
			info.Phase = string(p.Status.Phase)
			if p.Status.NodeName != "" {
				info.Node = p.Status.NodeName
			}
			if p.Status.PodName != "" {
				info.Pod = p.Status.PodName
			}
		}
	}
	var tiers concordv1.RelayTierList
	if err := o.Client.List(ctx, &tiers, client.InNamespace(o.Namespace)); err != nil {
		return fmt.Errorf("list RelayTiers: %w", err)
	}
	for _, t := range tiers.Items {
		if t.Spec.ClusterRef.Name == cluster && slices.Contains(t.Status.Guilds, o.GuildID) {
			info.RelayTier, info.Relays, info.RelaysReady = t.Name, t.Status.DesiredRelays, t.Status.ReadyRelays
		}
	}
	row := func(k, v string) []string { return []string{k, v} }
	t := table{header: []string{"FIELD", "VALUE"}, rows: [][]string{
		row("GUILD", info.GuildID),
		row("PLACEMENT", info.Placement+phaseSuffix(info.Phase)),
		row("NODE", orDash(info.Node)),
		row("POD", orDash(info.Pod)),
		row("MEMBERS", strconv.FormatInt(info.Members, 10)),
		row("ONLINE", strconv.FormatInt(info.Online, 10)),
		row("RELAYS", fmt.Sprintf("%d/%d%s", info.RelaysReady, info.Relays, tierSuffix(info.RelayTier))),
		row("EVENT AGE P50", ms(info.EventAgeP50)),
		row("EVENT AGE P99", ms(info.EventAgeP99)),
		row("QUEUE", strconv.FormatInt(info.QueueLength, 10)),
		row("VOICE CALLS", strconv.FormatInt(info.VoiceCalls, 10)),
	}}
	return print(o.Out, o.Output, info, t)
}

func phaseSuffix(p string) string {
	if p == "" {
		return ""
	}
	return ", " + p
}

func tierSuffix(t string) string {
	if t == "" {
		return ""
	}
	return " (" + t + ")"
}

// GuildTopOptions is `guild top`.
type GuildTopOptions struct {
	*Env
	WatchFlags
	By    string
	Limit int
}

func newGuildTopCommand(env *Env) *cobra.Command {
	o := &GuildTopOptions{Env: env, By: "event-age", Limit: 20}
	cmd := &cobra.Command{
		Use:   "top",
		Short: "List the busiest guilds by event age p99 or by online sessions",
		Example: `  kubectl concord guild top
  kubectl concord guild top --by online --limit 5 -o wide
  kubectl concord guild top --watch --interval 5s`,
		Args: cobra.NoArgs,
		RunE: runOptions(o, nil),
	}
	o.WatchFlags.add(cmd)
	cmd.Flags().StringVar(&o.By, "by", o.By, "sort key: event-age or online")
	cmd.Flags().IntVar(&o.Limit, "limit", o.Limit, "number of guilds to show (0: all)")
	return cmd
}

// Validate checks --by and --limit.
func (o *GuildTopOptions) Validate() error {
	if o.By != "event-age" && o.By != "online" {
		return fmt.Errorf("--by must be event-age or online, not %q", o.By)
	}
	if o.Limit < 0 {
		return fmt.Errorf("--limit must not be negative")
	}
	if err := o.WatchFlags.validate(); err != nil {
		return err
	}
	return o.Env.Validate()
}

// Run prints the top guilds, refreshing them with --watch.
func (o *GuildTopOptions) Run(ctx context.Context) error {
	cluster, err := o.ClusterName(ctx)
	if err != nil {
		return err
	}
	return o.watch(ctx, o.WatchFlags, "guild top --by "+o.By, func(ctx context.Context, w io.Writer) error {
		return o.render(ctx, w, cluster)
	})
}

// render writes the top guilds of cluster once.
func (o *GuildTopOptions) render(ctx context.Context, w io.Writer, cluster string) error {
	samples, err := o.Admin.Guilds(ctx, o.Namespace, cluster)
	if err != nil {
		return err
	}
	slices.SortStableFunc(samples, func(a, b fleet.GuildSample) int {
		if o.By == "online" {
			return cmpDesc(a.Online, b.Online)
		}
		return cmpDesc(int64(a.EventAgeP99), int64(b.EventAgeP99))
	})
	if o.Limit > 0 && len(samples) > o.Limit {
		samples = samples[:o.Limit]
	}
	t := table{header: []string{"GUILD", "EVENT AGE P99", "EVENT AGE P50", "QUEUE", "ONLINE", "MEMBERS", "NODE"},
		wide: []bool{false, false, true, false, false, true, true}}
	for _, s := range samples {
		t.rows = append(t.rows, []string{s.GuildID, ms(s.EventAgeP99), ms(s.EventAgeP50), strconv.FormatInt(s.QueueLength, 10),
			strconv.FormatInt(s.Online, 10), strconv.FormatInt(s.Members, 10), orDash(s.Node)})
	}
	return print(w, o.Output, samples, t)
}

func cmpDesc(a, b int64) int {
	switch {
	case a > b:
		return -1
	case a < b:
		return 1
	}
	return 0
}
