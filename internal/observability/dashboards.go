package observability

// Dashboard is one Grafana dashboard.
type Dashboard struct {
	// UID is Grafana's id and the file name (concord-<uid>.json).
	UID, Title string
	// Guild adds a $guild variable (the guilds of the top-K series).
	Guild  bool
	Panels []Panel
}

// Panel is a time series panel of one or more queries.
type Panel struct {
	Title string
	// Unit is Grafana's unit id (s, percentunit, Bps, short, ops).
	Unit    string
	Targets []Target
}

// Target is one query of a panel. Expr may use $guild, $__rate_interval
// and $__range like any Grafana query; the Prometheus-backed test
// substitutes them.
type Target struct {
	Expr, Legend string
}

func panel(title, unit string, targets ...Target) Panel {
	return Panel{Title: title, Unit: unit, Targets: targets}
}

func q(expr, legend string) Target { return Target{Expr: expr, Legend: legend} }

// quantile is the qv quantile of a histogram by the labels by (le added).
func quantile(qv, metric, by string) string {
	if by != "" {
		by += ", "
	}
	return "histogram_quantile(" + qv + ", sum by (" + by + "le) (rate(" + metric + "_bucket[$__rate_interval])))"
}

// Dashboards are the dashboards the chart installs.
func Dashboards() []Dashboard {
	return []Dashboard{
		{UID: "overview", Title: "Concord / Overview", Panels: []Panel{
			panel("Gateway sessions", "short", q(`sum(concord_gateway_sessions)`, "sessions"),
				q(`sum(concord_gateway_connections)`, "connections")),
			panel("Guild actors loaded", "short", q(`sum by (pod) (concord_guild_actors_loaded_actors)`, "{{pod}}")),
			panel("Event age p99, busiest guilds", "s",
				q(`topk(5, max by (guild) (concord_guild_top_event_age_seconds{quantile="0.99"}))`, "{{guild}}")),
			panel("Send-to-socket p99", "s", q(quantile("0.99", "concord_gateway_delivery_age_seconds", ""), "p99"),
				q(quantile("0.5", "concord_gateway_delivery_age_seconds", ""), "p50")),
			panel("REST responses by class", "reqps",
				q(`sum by (class) (rate(concord_api_responses_total[$__rate_interval]))`, "{{class}}")),
			panel("Session deliveries", "ops",
				q(`sum(rate(concord_guild_deliveries_total[$__rate_interval]))`, "guild actors"),
				q(`sum(rate(concord_gateway_deliveries_total[$__rate_interval]))`, "gateways")),
			panel("Outbox pending records", "short", q(`sum by (pod) (concord_eventlog_outbox_pending_records)`, "{{pod}}")),
			panel("Voice calls and live viewers", "short", q(`sum(concord_voice_calls)`, "voice calls"),
				q(`sum(concord_live_gateway_viewers)`, "live viewers")),
		}},
		{UID: "guild", Title: "Concord / Guild", Guild: true, Panels: []Panel{
			panel("Event age", "s",
				q(`max by (guild, quantile) (concord_guild_top_event_age_seconds{guild=~"$guild"})`, "p{{quantile}}")),
			panel("Mailbox (queued operations)", "short",
				q(`max by (guild) (concord_guild_top_mailbox_length_messages{guild=~"$guild"})`, "queued")),
			panel("Fan-out: session deliveries of the guild nodes", "ops",
				q(`sum by (pod) (rate(concord_guild_deliveries_total[$__rate_interval]))`, "{{pod}}")),
			panel("Relays between guild nodes", "ops",
				q(`sum(rate(concord_cluster_relayed_dispatches_total[$__rate_interval]))`, "relayed"),
				q(`sum(rate(concord_cluster_relay_failures_total[$__rate_interval]))`, "failed")),
			// Process-wide: the member-list counter has no guild label (one
			// series per guild would be unbounded).
			panel("Member-list operations sent (all guilds)", "ops",
				q(`sum by (op) (rate(concord_memberlist_ops_total[$__rate_interval]))`, "{{op}}")),
		}},
		{UID: "gateways", Title: "Concord / Gateways", Panels: []Panel{
			panel("Sessions per node", "short", q(`sum by (node) (concord_gateway_sessions)`, "{{node}}")),
			panel("Resumes vs identifies", "ops",
				q(`sum(rate(concord_gateway_resumes_total[$__rate_interval]))`, "resumes"),
				q(`sum(rate(concord_cluster_identify_lookup_duration_seconds_count[$__rate_interval]))`, "identifies")),
			panel("Bytes out by event", "Bps",
				q(`sum by (event) (rate(concord_gateway_sent_bytes_total[$__rate_interval]))`, "{{event}}")),
			panel("Buffer pressure by application", "short",
				q(`sum by (application_id) (concord_gateway_buffer_pressure_sessions)`, "{{application_id}}")),
			panel("Identify backlog and lookup p99", "short",
				q(`sum by (pod) (concord_cluster_identify_backlog_identifies)`, "backlog {{pod}}"),
				q(quantile("0.99", "concord_cluster_identify_lookup_duration_seconds", ""), "lookup p99 (s)")),
			panel("Closes", "ops",
				q(`sum by (code) (rate(concord_gateway_server_closes_total[$__rate_interval])) or sum(rate(concord_gateway_slow_consumer_closes_total[$__rate_interval]))`, "{{code}}")),
		}},
		{UID: "storage", Title: "Concord / Storage", Panels: []Panel{
			panel("Coalesced share of data reads", "percentunit",
				q(`(sum by (op) (rate(concord_dataservice_coalesced_total[$__rate_interval])) or sum by (op) (rate(concord_dataservice_requests_total[$__rate_interval])) * 0)`+
					` / sum by (op) (rate(concord_dataservice_requests_total[$__rate_interval]))`, "{{op}}")),
			panel("Data service requests p99", "s",
				q(quantile("0.99", "concord_dataservice_request_duration_seconds", "op"), "{{op}}")),
			panel("Cassandra statement p99", "s",
				q(quantile("0.99", "concord_store_cassandra_query_duration_seconds", "table, kind"), "{{kind}} {{table}}")),
			panel("Projected message bucket size", "bytes",
				q(quantile("0.99", "concord_store_bucket_projected_bytes", ""), "p99"),
				q(quantile("0.5", "concord_store_bucket_projected_bytes", ""), "p50")),
			panel("Bucket narrowings", "short",
				q(`sum(increase(concord_store_bucket_narrowings_total[$__range]))`, "channels narrowed")),
			panel("Read-state consumer lag p99", "s",
				q(quantile("0.99", "concord_readstate_consumer_lag_seconds", ""), "p99")),
		}},
		{UID: "bots", Title: "Concord / Bots", Panels: []Panel{
			panel("Interaction deliveries", "ops",
				q(`sum by (path, result) (rate(concord_bots_interaction_deliveries_total[$__rate_interval]))`, "{{path}} {{result}}")),
			panel("Interactions not answered within 3 s (share of deliveries)", "percentunit",
				q(`(sum(rate(concord_bots_interaction_misses_total[$__rate_interval])) or sum(rate(concord_bots_interaction_deliveries_total[$__rate_interval])) * 0)`+
					` / sum(rate(concord_bots_interaction_deliveries_total{result="ok"}[$__rate_interval]))`, "missed")),
			panel("429s by route bucket", "reqps",
				q(`sum by (route) (rate(concord_api_responses_total{class="429"}[$__rate_interval])) or sum by (route) (rate(concord_api_responses_total[$__rate_interval])) * 0`, "{{route}}")),
			panel("Rate-limit decisions", "reqps",
				q(`sum by (result) (rate(concord_ratelimit_requests_total[$__rate_interval]))`, "{{result}}")),
		}},
		{UID: "voice", Title: "Concord / Voice", Panels: []Panel{
			panel("Calls and participants", "short", q(`sum by (server) (concord_voice_calls)`, "calls {{server}}"),
				q(`sum by (server) (concord_voice_participants)`, "participants {{server}}")),
			panel("Packets forwarded per CPU second", "short",
				q(`max by (server) (concord_voice_packets_forwarded_per_cpu_second)`, "{{server}}")),
			panel("Packet loss", "percentunit", q(`max by (server) (concord_voice_rtp_loss_ratio)`, "{{server}}")),
			panel("Jitter p95", "s", q(quantile("0.95", "concord_voice_rtp_jitter_seconds", "server"), "{{server}}")),
		}},
		{UID: "live", Title: "Concord / Live comments", Panels: []Panel{
			panel("Post-to-screen p99 by stream size", "s",
				q(quantile("0.99", "concord_live_gateway_post_to_flush_done_seconds", "viewers"), "{{viewers}} viewers")),
			panel("Sampled streams", "short", q(`sum(concord_live_router_sampled_streams)`, "sampled")),
			panel("Comments accepted and retracted", "ops",
				q(`sum(rate(concord_live_api_comments_accepted_total[$__rate_interval]))`, "accepted"),
				q(`sum(rate(concord_live_api_retractions_total[$__rate_interval]))`, "retracted")),
			panel("Router lag p99", "s", q(quantile("0.99", "concord_live_router_log_age_seconds", ""), "log to router")),
			panel("Viewers", "short", q(`sum(concord_live_gateway_viewers)`, "viewers")),
			panel("Takedown latency (post to retraction at the gateways)", "s",
				q(quantile("0.99", "concord_live_gateway_takedown_seconds", ""), "p99"),
				q(quantile("0.5", "concord_live_gateway_takedown_seconds", ""), "p50")),
			panel("Exposure of removed comments (impressions per million)", "short",
				q(`1e6 * sum(rate(concord_live_gateway_removed_comment_impressions_total[$__rate_interval]))`+
					` / sum(rate(concord_live_gateway_comment_impressions_total[$__rate_interval]))`, "per million")),
			panel("Classifier", "s",
				q(`max by (pod) (concord_live_moderation_behind_seconds)`, "behind {{pod}}"),
				q(quantile("0.99", "concord_live_moderation_lag_seconds", ""), "scored p99")),
		}},
	}
}
