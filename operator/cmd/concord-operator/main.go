// Command concord-operator runs Concord's controllers and the event-age
// autoscaler.
package main

import (
	"flag"
	"fmt"
	"os"
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	concordv1 "github.com/concord-chat/concord/apis/v1alpha1"
	"github.com/concord-chat/concord/operator/autoscale"
	"github.com/concord-chat/concord/operator/controller"
	"github.com/concord-chat/concord/operator/fleet"
	"github.com/concord-chat/concord/operator/fleet/etcdfleet"
	"github.com/concord-chat/concord/operator/podadmin"
)

// env returns the environment fallback of a flag.
func env(name, def string) string {
	if v, ok := os.LookupEnv(name); ok {
		return v
	}
	return def
}

func envDuration(name string, def time.Duration) time.Duration {
	if v, err := time.ParseDuration(os.Getenv(name)); err == nil {
		return v
	}
	return def
}

func envBool(name string, def bool) bool {
	if v, err := strconv.ParseBool(os.Getenv(name)); err == nil {
		return v
	}
	return def
}

func main() {
	var (
		metricsAddr  = flag.String("metrics-bind-address", env("CONCORD_OPERATOR_METRICS_ADDR", ":8080"), "metrics endpoint address (env CONCORD_OPERATOR_METRICS_ADDR); \"0\" disables it")
		probeAddr    = flag.String("health-probe-bind-address", env("CONCORD_OPERATOR_PROBE_ADDR", ":8081"), "health probe address (env CONCORD_OPERATOR_PROBE_ADDR)")
		leaderElect  = flag.Bool("leader-elect", envBool("CONCORD_OPERATOR_LEADER_ELECT", true), "leader election: one replica of several reconciles and autoscales, the others wait to take over; =false for a single replica run outside a cluster (env CONCORD_OPERATOR_LEADER_ELECT)")
		leaderNS     = flag.String("leader-election-namespace", env("CONCORD_OPERATOR_LEADER_ELECTION_NAMESPACE", ""), "namespace of the leader-election Lease; empty: the pod's own (required outside a cluster) (env CONCORD_OPERATOR_LEADER_ELECTION_NAMESPACE)")
		fleetMode    = flag.String("fleet", env("CONCORD_OPERATOR_FLEET", "pods"), "how to reach the fleet: pods (registry in each cluster's etcd, pods' admin HTTP endpoints) or memory (dry run) (env CONCORD_OPERATOR_FLEET)")
		adminTimeout = flag.Duration("admin-timeout", envDuration("CONCORD_OPERATOR_ADMIN_TIMEOUT", 5*time.Second), "timeout of calls to pods' admin endpoints (env CONCORD_OPERATOR_ADMIN_TIMEOUT)")
		autoscaleInt = flag.Duration("autoscale-interval", envDuration("CONCORD_OPERATOR_AUTOSCALE_INTERVAL", 15*time.Second), "autoscaler period (guild event age, live gateway viewers); 0 disables it (env CONCORD_OPERATOR_AUTOSCALE_INTERVAL)")
	)
	opts := zap.Options{}
	opts.BindFlags(flag.CommandLine)
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&opts)))
	log := ctrl.Log.WithName("setup")

	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		fatal(err)
	}
	if err := concordv1.AddToScheme(scheme); err != nil {
		fatal(err)
	}
	mgr, err := ctrl.NewManager(ctrl.GetConfigOrDie(), ctrl.Options{
		Scheme:                  scheme,
		Metrics:                 metricsserver.Options{BindAddress: *metricsAddr},
		HealthProbeBindAddress:  *probeAddr,
		LeaderElection:          *leaderElect,
		LeaderElectionID:        "concord-operator.concord.dev",
		LeaderElectionNamespace: *leaderNS,
		// A leader stopping on SIGTERM (a rollout, a drained node) gives
		// the Lease up at once: the other replica leads within its retry
		// period instead of waiting out the lease duration. Safe because
		// the process exits right after the manager stops.
		LeaderElectionReleaseOnCancel: true,
	})
	if err != nil {
		fatal(fmt.Errorf("create manager: %w", err))
	}

	deps := controller.Deps{Clock: clock.RealClock{}}
	var stats fleet.GuildStats
	var viewers fleet.LiveViewers
	switch *fleetMode {
	case "memory":
		m := fleet.NewMemory()
		deps.Registries, deps.Drainer, deps.GuildStats, deps.VoiceLoads = m, m, m, m
		stats, viewers = m, m
	case "pods":
		pa, err := podadmin.New(podadmin.Config{Timeout: *adminTimeout, Reader: mgr.GetAPIReader()})
		if err != nil {
			fatal(err)
		}
		// Each ConcordCluster's registry is its etcd (spec.etcd).
		regs := &etcdfleet.Provider{}
		defer regs.Close()
		// SFUs report their load to the registry (voice/load/<pod>),
		// not over their admin endpoint.
		loads := &etcdfleet.VoiceLoads{Provider: regs, Reader: mgr.GetClient()}
		deps.Registries, deps.Drainer, deps.GuildStats, deps.VoiceLoads = regs, pa, pa, loads
		stats = pa
		// Live gateways report their viewers to the registry (the stream
		// directory, live/viewers/<stream>/<gateway>).
		viewers = &etcdfleet.LiveViewers{Provider: regs}
	default:
		fatal(fmt.Errorf("--fleet must be pods or memory, not %q", *fleetMode))
	}
	if err := controller.SetupAll(mgr, deps); err != nil {
		fatal(err)
	}
	if *autoscaleInt > 0 {
		a := &autoscale.Autoscaler{
			Client: mgr.GetClient(), Clock: clock.RealClock{}, Recorder: mgr.GetEventRecorder("concord-autoscaler"),
			Stats: stats, Viewers: viewers, Interval: *autoscaleInt,
		}
		if err := mgr.Add(a); err != nil {
			fatal(err)
		}
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		fatal(err)
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		fatal(err)
	}
	log.Info("starting concord-operator", "fleet", *fleetMode)
	if err := mgr.Start(ctrl.SetupSignalHandler()); err != nil {
		fatal(err)
	}
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "concord-operator:", err)
	os.Exit(1)
}
