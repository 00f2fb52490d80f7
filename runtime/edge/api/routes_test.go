package api

import (
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/concord-chat/concord/runtime/base/route"
)

// examplePath fills a route's wildcards with distinct values: ids for
// {guild} (111) and {channel} (222), a word for the rest.
func examplePath(rt route.Route) string {
	var b strings.Builder
	for _, seg := range strings.Split(strings.TrimPrefix(rt.Path, "/"), "/") {
		b.WriteByte('/')
		switch {
		case seg == "{guild}":
			b.WriteString("111")
		case seg == "{channel}":
			b.WriteString("222")
		case strings.HasPrefix(seg, "{"):
			b.WriteString("333")
		default:
			b.WriteString(seg)
		}
	}
	return b.String()
}

// TestRouteTableIsTheHandlers: every exported route is one the handler
// serves (it never answers the mux's own 404 or 405 for it), and the
// table resolves each, under both versions, to itself with its guild and
// channel.
func TestRouteTableIsTheHandlers(t *testing.T) {
	routes := Routes()
	if len(routes) < 90 {
		t.Fatalf("only %d routes exported", len(routes))
	}
	table := route.NewTable(routes)
	e := newEnv(t)
	seen := map[string]bool{}
	for _, rt := range routes {
		if seen[rt.Pattern] {
			t.Errorf("%s exported twice", rt.Pattern)
		}
		seen[rt.Pattern] = true
		p := examplePath(rt)
		for _, v := range []string{"/api/v9", "/api/v10"} {
			u := &url.URL{Path: v + p}
			m, ok := table.Match(rt.Method, u)
			if !ok || m.Route.Pattern != rt.Pattern {
				t.Errorf("%s %s resolved to %q (%v), want %q", rt.Method, u.Path, m.Route.Pattern, ok, rt.Pattern)
				continue
			}
			wantGuild, wantChannel := strings.Contains(rt.Path, "{guild}"), strings.Contains(rt.Path, "{channel}")
			if (m.Guild() == 111) != wantGuild || (m.Channel() == 222) != wantChannel {
				t.Errorf("%s: guild %d, channel %d", rt.Pattern, m.Guild(), m.Channel())
			}
		}
		req, err := http.NewRequest(rt.Method, e.url+"/api/v10"+p, strings.NewReader("{}"))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bot not-a-token")
		req.Header.Set("Content-Type", "application/json")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		var out struct {
			Message string `json:"message"`
		}
		_ = json.Unmarshal(body, &out)
		if res.StatusCode == http.StatusMethodNotAllowed || out.Message == "404: Not Found" {
			t.Errorf("%s: the handler does not serve it: %d %s", rt.Pattern, res.StatusCode, body)
		}
	}
}

// TestRouteTableRoutesNothingElse: paths and methods the handler does not
// serve are not routes, so a cluster sends them anywhere (the mux's 404,
// 405 or redirect is the same on every node).
func TestRouteTableRoutesNothingElse(t *testing.T) {
	table := route.NewTable(Routes())
	for _, c := range []struct{ method, path string }{
		{"GET", "/api/v10/nope"},
		{"GET", "/api/v10/guilds"},                  // only POST /guilds
		{"GET", "/api/v10/users/@me/guilds/111"},    // only DELETE
		{"POST", "/api/v10/guilds/111/unknown"},     // no such sub-route
		{"GET", "/api/v8/guilds/111"},               // not a served version
		{"GET", "/guilds/111"},                      // outside the API
		{"GET", "/api/v10//guilds/111"},             // not clean: the mux redirects
		{"GET", "/api/v10/guilds/111/"},             // trailing slash
		{"PATCH", "/api/v10/channels/222/typing"},   // wrong method
		{"POST", "/api/v10/interactions"},           // the bot platform's, not the API's
		{"GET", "/api/v10/applications/1/commands"}, // likewise
	} {
		if m, ok := table.Match(c.method, &url.URL{Path: c.path}); ok {
			t.Errorf("%s %s routed as %s", c.method, c.path, m.Route.Pattern)
		}
	}
}
