package etcd

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// The registry's series are process-wide, like the Cassandra store's: a
// process holds one registry, and the question they answer — can this
// process reach etcd — is the process's.
var (
	leaseLosses = promauto.NewCounter(prometheus.CounterOpts{
		Name: "concord_registry_etcd_lease_losses_total",
		Help: "Times the registry's etcd lease was lost (its keep-alive stream ended), so every key it held was written again on a new one.",
	})
	leaseRenewing = promauto.NewGauge(prometheus.GaugeOpts{
		Name: "concord_registry_etcd_lease_renewing",
		Help: "1 while the registry has lost its etcd lease and has not yet got a new one: this process cannot reach etcd, and its nodes, pins and claims are missing from the registry.",
	})
)
