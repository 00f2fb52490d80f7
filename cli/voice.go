package cli

import (
	"context"
	"fmt"
	"io"
	"strconv"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	concordv1 "github.com/concord-chat/concord/apis/v1alpha1"
)

func newVoiceCommand(env *Env) *cobra.Command {
	cmd := &cobra.Command{Use: "voice", Short: "Inspect voice regions"}
	cmd.AddCommand(newVoiceRegionsCommand(env), newVoiceServersCommand(env))
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
	// Status is "Degraded: <reason>" when the region is degraded (invalid
	// ICE settings, a missing Secret, no cluster), else "OK".
	Status string `json:"status"`
	// Address is the public address mode, with the port range and the
	// endpoint host name when the spec sets them.
	Address string `json:"address"`
	// ICE summarises spec.ice: the server count and how TURN clients
	// authenticate (shared secret, static user, none).
	ICE string `json:"ice"`
}

// regionStatus is "OK" or "Degraded: <reason>".
func regionStatus(v concordv1.VoiceRegion) string {
	if c := meta.FindStatusCondition(v.Status.Conditions, concordv1.ConditionDegraded); c != nil && c.Status == metav1.ConditionTrue {
		return "Degraded: " + c.Reason
	}
	return "OK"
}

// regionAddress is the public address mode and host name.
func regionAddress(v concordv1.VoiceRegion) string {
	mode := string(v.Spec.PublicAddress)
	if mode == "" {
		mode = string(concordv1.PublicAddressNodeExternalIP)
	}
	if r := v.Spec.PortRange; r != nil {
		mode += fmt.Sprintf(" ports %d-%d", r.Min, r.Max)
	}
	if v.Spec.PublicHost != "" {
		return mode + " (" + v.Spec.PublicHost + ")"
	}
	return mode
}

// regionICE summarises a region's STUN/TURN settings; the deprecated
// annotations show as such.
func regionICE(v concordv1.VoiceRegion) string {
	ice := v.Spec.ICE
	if ice == nil {
		if v.Annotations["voice.concord.dev/ice-servers"] != "" {
			return "annotations (deprecated)"
		}
		return "-"
	}
	auth := "no TURN auth"
	switch {
	case ice.SharedSecret != nil:
		auth = "shared secret " + ice.SharedSecret.Name
	case ice.Username != nil:
		auth = "static user " + ice.Username.Name
	}
	return fmt.Sprintf("%d servers, %s", len(ice.Servers), auth)
}

// VoiceRegionsOptions is `voice regions`.
type VoiceRegionsOptions struct {
	*Env
	WatchFlags
}

func newVoiceRegionsCommand(env *Env) *cobra.Command {
	o := &VoiceRegionsOptions{Env: env}
	cmd := &cobra.Command{
		Use:     "regions",
		Short:   "List voice regions: servers, ready, draining, active calls, capacity used",
		Example: "  kubectl concord voice regions -o wide\n  kubectl concord voice regions --watch",
		Args:    cobra.NoArgs,
		RunE:    runOptions(o, nil),
	}
	o.WatchFlags.add(cmd)
	return cmd
}

// Validate checks --watch and the global flags.
func (o *VoiceRegionsOptions) Validate() error {
	if err := o.WatchFlags.validate(); err != nil {
		return err
	}
	return o.Env.Validate()
}

// Run prints the regions, refreshing them with --watch.
func (o *VoiceRegionsOptions) Run(ctx context.Context) error {
	return o.watch(ctx, o.WatchFlags, "voice regions", o.render)
}

// render writes the regions once.
func (o *VoiceRegionsOptions) render(ctx context.Context, w io.Writer) error {
	var list concordv1.VoiceRegionList
	if err := o.Client.List(ctx, &list, client.InNamespace(o.Namespace)); err != nil {
		return fmt.Errorf("list VoiceRegions: %w", err)
	}
	var rows []VoiceRegionRow
	t := table{header: []string{"NAME", "REGION", "SERVERS", "READY", "DRAINING", "CALLS", "PARTICIPANTS", "CAPACITY", "USED", "BUFFER", "STATUS", "ADDRESS", "ICE"},
		wide: []bool{false, false, false, false, false, false, true, true, false, true, false, true, true}}
	for _, v := range list.Items {
		r := VoiceRegionRow{Name: v.Name, Region: v.Spec.Region, Servers: v.Status.Servers, Ready: v.Status.ReadyServers,
			Draining: v.Status.DrainingServers, Desired: v.Status.DesiredServers, ActiveCalls: v.Status.ActiveCalls,
			Participants: v.Status.Participants, Capacity: v.Status.Capacity, CapacityUsed: orDash(v.Status.CapacityUsed),
			Buffer: v.Spec.Buffer.String(), Status: regionStatus(v), Address: regionAddress(v), ICE: regionICE(v)}
		rows = append(rows, r)
		t.rows = append(t.rows, []string{r.Name, r.Region, strconv.Itoa(int(r.Servers)), strconv.Itoa(int(r.Ready)),
			strconv.Itoa(int(r.Draining)), strconv.FormatInt(r.ActiveCalls, 10), strconv.FormatInt(r.Participants, 10),
			strconv.FormatInt(r.Capacity, 10), r.CapacityUsed, r.Buffer, r.Status, r.Address, r.ICE})
	}
	return print(w, o.Output, rows, t)
}

