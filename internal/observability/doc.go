// Package observability holds Concord's alerts and Grafana dashboards as
// data, the one source the chart's PrometheusRule rules
// (charts/concord/files/alerts.yaml) and dashboard JSON
// (charts/concord/files/dashboards/) are generated from (cmd/obsgen, run
// by hack/generate.sh; TestGeneratedFresh fails when they are stale).
//
// Every alert is a Signal — a PromQL query whose value is the thing
// watched — and a Condition comparing it with a threshold. Keeping the two
// apart lets the Prometheus-backed test (test/observability) evaluate each
// signal against a scraped `concord dev` and split topology and demand
// series: an alert whose condition holds only in a failure would return
// nothing on a healthy system and prove nothing, so it is the signal that
// must return series, and a misspelt metric name fails. Queries that
// divide error counters, which have no series before the first error,
// fall back to the total times zero (`or ... * 0`) so the ratio exists
// from the first request.
package observability
