package cli

import (
	"context"
	"fmt"
	"io"
	"strconv"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	concordv1 "github.com/concord-chat/concord/apis/v1alpha1"
)

func newGatewayCommand(env *Env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "gateway",
		Short: "List gateway pods and drain them",
	}
	cmd.AddCommand(newGatewayListCommand(env), newGatewayDrainCommand(env))
	return cmd
}

// GatewayRow is one gateway pod in `gateway list`.
type GatewayRow struct {
	Pool        string `json:"pool"`
	ClientClass string `json:"clientClass"`
	Pod         string `json:"pod"`
	Ready       bool   `json:"ready"`
	State       string `json:"state"`
	Successor   string `json:"successor,omitempty"`
	Revision    string `json:"revision"`
	Node        string `json:"node,omitempty"`
	IP          string `json:"ip,omitempty"`
	Age         string `json:"age"`
}

// GatewayListOptions is `gateway list`.
type GatewayListOptions struct {
	*Env
	WatchFlags
}

func newGatewayListCommand(env *Env) *cobra.Command {
	o := &GatewayListOptions{Env: env}
	cmd := &cobra.Command{
		Use:     "list",
		Short:   "List gateway pools and their pods, with draining state",
		Example: "  kubectl concord gateway list -o wide\n  kubectl concord gateway list --watch",
		Args:    cobra.NoArgs,
		RunE:    runOptions(o, nil),
	}
	o.WatchFlags.add(cmd)
	return cmd
}

// Validate checks --watch and the global flags.
func (o *GatewayListOptions) Validate() error {
	if err := o.WatchFlags.validate(); err != nil {
		return err
	}
	return o.Env.Validate()
}

// Run prints the gateway pods of every pool in the namespace, refreshing
// them with --watch.
func (o *GatewayListOptions) Run(ctx context.Context) error {
	return o.watch(ctx, o.WatchFlags, "gateway list", o.render)
}

// render writes the gateway pods once.
func (o *GatewayListOptions) render(ctx context.Context, w io.Writer) error {
	var pools concordv1.GatewayPoolList
	if err := o.Client.List(ctx, &pools, client.InNamespace(o.Namespace)); err != nil {
		return fmt.Errorf("list GatewayPools: %w", err)
	}
	var rows []GatewayRow
	for _, p := range pools.Items {
		var pods corev1.PodList
		if err := o.Client.List(ctx, &pods, client.InNamespace(o.Namespace),
			client.MatchingLabels{concordv1.LabelOwner: p.Name, concordv1.LabelRole: concordv1.RoleGateway}); err != nil {
			return fmt.Errorf("list pods of pool %s: %w", p.Name, err)
		}
		for _, pod := range pods.Items {
			r := GatewayRow{Pool: p.Name, ClientClass: string(p.Spec.ClientClass), Pod: pod.Name, State: "serving",
				Revision: pod.Labels[concordv1.LabelRevision], Node: pod.Spec.NodeName, IP: pod.Status.PodIP,
				Age: age(pod.CreationTimestamp.Time)}
			for _, c := range pod.Status.Conditions {
				if c.Type == corev1.PodReady {
					r.Ready = c.Status == corev1.ConditionTrue
				}
			}
			if _, ok := pod.Annotations[concordv1.AnnotationDraining]; ok {
				r.State, r.Successor = "draining", pod.Annotations[concordv1.AnnotationDrainSuccessor]
			} else if _, ok := pod.Annotations[concordv1.AnnotationDrainRequested]; ok {
				r.State = "drain requested"
			}
			if r.Revision != p.Status.CurrentRevision && r.State == "serving" {
				r.State = "serving (outdated)"
			}
			rows = append(rows, r)
		}
	}
	t := table{header: []string{"POOL", "CLASS", "POD", "READY", "STATE", "SUCCESSOR", "REVISION", "NODE", "IP", "AGE"},
		wide: []bool{false, false, false, false, false, false, true, true, true, false}}
	for _, r := range rows {
		t.rows = append(t.rows, []string{r.Pool, r.ClientClass, r.Pod, strconv.FormatBool(r.Ready), r.State,
			orDash(r.Successor), orDash(r.Revision), orDash(r.Node), orDash(r.IP), r.Age})
	}
	return print(w, o.Output, rows, t)
}

// GatewayDrainOptions is `gateway drain <pod>`.
type GatewayDrainOptions struct {
	*Env
	Pod string
}

func newGatewayDrainCommand(env *Env) *cobra.Command {
	o := &GatewayDrainOptions{Env: env}
	return &cobra.Command{
		Use:   "drain <pod>",
		Short: "Ask the operator to drain a gateway pod (sessions move to a successor, clients resume there)",
		Long: `Marks the pod with the concord.dev/drain-requested annotation. The GatewayPool
controller then drains it like a scale-down: readiness off, registry mark, sessions and
replay buffers handed to a successor, op 7 to clients, deletion; a replacement pod is
created so the pool keeps its size. Follow it with 'kubectl concord gateway list'.`,
		Example: "  kubectl concord gateway drain users-x7k2p",
		Args:    cobra.ExactArgs(1),
		RunE:    runOptions(o, func(args []string) { o.Pod = args[0] }),
	}
}

// Run annotates the pod.
func (o *GatewayDrainOptions) Run(ctx context.Context) error {
	var pod corev1.Pod
	if err := o.Client.Get(ctx, client.ObjectKey{Namespace: o.Namespace, Name: o.Pod}, &pod); err != nil {
		return fmt.Errorf("get pod %s/%s: %w", o.Namespace, o.Pod, err)
	}
	if pod.Labels[concordv1.LabelRole] != concordv1.RoleGateway {
		return fmt.Errorf("pod %s is not a Concord gateway (label %s=%s): list them with 'kubectl concord gateway list'",
			o.Pod, concordv1.LabelRole, concordv1.RoleGateway)
	}
	if _, ok := pod.Annotations[concordv1.AnnotationDraining]; ok {
		fmt.Fprintf(o.Out, "pod/%s is already draining\n", o.Pod)
		return nil
	}
	patch := client.MergeFrom(pod.DeepCopy())
	if pod.Annotations == nil {
		pod.Annotations = map[string]string{}
	}
	pod.Annotations[concordv1.AnnotationDrainRequested] = "kubectl-concord"
	if err := o.Client.Patch(ctx, &pod, patch); err != nil {
		return fmt.Errorf("annotate pod %s: %w", o.Pod, err)
	}
	fmt.Fprintf(o.Out, "pod/%s drain requested\n", o.Pod)
	return nil
}
