package cli

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	concordv1 "github.com/concord-chat/concord/apis/v1alpha1"
)

// PlaceOptions is `place <guild-id> --dedicated`.
type PlaceOptions struct {
	*Env
	GuildID      string
	Dedicated    bool
	Release      bool
	NodeSelector []string
	Tolerations  []string
	Reason       string
}

func newPlaceCommand(env *Env) *cobra.Command {
	o := &PlaceOptions{Env: env}
	cmd := &cobra.Command{
		Use:   "place <guild-id> --dedicated",
		Short: "Pin a guild to a dedicated node (creates a GuildPlacement), or release it",
		Long: `Creates the GuildPlacement guild-<id>: the operator starts a dedicated guild node on
the selected node pool, pins the guild there in the registry (the old actor flushes and
stops, the new one loads from the store, sessions resubscribe) and reports Placed.
--release deletes it and the guild returns to the ring.`,
		Example: `  kubectl concord place 81384788765712384 --dedicated --node-selector concord.dev/pool=dedicated \
      --toleration concord.dev/dedicated
  kubectl concord place 81384788765712384 --release`,
		Args: cobra.ExactArgs(1),
		RunE: runOptions(o, func(args []string) { o.GuildID = args[0] }),
	}
	cmd.Flags().BoolVar(&o.Dedicated, "dedicated", false, "place the guild on a dedicated guild node")
	cmd.Flags().BoolVar(&o.Release, "release", false, "release a dedicated placement (the guild returns to the ring)")
	cmd.Flags().StringSliceVar(&o.NodeSelector, "node-selector", nil, "node label key=value of the dedicated pool (repeatable)")
	cmd.Flags().StringSliceVar(&o.Tolerations, "toleration", nil, "taint key the dedicated node carries, tolerated with Exists/NoSchedule (repeatable)")
	cmd.Flags().StringVar(&o.Reason, "reason", "", "note recorded in the GuildPlacement")
	return cmd
}

// Validate checks the flags.
func (o *PlaceOptions) Validate() error {
	if _, err := strconv.ParseUint(o.GuildID, 10, 64); err != nil {
		return fmt.Errorf("guild id %q is not a snowflake (a decimal number)", o.GuildID)
	}
	if o.Dedicated == o.Release {
		return fmt.Errorf("pass exactly one of --dedicated and --release")
	}
	for _, kv := range o.NodeSelector {
		if !strings.Contains(kv, "=") {
			return fmt.Errorf("--node-selector %q: want key=value", kv)
		}
	}
	return o.Env.Validate()
}

// Run creates or deletes the GuildPlacement.
func (o *PlaceOptions) Run(ctx context.Context) error {
	name := "guild-" + o.GuildID
	if o.Release {
		gp := &concordv1.GuildPlacement{ObjectMeta: metav1.ObjectMeta{Namespace: o.Namespace, Name: name}}
		if err := o.Client.Delete(ctx, gp); err != nil {
			if apierrors.IsNotFound(err) {
				return fmt.Errorf("no GuildPlacement %s: list them with 'kubectl get guildplacements'", name)
			}
			return fmt.Errorf("delete GuildPlacement %s: %w", name, err)
		}
		fmt.Fprintf(o.Out, "guildplacement/%s releasing\n", name)
		return nil
	}
	cluster, err := o.ClusterName(ctx)
	if err != nil {
		return err
	}
	gp := &concordv1.GuildPlacement{
		ObjectMeta: metav1.ObjectMeta{Namespace: o.Namespace, Name: name, Labels: map[string]string{concordv1.LabelPlacedBy: "kubectl-concord"}},
		Spec:       concordv1.GuildPlacementSpec{ClusterRef: concordv1.ClusterReference{Name: cluster}, GuildID: o.GuildID, Reason: o.Reason},
	}
	for _, kv := range o.NodeSelector {
		k, v, _ := strings.Cut(kv, "=")
		if gp.Spec.NodeSelector == nil {
			gp.Spec.NodeSelector = map[string]string{}
		}
		gp.Spec.NodeSelector[k] = v
	}
	for _, key := range o.Tolerations {
		gp.Spec.Tolerations = append(gp.Spec.Tolerations, corev1.Toleration{Key: key, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule})
	}
	if err := o.Client.Create(ctx, gp); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("guild %s is already placed (GuildPlacement %s): see 'kubectl concord guild get %s'", o.GuildID, name, o.GuildID)
		}
		return fmt.Errorf("create GuildPlacement: %w", err)
	}
	fmt.Fprintf(o.Out, "guildplacement/%s created; follow with 'kubectl get guildplacement %s -w'\n", name, name)
	return nil
}