// VoiceServerRow is one SFU in `voice servers`.
type VoiceServerRow struct {
	Name             string `json:"name"`
	VoiceRegion      string `json:"voiceRegion"`
	Region           string `json:"region"`
	State            string `json:"state"`
	Calls            int64  `json:"calls"`
	Participants     int64  `json:"participants"`
	Load             string `json:"load"`
	PacketsForwarded int64  `json:"packetsForwarded"`
	PacketLoss       string `json:"packetLoss"`
	Jitter           string `json:"jitter"`
	RTT              string `json:"rtt"`
	Endpoint         string `json:"endpoint"`
}

// VoiceServersOptions is `voice servers [region]`.
type VoiceServersOptions struct {
	*Env
	// Region filters by VoiceRegion name or spec.region.
	Region string
}

func newVoiceServersCommand(env *Env) *cobra.Command {
	o := &VoiceServersOptions{Env: env}
	return &cobra.Command{
		Use:     "servers [region]",
		Aliases: []string{"list"},
		Short:   "List SFU servers with their state, calls, participants, load, packet loss, jitter and RTT, as the VoiceRegions report them",
		Example: "  kubectl concord voice servers\n  kubectl concord voice servers eu-west -o wide",
		Args:    cobra.MaximumNArgs(1),
		RunE: runOptions(o, func(args []string) {
			if len(args) == 1 {
				o.Region = args[0]
			}
		}),
	}
}

// serverState is one word for an SFU's state.
func serverState(s concordv1.VoiceServerStatus) string {
	switch {
	case s.Draining:
		return "Draining"
	case !s.Ready:
		return "NotReady"
	case !s.Reporting:
		return "NoReport"
	}
	return "Ready"
}

// Run prints the servers.
func (o *VoiceServersOptions) Run(ctx context.Context) error {
	var list concordv1.VoiceRegionList
	if err := o.Client.List(ctx, &list, client.InNamespace(o.Namespace)); err != nil {
		return fmt.Errorf("list VoiceRegions: %w", err)
	}
	rows := []VoiceServerRow{}
	t := table{header: []string{"NAME", "REGION", "STATE", "CALLS", "PARTICIPANTS", "LOAD", "LOSS", "JITTER", "RTT", "PACKETS/S", "ENDPOINT"},
		wide: []bool{false, false, false, false, false, false, false, true, true, true, true}}
	found := o.Region == ""
	for _, v := range list.Items {
		if o.Region != "" && v.Name != o.Region && v.Spec.Region != o.Region {
			continue
		}
		found = true
		for _, s := range v.Status.ServerLoads {
			load := orDash(s.Load)
			if c := v.Spec.CapacityPerServer; s.Load == "" && c > 0 {
				load = strconv.FormatInt(s.Participants*100/int64(c), 10) + "%"
			}
			r := VoiceServerRow{Name: s.Name, VoiceRegion: v.Name, Region: v.Spec.Region, State: serverState(s),
				Calls: s.Calls, Participants: s.Participants, Load: load, PacketsForwarded: s.PacketsForwarded,
				PacketLoss: orDash(s.PacketLoss), Jitter: orDash(s.Jitter), RTT: orDash(s.RTT), Endpoint: orDash(s.Endpoint)}
			rows = append(rows, r)
			t.rows = append(t.rows, []string{r.Name, r.Region, r.State, strconv.FormatInt(r.Calls, 10),
				strconv.FormatInt(r.Participants, 10), r.Load, r.PacketLoss, r.Jitter, r.RTT, strconv.FormatInt(r.PacketsForwarded, 10), r.Endpoint})
		}
	}
	if !found {
		return fmt.Errorf("no VoiceRegion named %q or with region %q in namespace %s", o.Region, o.Region, o.Namespace)
	}
	return print(o.Out, o.Output, rows, t)
}
