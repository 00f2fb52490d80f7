package observability

import "strings"

// Alert is one Prometheus alerting rule.
type Alert struct {
	// Name is the alert name; docs/operations.md has a runbook section
	// headed by it.
	Name string
	// Group is the rule group (concord.<area>).
	Group string
	// Signal is the PromQL of the watched value, without threshold.
	Signal string
	// Condition compares Signal with the threshold ("> 0.25").
	Condition string
	// For is how long the condition must hold ("5m"); empty fires at once.
	For string
	// Severity is the severity label: critical (pages) or warning.
	Severity string
	// Summary and Description are the annotations; Description may use
	// Prometheus's {{ $value }} and {{ $labels.x }}.
	Summary, Description string
}

// Expr is the rule's expression: the signal compared with the threshold.
func (a Alert) Expr() string { return "(" + a.Signal + ") " + a.Condition }

// RunbookAnchor is the alert's section anchor in docs/operations.md, as
// GitHub renders a heading of the alert's name.
func (a Alert) RunbookAnchor() string { return strings.ToLower(a.Name) }

// RunbookURL is where the runbook_url annotation points.
const RunbookURL = "https://github.com/concord-chat/concord/blob/main/docs/operations.md#"

// ratio is errors/total by the labels by, defined from the first request:
// errors without any series yet count as zero.
func ratio(errors, total, by string) string {
	return "(sum by (" + by + ") (rate(" + errors + "[5m])) or sum by (" + by + ") (rate(" + total + "[5m])) * 0)" +
		" / sum by (" + by + ") (rate(" + total + "[5m]))"
}

