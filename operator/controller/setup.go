package controller

import (
	"fmt"
	"time"

	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/concord-chat/concord/operator/fleet"
)

// Deps are the operator's connections to the running fleet.
type Deps struct {
	// Clock drives drain deadlines and phase timers.
	Clock clock.PassiveClock
	// Registries opens each cluster's registry.
	Registries fleet.RegistryProvider
	// Drainer drains gateways and SFUs.
	Drainer fleet.Drainer
	// GuildStats reports per-guild load (relay tiers).
	GuildStats fleet.GuildStats
	// VoiceLoads reports SFU loads.
	VoiceLoads fleet.VoiceLoads
	// PollInterval of drains and moves (default 2s).
	PollInterval time.Duration
	// Resync of relay tiers and voice regions (defaults 30s and 10s).
	Resync time.Duration
}

// SetupAll registers every reconciler with the manager.
func SetupAll(mgr ctrl.Manager, d Deps) error {
	if d.Clock == nil {
		d.Clock = clock.RealClock{}
	}
	rec := mgr.GetEventRecorder("concord-operator")
	setups := []interface{ SetupWithManager(ctrl.Manager) error }{
		&ConcordClusterReconciler{Client: mgr.GetClient(), Scheme: mgr.GetScheme(), Clock: d.Clock, Recorder: rec},
		&GatewayPoolReconciler{Client: mgr.GetClient(), Scheme: mgr.GetScheme(), Clock: d.Clock, Recorder: rec,
			Drainer: d.Drainer, Registries: d.Registries, PollInterval: d.PollInterval},
		&GuildPlacementReconciler{Client: mgr.GetClient(), Scheme: mgr.GetScheme(), Clock: d.Clock, Recorder: rec,
			Registries: d.Registries, PollInterval: d.PollInterval},
		&RelayTierReconciler{Client: mgr.GetClient(), Scheme: mgr.GetScheme(), Clock: d.Clock, Recorder: rec,
			Registries: d.Registries, Stats: d.GuildStats, Resync: d.Resync},
		&VoiceRegionReconciler{Client: mgr.GetClient(), Scheme: mgr.GetScheme(), Clock: d.Clock, Recorder: rec,
			Registries: d.Registries, Loads: d.VoiceLoads, Drainer: d.Drainer, Resync: d.Resync,
			Secrets: mgr.GetAPIReader()},
	}
	for _, s := range setups {
		if err := s.SetupWithManager(mgr); err != nil {
			return fmt.Errorf("setup %T: %w", s, err)
		}
	}
	return nil
}
