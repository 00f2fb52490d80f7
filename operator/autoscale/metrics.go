package autoscale

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Metrics exported on the operator's /metrics endpoint. The event-age
// gauges are meant as HPA/KEDA triggers with metricType: Value (the value is
// already a per-guild or per-node quantile; averaging it over pods is wrong).
var (
	// GuildEventAge is a guild's event age (queue entry → dispatch) quantile.
	GuildEventAge = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "concord_autoscale_guild_event_age_seconds",
		Help: "Per-guild event age (queue entry to dispatch) as reported by its guild node, by quantile.",
	}, []string{"namespace", "cluster", "guild_id", "quantile"})
	// NodeEventAge is the worst guild p99 on each guild node.
	NodeEventAge = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "concord_autoscale_node_event_age_seconds",
		Help: "Worst per-guild event age p99 on each guild node.",
	}, []string{"namespace", "cluster", "node"})
	// ClusterEventAge is the worst guild p99 of a cluster: the usual KEDA trigger.
	ClusterEventAge = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "concord_autoscale_cluster_event_age_seconds",
		Help: "Worst per-guild event age p99 of a cluster's non-dedicated guild nodes.",
	}, []string{"namespace", "cluster"})
	// GuildQueueLength is a guild actor's queue length.
	GuildQueueLength = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "concord_autoscale_guild_queue_length_events",
		Help: "Events waiting in a guild actor's queue.",
	}, []string{"namespace", "cluster", "guild_id"})
	// GuildOnline is a guild's online sessions.
	GuildOnline = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "concord_autoscale_guild_online_sessions",
		Help: "Online sessions subscribed to a guild.",
	}, []string{"namespace", "cluster", "guild_id"})
	// LiveViewersGauge is the viewers a cluster's live gateways report.
	LiveViewersGauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "concord_autoscale_live_viewers",
		Help: "Viewers the live gateways report to the stream directory (fresh reports only).",
	}, []string{"namespace", "cluster"})
	// LiveGatewaysRecommended is the live-gateway replicas the viewers call for.
	LiveGatewaysRecommended = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "concord_autoscale_live_gateway_recommended_replicas",
		Help: "Live-gateway replicas the viewers call for this round (ceil(viewers / viewersPerGateway) within min and max), before the scale-down window.",
	}, []string{"namespace", "cluster"})
	// Decisions counts autoscaler decisions by kind.
	Decisions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "concord_autoscale_decisions_total",
		Help: "Autoscaler decisions, by kind.",
	}, []string{"namespace", "cluster", "kind"})
)

func init() {
	metrics.Registry.MustRegister(GuildEventAge, NodeEventAge, ClusterEventAge, GuildQueueLength, GuildOnline, LiveViewersGauge, LiveGatewaysRecommended, Decisions)
}
