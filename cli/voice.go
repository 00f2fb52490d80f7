package cli

import (
	"context"
	"fmt"
	"strconv"

	"github.com/spf13/cobra"
	"sigs.k8s.io/controller-runtime/pkg/client"

	concordv1 "github.com/concord-chat/concord/apis/v1alpha1"
)

func newVoiceCommand(env *Env) *cobra.Command {
	cmd := &cobra.Command{Use: "voice", Short: "Inspect voice regions"}
	cmd.AddCommand(newVoiceRegionsCommand(env))
	return cmd
}

// VoiceRegionRow is one region in `voice regions`.
type VoiceRegionRow struct {
	Name         string `json:"name"`
	Region       string `json:"region"`
	Servers      int32  `json:"servers"`
	Ready        int32  `json:"ready"`
	Draining     int32  `json:"draining"`
	Desired      int32  `json:"desired"`
	ActiveCalls  int64  `json:"activeCalls"`
	Participants int64  `json:"participants"`
	Capacity     int64  `json:"capacity"`
	CapacityUsed string `json:"capacityUsed"`
	Buffer       string `json:"buffer"`
}

// VoiceRegionsOptions is `voice regions`.
type VoiceRegionsOptions struct{ *Env }

func newVoiceRegionsCommand(env *Env) *cobra.Command {
	o := &VoiceRegionsOptions{Env: env}
	return &cobra.Command{
		Use:     "regions",
		Short:   "List voice regions: servers, ready, draining, active calls, capacity used",
		Example: "  kubectl concord voice regions -o wide",
		Args:    cobra.NoArgs,
		RunE:    runOptions(o, nil),
	}
}

// Run prints the regions.
func (o *VoiceRegionsOptions) Run(ctx context.Context) error {
	var list concordv1.VoiceRegionList
	if err := o.Client.List(ctx, &list, client.InNamespace(o.Namespace)); err != nil {
		return fmt.Errorf("list VoiceRegions: %w", err)
	}
	var rows []VoiceRegionRow
	t := table{header: []string{"NAME", "REGION", "SERVERS", "READY", "DRAINING", "CALLS", "PARTICIPANTS", "CAPACITY", "USED", "BUFFER"},
		wide: []bool{false, false, false, false, false, false, true, true, false, true}}
	for _, v := range list.Items {
		r := VoiceRegionRow{Name: v.Name, Region: v.Spec.Region, Servers: v.Status.Servers, Ready: v.Status.ReadyServers,
			Draining: v.Status.DrainingServers, Desired: v.Status.DesiredServers, ActiveCalls: v.Status.ActiveCalls,
			Participants: v.Status.Participants, Capacity: v.Status.Capacity, CapacityUsed: orDash(v.Status.CapacityUsed),
			Buffer: v.Spec.Buffer.String()}
		rows = append(rows, r)
		t.rows = append(t.rows, []string{r.Name, r.Region, strconv.Itoa(int(r.Servers)), strconv.Itoa(int(r.Ready)),
			strconv.Itoa(int(r.Draining)), strconv.FormatInt(r.ActiveCalls, 10), strconv.FormatInt(r.Participants, 10),
			strconv.FormatInt(r.Capacity, 10), r.CapacityUsed, r.Buffer})
	}
	return print(o.Out, o.Output, rows, t)
}