// Alerts are the alerts the chart installs, in the order of the runbooks.
func Alerts() []Alert {
	return []Alert{
		{
			Name:  "ConcordGuildEventAgeHigh",
			Group: "concord.guilds",
			// The busiest guilds' own p99 (top-K series), so one hot guild
			// shows even when the node's histogram is dominated by quiet ones.
			Signal:    `max by (namespace, guild) (concord_guild_top_event_age_seconds{quantile="0.99"})`,
			Condition: "> 0.25",
			For:       "5m",
			Severity:  "warning",
			Summary:   "A busy guild's actor is not keeping up",
			Description: `Guild {{ $labels.guild }}: p99 event age (mailbox entry to dispatch) is {{ $value | humanizeDuration }}, ` +
				`above 250 ms for 5 minutes. Its actor cannot keep up: auto-placement should move it to a dedicated node.`,
		},
		{
			Name:  "ConcordDeliveryLatencyHigh",
			Group: "concord.gateways",
			Signal: `histogram_quantile(0.99, sum by (namespace, le) ` +
				`(rate(concord_gateway_delivery_age_seconds_bucket[5m])))`,
			Condition:   "> 0.5",
			For:         "10m",
			Severity:    "critical",
			Summary:     "Messages take over 500 ms from send to socket",
			Description: `p99 from a message's creation to its MESSAGE_CREATE on a session's socket is {{ $value | humanizeDuration }} (objective: 500 ms).`,
		},
		{
			Name:        "ConcordGatewayBufferPressure",
			Group:       "concord.gateways",
			Signal:      `sum by (namespace, application_id) (concord_gateway_buffer_pressure_sessions)`,
			Condition:   "> 0",
			For:         "10m",
			Severity:    "warning",
			Summary:     "Sessions of one application are not reading their dispatches",
			Description: `{{ $value }} sessions of application {{ $labels.application_id }} ("user" for people) have held their send queue above 80 % of its bound for 10 minutes; they are close to slow-consumer closes.`,
		},
		{
			Name:        "ConcordIdentifyBacklog",
			Group:       "concord.gateways",
			Signal:      `sum by (namespace, pod) (concord_cluster_identify_backlog_identifies)`,
			Condition:   "> 200",
			For:         "5m",
			Severity:    "warning",
			Summary:     "IDENTIFYs are queueing on a gateway",
			Description: `{{ $value }} IDENTIFYs on {{ $labels.pod }} are waiting for their lookups and admission checks: a reconnect storm the stores are not absorbing.`,
		},
		{
			Name:  "ConcordReadStateConsumerLag",
			Group: "concord.readstate",
			Signal: `histogram_quantile(0.99, sum by (namespace, le) ` +
				`(rate(concord_readstate_consumer_lag_seconds_bucket[5m])))`,
			Condition:   "> 30",
			For:         "10m",
			Severity:    "warning",
			Summary:     "Unread badges and mention counts are behind",
			Description: `The read-state consumers apply message events {{ $value | humanizeDuration }} after the event log accepted them (p99).`,
		},
		{
			Name:  "ConcordLiveRouterLag",
			Group: "concord.live",
			Signal: `histogram_quantile(0.99, sum by (namespace, le) ` +
				`(rate(concord_live_router_log_age_seconds_bucket[5m])))`,
			Condition:   "> 1",
			For:         "5m",
			Severity:    "critical",
			Summary:     "The live-comment router is behind the event log",
			Description: `Comments reach the router {{ $value | humanizeDuration }} (p99) after the API accepted them; post-to-screen (objective 2 s) cannot hold.`,
		},
		{
			Name:  "ConcordLiveFilterSlow",
			Group: "concord.live",
			// The synchronous filter runs in the API on every post, before
			// the comment is accepted; the ML classifier scores afterwards
			// (ConcordLiveClassifierLag).
			Signal: `histogram_quantile(0.99, sum by (namespace, le) ` +
				`(rate(concord_live_api_filter_seconds_bucket[5m])))`,
			Condition:   "> 0.05",
			For:         "10m",
			Severity:    "warning",
			Summary:     "The live-comment filter is slow",
			Description: `The synchronous comment filter takes {{ $value | humanizeDuration }} (p99) per comment.`,
		},
		{
			Name:  "ConcordLiveClassifierLag",
			Group: "concord.live",
			// The consumer's own measure of how far behind it scores, the
			// value routers read from the board: it keeps growing while the
			// classifier is down, where the scored-lag histogram goes
			// silent. Past the router's 1 s hold, sampled streams draw only
			// from trusted authors.
			Signal:    `max by (namespace, pod) (concord_live_moderation_behind_seconds)`,
			Condition: "> 1",
			For:       "5m",
			Severity:  "warning",
			Summary:   "The live-comment classifier is behind",
			Description: `The moderation consumer on {{ $labels.pod }} scores comments {{ $value | humanizeDuration }} after they were posted, ` +
				`past the 1 s hold: sampled streams show only trusted authors, and offensive comments stay on screen longer.`,
		},
		{
			Name:        "ConcordVoicePacketLoss",
			Group:       "concord.voice",
			Signal:      `max by (namespace, server) (quantile_over_time(0.95, concord_voice_rtp_loss_ratio[10m]))`,
			Condition:   "> 0.05",
			For:         "10m",
			Severity:    "warning",
			Summary:     "An SFU loses speakers' packets",
			Description: `SFU {{ $labels.server }}: p95 over 10 minutes of the share of speakers' packets lost is {{ $value | humanizePercentage }}.`,
		},
		{
			Name:  "ConcordVoiceJitterHigh",
			Group: "concord.voice",
			Signal: `histogram_quantile(0.95, sum by (namespace, server, le) ` +
				`(rate(concord_voice_rtp_jitter_seconds_bucket[5m])))`,
			Condition:   "> 0.03",
			For:         "10m",
			Severity:    "warning",
			Summary:     "An SFU sees high jitter",
			Description: `SFU {{ $labels.server }}: p95 RTP interarrival jitter is {{ $value | humanizeDuration }}.`,
		},
		{
			Name:  "ConcordRevocationPushFailures",
			Group: "concord.entitlement",
			Signal: `sum by (namespace, pod) ` +
				`(increase(concord_entitlement_pushes_total{result=~"missed|publish_error"}[10m]))`,
			Condition:   "> 0",
			Severity:    "warning",
			Summary:     "Revocation pushes are failing",
			Description: `{{ $value }} revocation pushes were missed or failed to publish on {{ $labels.pod }} in 10 minutes; revocations fall back to lease renewal (slower than the 10 s objective).`,
		},
		{
			Name:  "ConcordPermissionShadowDisagreement",
			Group: "concord.permissions",
			// The guild actors recompute a sample of their fan-out and read
			// permission decisions from scratch; any disagreement with the
			// cached engine means someone may have seen a channel they
			// cannot see.
			Signal:    `sum by (namespace, pod, decision) (increase(concord_permissions_shadow_disagreements_total[10m]))`,
			Condition: "> 0",
			Severity:  "critical",
			Summary:   "Permission cache disagreed with a from-scratch recomputation",
			Description: `{{ $value }} sampled {{ $labels.decision }} permission decisions on pod {{ $labels.pod }} disagreed with the uncached engine ` +
				`in the last 10m. Treat as a possible privacy incident: the pod's log has one "permission shadow check disagrees" line per case with guild, user and channel.`,
		},
		{
			Name:        "ConcordRESTErrorRate",
			Group:       "concord.api",
			Signal:      ratio(`concord_api_responses_total{class="5xx"}`, `concord_api_responses_total`, "namespace, route"),
			Condition:   "> 0.05",
			For:         "5m",
			Severity:    "critical",
			Summary:     "A REST route answers 5xx",
			Description: `{{ $labels.route }} answers {{ $value | humanizePercentage }} of its requests with a server error.`,
		},
		{
			Name:        "ConcordCassandraUnavailable",
			Group:       "concord.dependencies",
			Signal:      ratio(`concord_store_cassandra_query_errors_total`, `concord_store_cassandra_query_duration_seconds_count`, "namespace, pod"),
			Condition:   "> 0.2",
			For:         "2m",
			Severity:    "critical",
			Summary:     "Cassandra statements are failing",
			Description: `{{ $value | humanizePercentage }} of {{ $labels.pod }}'s Cassandra statements fail.`,
		},
		{
			Name:        "ConcordKafkaUnavailable",
			Group:       "concord.dependencies",
			Signal:      `sum by (namespace, pod) (rate(concord_eventlog_outbox_append_failures_total[5m]))`,
			Condition:   "> 0",
			For:         "5m",
			Severity:    "critical",
			Summary:     "The event log refuses appends",
			Description: `{{ $labels.pod }}'s outbox relay has failed to append to the event log for 5 minutes ({{ $value }}/s); events queue in the outbox.`,
		},
		{
			Name:        "ConcordRedisUnavailable",
			Group:       "concord.dependencies",
			Signal:      `sum by (namespace, pod) (rate(concord_ratelimit_counter_errors_total[5m]))`,
			Condition:   "> 0",
			For:         "2m",
			Severity:    "critical",
			Summary:     "The counters backend (Redis) is failing",
			Description: `{{ $labels.pod }}'s rate limiter cannot reach its counters ({{ $value }} failures/s): requests pass unchecked.`,
		},
		{
			Name:        "ConcordEtcdUnavailable",
			Group:       "concord.dependencies",
			Signal:      `max by (namespace, pod) (concord_registry_etcd_lease_renewing)`,
			Condition:   "> 0",
			For:         "1m",
			Severity:    "critical",
			Summary:     "A process has lost etcd",
			Description: `{{ $labels.pod }} lost its registry lease and has not got a new one for a minute: it cannot reach etcd, and its registrations are missing.`,
		},
		{
			Name:        "ConcordOperatorReconcileErrors",
			Group:       "concord.operator",
			Signal:      `sum by (namespace, controller) (rate(controller_runtime_reconcile_errors_total[10m]))`,
			Condition:   "> 0",
			For:         "15m",
			Severity:    "warning",
			Summary:     "The operator's reconciles keep failing",
			Description: `Controller {{ $labels.controller }} has failed reconciles for 15 minutes ({{ $value }}/s).`,
		},
	}
}
