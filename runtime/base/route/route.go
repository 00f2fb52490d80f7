// Package route is the REST surface as data: the routes a handler
// serves, each named by its pattern, and a Table that matches a request
// to its route with the ServeMux rules the handler itself uses.
//
// The REST API (api.Routes) and the bot platform (bots.Routes) export
// their tables from the same registration that mounts their handlers, so
// a process that only needs to know what a request acts on (an API node
// of a cluster picking the guild node to forward it to) reads the table
// instead of parsing paths a second time.
//
// Wildcard names carry the meaning: {guild} is a guild id, {channel} a
// channel id, {webhook} a webhook id, {code} an invite code, and {token}
// a webhook or interaction token.
package route

import (
	"net/http"
	"net/url"
	"strings"

	"github.com/concord-chat/concord/runtime/base/snowflake"
)

// versions are the API versions every route is served under.
var versions = [...]string{"/api/v9", "/api/v10"}

// Route is one route: Pattern is how the handler registers it, without
// the version prefix ("POST /channels/{channel}/messages"), and names it.
type Route struct {
	Pattern string
	Method  string
	// Path is the pattern's path, e.g. "/channels/{channel}/messages".
	Path string
	// Params are the path's wildcard names in order.
	Params []string
}

// Parse returns the route of a pattern "METHOD /path/{param}".
func Parse(pattern string) Route {
	method, path, _ := strings.Cut(pattern, " ")
	r := Route{Pattern: pattern, Method: method, Path: path}
	for _, seg := range strings.Split(path, "/") {
		if name, ok := strings.CutPrefix(seg, "{"); ok {
			r.Params = append(r.Params, strings.TrimSuffix(strings.TrimSuffix(name, "}"), "..."))
		}
	}
	return r
}

// Recorder collects the patterns a handler registers; it has the
// HandleFunc method of *http.ServeMux, so a handler's own registration
// code can fill it.
type Recorder struct {
	Routes []Route
}

// HandleFunc implements the registration: it records pattern, whose
// handler it drops.
func (r *Recorder) HandleFunc(pattern string, _ func(http.ResponseWriter, *http.Request)) {
	r.Routes = append(r.Routes, Parse(pattern))
}

// Match is a request matched to a route.
type Match struct {
	Route  Route
	values map[string]string
}

// Value returns the path value of wildcard name ("" when the route has
// none).
func (m Match) Value(name string) string { return m.values[name] }

// ID returns wildcard name's value as a snowflake; 0 when the route has
// no such wildcard or its value is not an id.
func (m Match) ID(name string) snowflake.ID {
	id, err := snowflake.Parse(m.values[name])
	if err != nil {
		return 0
	}
	return id
}

// Guild is the guild the route acts on ({guild}), 0 for none.
func (m Match) Guild() snowflake.ID { return m.ID("guild") }

// Channel is the channel the route acts on ({channel}), 0 for none.
func (m Match) Channel() snowflake.ID { return m.ID("channel") }

// Table matches requests to routes. It is immutable and safe for
// concurrent use.
type Table struct {
	mux *http.ServeMux
}

// NewTable returns a table of routes, each served under every API
// version the REST API serves (/api/v9 and /api/v10). Like http.ServeMux, it panics on conflicting patterns.
func NewTable(routes []Route) *Table {
	mux := http.NewServeMux()
	for _, rt := range routes {
		for _, v := range versions {
			mux.HandleFunc(rt.Method+" "+v+rt.Path, func(w http.ResponseWriter, r *http.Request) {
				mw, ok := w.(*matchWriter)
				if !ok {
					return
				}
				mw.m = &Match{Route: rt, values: make(map[string]string, len(rt.Params))}
				for _, p := range rt.Params {
					mw.m.values[p] = r.PathValue(p)
				}
			})
		}
	}
	return &Table{mux: mux}
}

// Match returns the route the handler would serve a request with method
// and u by; false when it would answer 404 or 405, or redirect (a path
// that is not clean).
func (t *Table) Match(method string, u *url.URL) (Match, bool) {
	req := &http.Request{Method: method, URL: &url.URL{Path: u.Path, RawPath: u.RawPath}, Header: http.Header{}}
	mw := &matchWriter{}
	t.mux.ServeHTTP(mw, req)
	if mw.m == nil {
		return Match{}, false
	}
	return *mw.m, true
}

// matchWriter receives the match; whatever else the mux writes (a 404, a
// 405, a redirect) is dropped.
type matchWriter struct {
	m *Match
	h http.Header
}

func (w *matchWriter) Header() http.Header {
	if w.h == nil {
		w.h = http.Header{}
	}
	return w.h
}

func (w *matchWriter) Write(b []byte) (int, error) { return len(b), nil }

func (w *matchWriter) WriteHeader(int) {}
