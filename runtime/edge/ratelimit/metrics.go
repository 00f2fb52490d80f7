package ratelimit

import (
	"fmt"
	"strconv"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the limiter's Prometheus collectors.
type metrics struct {
	requests      *prometheus.CounterVec
	invalid       prometheus.Counter
	bans          *prometheus.CounterVec
	counterErrors *prometheus.CounterVec
	// responses is the REST API's responses by route and status class,
	// the error rate per route alerts watch; routes bounds its labels.
	responses *prometheus.CounterVec
	routes    routeLabels
}

func (m *metrics) init(reg prometheus.Registerer) error {
	m.requests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "concord_ratelimit_requests_total", Help: "REST requests checked, by result (allowed, route_limited, global_limited, banned)."},
		[]string{"result"})
	m.invalid = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "concord_ratelimit_invalid_requests_total", Help: "Responses counted as invalid requests (401, 403, non-shared 429)."})
	m.bans = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "concord_ratelimit_bans_total", Help: "Timed bans issued for invalid requests, by kind (token, address)."},
		[]string{"kind"})
	m.counterErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "concord_ratelimit_counter_errors_total", Help: "Counters calls that failed, so the request was allowed unchecked, by operation."},
		[]string{"op"})
	m.responses = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "concord_api_responses_total",
		Help: "REST responses by route (\"METHOD template\", the rate-limit route; \"other\" past " + strconv.Itoa(MaxRouteLabels) +
			" routes) and status class (2xx, 3xx, 4xx, 429, 5xx)."},
		[]string{"route", "class"})
	// Each result and operation exists from the start, so rates over
	// them are 0 rather than absent before the first one.
	for _, r := range []string{"allowed", "route_limited", "global_limited", "banned"} {
		m.requests.WithLabelValues(r)
	}
	for _, op := range []string{"banned", "take", "incr", "ban"} {
		m.counterErrors.WithLabelValues(op)
	}
	if reg == nil {
		return nil
	}
	for _, c := range []prometheus.Collector{m.requests, m.invalid, m.bans, m.counterErrors, m.responses} {
		if err := reg.Register(c); err != nil {
			return fmt.Errorf("ratelimit: register metrics: %w", err)
		}
	}
	return nil
}

// MaxRouteLabels bounds the route label of concord_api_responses_total:
// templates come from request paths, and a client walking random paths
// must not grow the series without bound.
const MaxRouteLabels = 256

// routeLabels hands out route label values, the first MaxRouteLabels
// distinct routes as themselves and every later one as "other".
type routeLabels struct {
	mu   sync.Mutex
	seen map[string]struct{}
}

func (r *routeLabels) label(route string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.seen[route]; ok {
		return route
	}
	if len(r.seen) >= MaxRouteLabels {
		return "other"
	}
	if r.seen == nil {
		r.seen = make(map[string]struct{})
	}
	r.seen[route] = struct{}{}
	return route
}

// statusClass is the class label of a status code.
func statusClass(code int) string {
	switch {
	case code == 429:
		return "429"
	case code >= 500:
		return "5xx"
	case code >= 400:
		return "4xx"
	case code >= 300:
		return "3xx"
	default:
		return "2xx"
	}
}

// observeResponse counts one response.
func (m *metrics) observeResponse(method, template string, code int) {
	m.responses.WithLabelValues(m.routes.label(method+" "+template), statusClass(code)).Inc()
}
