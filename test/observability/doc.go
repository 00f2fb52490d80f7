// Package observability proves the chart's alerts and dashboards
// (internal/observability) against a real Prometheus built from the Go
// module proxy (hack/prometheus/build.sh): promtool runs the alerts'
// threshold tests, and a Prometheus scraping a `concord dev`, a split
// topology (internal/topology, with voice, live comments and a read-state
// node on Kafka) and the operator on an envtest API server, under a little
// traffic, evaluates every alert expression and dashboard query through
// its HTTP API. The tests carry the integration build tag.
package observability
