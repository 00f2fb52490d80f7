package cli

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	concordv1 "github.com/concord-chat/concord/apis/v1alpha1"
)

// Scheme knows the core types and Concord's CRDs.
var Scheme = runtime.NewScheme()

func init() {
	_ = clientgoscheme.AddToScheme(Scheme)
	_ = concordv1.AddToScheme(Scheme)
}

// Env is what every subcommand needs: streams, kubeconfig flags, the chosen
// output format and cluster, and the two clients (tests replace them).
type Env struct {
	genericiooptions.IOStreams
	ConfigFlags *genericclioptions.ConfigFlags
	// Output is table, wide, json or yaml.
	Output string
	// Cluster is the ConcordCluster name (--concord-cluster); empty means the only one in the namespace.
	Cluster string

	// Client reads and writes custom resources and pods.
	Client client.Client
	// Admin reaches the API role's admin endpoint.
	Admin Admin
	// Namespace is resolved from the flags and kubeconfig.
	Namespace string
	// Ticks drives --watch refreshes and Now stamps them; nil uses the
	// real clock (tests set both).
	Ticks Ticks
	Now   func() time.Time
}

// Complete builds the clients from the kubeconfig unless tests set them.
func (e *Env) Complete() error {
	ns, _, err := e.ConfigFlags.ToRawKubeConfigLoader().Namespace()
	if err != nil {
		return fmt.Errorf("resolve namespace: %w", err)
	}
	if e.Namespace == "" {
		e.Namespace = ns
	}
	if e.Client != nil && e.Admin != nil {
		return nil
	}
	cfg, err := e.ConfigFlags.ToRESTConfig()
	if err != nil {
		return fmt.Errorf("load kubeconfig: %w", err)
	}
	if e.Client == nil {
		if e.Client, err = client.New(cfg, client.Options{Scheme: Scheme}); err != nil {
			return fmt.Errorf("create client: %w", err)
		}
	}
	if e.Admin == nil {
		cs, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			return fmt.Errorf("create clientset: %w", err)
		}
		e.Admin = &ProxyAdmin{REST: cs.CoreV1().RESTClient(), Reader: e.Client}
	}
	return nil
}

// Validate checks the global flags.
func (e *Env) Validate() error {
	switch e.Output {
	case "table", "wide", "json", "yaml":
		return nil
	}
	return fmt.Errorf("unknown output %q: use -o table, wide, json or yaml", e.Output)
}

// ClusterName resolves --cluster, or the only ConcordCluster of the namespace.
func (e *Env) ClusterName(ctx context.Context) (string, error) {
	if e.Cluster != "" {
		return e.Cluster, nil
	}
	var list concordv1.ConcordClusterList
	if err := e.Client.List(ctx, &list, client.InNamespace(e.Namespace)); err != nil {
		return "", fmt.Errorf("list ConcordClusters in %s: %w", e.Namespace, err)
	}
	switch len(list.Items) {
	case 0:
		return "", fmt.Errorf("no ConcordCluster in namespace %q: pass -n <namespace> or --concord-cluster", e.Namespace)
	case 1:
		return list.Items[0].Name, nil
	}
	return "", errors.New("several ConcordClusters in the namespace: pass --concord-cluster <name>")
}

// NewRootCommand returns `kubectl concord` with every subcommand.
func NewRootCommand(streams genericiooptions.IOStreams) *cobra.Command {
	env := &Env{IOStreams: streams, ConfigFlags: genericclioptions.NewConfigFlags(true), Output: "table"}
	return newRoot(env)
}

func newRoot(env *Env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "kubectl-concord",
		Short: "Inspect and operate a Concord platform",
		Long: `kubectl concord inspects and operates a Concord platform running under the Concord operator.

Live runtime figures (event age, queue length, online sessions, voice calls) come from
the API role's admin endpoint through the Kubernetes service proxy, with your kubeconfig
credentials; placements, relays, gateway pools and voice regions come from custom
resource status.`,
		Example: `  kubectl concord guild get 81384788765712384
  kubectl concord guild top --by event-age --limit 10 --watch
  kubectl concord gateway list -o wide
  kubectl concord gateway drain users-x7k2p
  kubectl concord voice regions
  kubectl concord live streams --watch
  kubectl concord place 81384788765712384 --dedicated --node-selector concord.dev/pool=dedicated`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	cmd.SetIn(env.In)
	cmd.SetOut(env.Out)
	cmd.SetErr(env.ErrOut)
	env.ConfigFlags.AddFlags(cmd.PersistentFlags())
	cmd.PersistentFlags().StringVarP(&env.Output, "output", "o", env.Output, "output format: table, wide, json or yaml")
	cmd.PersistentFlags().StringVar(&env.Cluster, "concord-cluster", "", "ConcordCluster name (default: the only one in the namespace)")
	cmd.AddCommand(newGuildCommand(env), newGatewayCommand(env), newVoiceCommand(env), newLiveCommand(env), newPlaceCommand(env))
	return cmd
}

// options is a subcommand's Options, shaped like kubectl's own commands:
// Complete fills in from the environment, Validate checks the flags and
// arguments, Run does the work.
type options interface {
	Complete() error
	Validate() error
	Run(ctx context.Context) error
}

// runOptions is the RunE of a subcommand: args, when not nil, takes the
// positional arguments into o (cobra has checked their count); then o is
// completed, validated and run.
func runOptions(o options, args func([]string)) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, a []string) error {
		if args != nil {
			args(a)
		}
		if err := o.Complete(); err != nil {
			return err
		}
		if err := o.Validate(); err != nil {
			return err
		}
		return o.Run(cmd.Context())
	}
}
