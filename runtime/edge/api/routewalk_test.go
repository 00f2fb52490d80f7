package api

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/concord-chat/concord/internal/gwtest"
	"github.com/concord-chat/concord/runtime/base/route"
	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/bots"
	"github.com/concord-chat/concord/runtime/domain/wire"
	"github.com/concord-chat/concord/runtime/edge/api/uploads/uploadstest"
)

// TestRouteWalk sends a request to every route of the public REST
// surface — the REST API's table (Routes) and the bot platform's
// (bots.Routes), read from the registration code itself, so a route added
// without a case here fails the test — and checks its answer: the status
// each case expects, from `concord dev` (a process of the binary) and,
// with CONCORD_API_TEST_TOPOLOGY=cluster, from every api node of the
// split topology, with the body's shape (its keys and value types) the
// same as `concord dev`'s.
//
// In the cluster each case prepares what it acts on (a message, a
// webhook's message, an interaction) through one api node and sends its
// request through the other, so an answer that depends on which node
// holds what (a node-local copy, a route resolved to the wrong owner)
// fails. Routes whose path names no guild or channel are among them:
// webhooks and their messages by token, interaction callbacks and
// followups by token, invites by code, /users/@me/..., /applications/....
func TestRouteWalk(t *testing.T) {
	patterns := map[string]bool{}
	for _, r := range slices.Concat(Routes(), bots.Routes()) {
		patterns[r.Pattern] = true
	}
	// The api role serves GET /gateway/bot itself, in front of both
	// tables (runtime/services/apirole).
	patterns[gatewayBot] = true
	for p := range patterns {
		if _, ok := walkCases[p]; !ok {
			t.Errorf("route %q has no case in walkCases: add one", p)
		}
	}
	for p := range walkCases {
		if !patterns[p] {
			t.Errorf("walkCases has %q, which no route table has", p)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	order := make([]string, 0, len(patterns))
	for p := range patterns {
		order = append(order, p)
	}
	sort.Strings(order)

	ctx := t.Context()
	dev, err := startProc(ctx, "dev", time.Minute, "dev")
	if err != nil {
		t.Fatalf("concord dev: %v", err)
	}
	t.Cleanup(dev.stop)
	devURL := "http://" + dev.addr
	ref := walkTarget(t, "dev", []string{devURL}, dev.addr, order)
	if topologyURL() == "" {
		return
	}
	if len(topo.apis) < 2 {
		t.Fatalf("the topology has %d api nodes; the walk needs two", len(topo.apis))
	}
	got := walkTarget(t, "cluster", topo.apis, topo.gateway, order)
	for _, p := range order {
		for i, a := range got[p] {
			want := ref[p][0]
			if a.status != want.status || a.shape != want.shape {
				t.Errorf("%s through %s: %d %s\n  shape %s\nconcord dev: %d %s\n  shape %s",
					p, topo.apis[i], a.status, a.body, a.shape, want.status, want.body, want.shape)
			}
		}
	}
}

// walkAnswer is what a node answered a case's request.
type walkAnswer struct {
	status int
	body   string
	shape  string
}

// walkTarget builds a world through nodes and runs every case through
// each node, its preparation through the next node. It checks each
// answer's status against the case's and returns the answers by route,
// one per node.
func walkTarget(t *testing.T, name string, nodes []string, gateway string, order []string) map[string][]walkAnswer {
	t.Helper()
	w := newWalkWorld(t, nodes[0], gateway)
	out := map[string][]walkAnswer{}
	apiTable, botTable := route.NewTable(Routes()), route.NewTable(bots.Routes())
	for _, p := range order {
		c := walkCases[p]
		method, _, _ := strings.Cut(p, " ")
		for i, node := range nodes {
			w.e.url = nodes[(i+1)%len(nodes)]
			req := c.do(w)
			// The request must be the route's: a case that drifted from
			// its pattern would walk another route twice.
			u, err := url.Parse(v10 + req.path)
			if err != nil {
				t.Fatalf("%s: path %q: %v", p, req.path, err)
			}
			m, ok := apiTable.Match(method, u)
			if bm, bok := botTable.Match(method, u); bok && (!ok || m.Route.Pattern != p) {
				m, ok = bm, true
			}
			if p != gatewayBot && (!ok || m.Route.Pattern != p) {
				t.Fatalf("%s: the case's request %s %s matches %q", p, method, req.path, m.Route.Pattern)
			}
			a := walkSend(t, node, method, req)
			if a.status != c.want {
				t.Errorf("%s %s through %s: %d %s, want %d", name, p, node, a.status, a.body, c.want)
			}
			out[p] = append(out[p], a)
			if c.after != nil {
				c.after(w)
			}
		}
	}
	return out
}

// walkSend sends req through the node at base and reads the answer,
// whatever its status.
func walkSend(t *testing.T, base, method string, req walkReq) walkAnswer {
	t.Helper()
	var raw []byte
	if req.body != nil {
		var err error
		if raw, err = json.Marshal(req.body); err != nil {
			t.Fatal(err)
		}
	}
	for {
		a, h := walkSendOnce(t, base, method, req, raw)
		if a.status != http.StatusTooManyRequests {
			return a
		}
		// `concord dev` applies the REST rate limits: wait as a bot
		// library does.
		time.Sleep(retryAfter(t, h, []byte(a.body)))
	}
}

func walkSendOnce(t *testing.T, base, method string, req walkReq, raw []byte) (walkAnswer, http.Header) {
	t.Helper()
	var body io.Reader
	if req.body != nil {
		body = strings.NewReader(string(raw))
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	r, err := http.NewRequestWithContext(ctx, method, base+v10+req.path, body)
	if err != nil {
		t.Fatal(err)
	}
	if req.body != nil {
		r.Header.Set("Content-Type", "application/json")
	}
	if req.token != "" {
		r.Header.Set("Authorization", req.token)
	}
	res, err := http.DefaultClient.Do(r)
	if err != nil {
		t.Fatalf("%s %s through %s: %v", method, req.path, base, err)
	}
	defer res.Body.Close()
	out, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatalf("%s %s through %s: read: %v", method, req.path, base, err)
	}
	return walkAnswer{status: res.StatusCode, body: string(out), shape: jsonShape(out)}, res.Header
}

// jsonShape describes a JSON body by its structure, not its values: an
// object by its keys and their values' shapes, an array by its first
// element's shape, a scalar by its type. Ids, names and times differ
// between deployments; the shape does not.
func jsonShape(raw []byte) string {
	if len(raw) == 0 {
		return "empty"
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return "not json"
	}
	var sb strings.Builder
	shapeOf(&sb, v)
	return sb.String()
}

func shapeOf(sb *strings.Builder, v any) {
	switch v := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		sb.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				sb.WriteByte(',')
			}
			sb.WriteString(k + ":")
			shapeOf(sb, v[k])
		}
		sb.WriteByte('}')
	case []any:
		sb.WriteByte('[')
		if len(v) > 0 {
			shapeOf(sb, v[0])
		}
		sb.WriteByte(']')
	case string:
		sb.WriteString("str")
	case float64:
		sb.WriteString("num")
	case bool:
		sb.WriteString("bool")
	case nil:
		sb.WriteString("null")
	}
}

// walkReq is a case's request: path (under /api/v10, with its query),
// the Authorization header, a JSON body (none when nil).
type walkReq struct {
	path, token string
	body        any
}

// walkCase is the case of one route: want is the status every node must
// answer; do prepares what the request acts on, through w (whose env
// sends to a node other than the one under test), and returns it; after,
// when set, runs once the request was answered.
type walkCase struct {
	want  int
	do    func(w *walkWorld) walkReq
	after func(w *walkWorld)
}

// walkWorld is what the cases act on, made once per deployment: a guild
// of alice's that bob joined, with a role, a thread, a message, a
// webhook, an invite, and an application of alice's whose bot is in the
// guild, with a global command and a gateway session that receives the
// interactions.
type walkWorld struct {
	t                     *testing.T
	e                     *env
	alice, bob            account
	guild, general, other snowflake.ID
	thread, role, msg     snowflake.ID
	hook                  webhookJSONT
	invite                string
	app                   walkApp
	cmd                   snowflake.ID
	bot                   *gwtest.Conn
	n                     int
}

type walkApp struct {
	ID    snowflake.ID
	Token string
}

func newWalkWorld(t *testing.T, base, gateway string) *walkWorld {
	t.Helper()
	e := newTopologyEnv(t, base)
	e.obey429 = true
	w := &walkWorld{t: t, e: e}
	w.alice, w.bob = e.register("walk-alice", false), e.register("walk-bob", false)
	var g wire.Guild
	e.ok("POST", v10+"/guilds", w.alice.Token, map[string]any{"name": "Walk"}, &g)
	w.guild = g.ID
	var chans []wire.Channel
	e.ok("GET", fmt.Sprintf("%s/guilds/%d/channels", v10, g.ID), w.alice.Token, nil, &chans)
	for _, c := range chans {
		if c.Type == 0 {
			w.general = c.ID
		}
	}
	w.other = w.channel()
	w.invite = w.newInvite()
	e.ok("POST", v10+"/invites/"+w.invite, w.bob.Token, map[string]any{}, nil)
	w.role = w.newRole()
	w.msg = w.post("hello")
	var th struct {
		ID snowflake.ID `json:"id"`
	}
	e.ok("POST", fmt.Sprintf("%s/channels/%d/threads", v10, w.general), w.alice.Token, map[string]any{"name": "walk thread", "type": 11}, &th)
	w.thread = th.ID
	w.hook = e.createWebhook(w.alice.Token, w.general, "Walker")
	w.app = w.newApp()
	w.install(w.app)
	var cmd struct {
		ID snowflake.ID `json:"id"`
	}
	e.ok("POST", fmt.Sprintf("%s/applications/%d/commands", v10, w.app.ID), w.app.Token, map[string]any{"name": "ping", "description": "pings"}, &cmd)
	w.cmd = cmd.ID
	c, err := gwtest.Dial(gwtest.URL(gateway), w.app.Token, gwtest.Options{Name: "walk-bot", Intents: 1 /* GUILDS: interactions need no other, and no privileged one */})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	if _, _, err := c.Next("READY", 15*time.Second, nil); err != nil {
		t.Fatal(err)
	}
	w.bot = c
	return w
}

// uniq is a name no earlier call gave.
func (w *walkWorld) uniq(prefix string) string {
	w.n++
	return fmt.Sprintf("%s-%d", prefix, w.n)
}

func (w *walkWorld) channel() snowflake.ID {
	var c wire.Channel
	w.e.ok("POST", fmt.Sprintf("%s/guilds/%d/channels", v10, w.guild), w.alice.Token, map[string]any{"name": w.uniq("walk")}, &c)
	return c.ID
}

func (w *walkWorld) newInvite() string {
	var inv wire.Invite
	w.e.ok("POST", fmt.Sprintf("%s/channels/%d/invites", v10, w.general), w.alice.Token, map[string]any{}, &inv)
	return inv.Code
}

func (w *walkWorld) newRole() snowflake.ID {
	var r wire.Role
	w.e.ok("POST", fmt.Sprintf("%s/guilds/%d/roles", v10, w.guild), w.alice.Token, map[string]any{"name": w.uniq("role")}, &r)
	return r.ID
}

// member registers a user who joins the guild.
func (w *walkWorld) member() account {
	a := w.e.register(w.uniq("walk-member"), false)
	w.e.ok("POST", v10+"/invites/"+w.invite, a.Token, map[string]any{}, nil)
	return a
}

// post sends a message of alice's to general.
func (w *walkWorld) post(content string) snowflake.ID {
	return w.e.post(w.alice.Token, w.general, map[string]any{"content": content}).ID
}

func (w *walkWorld) react(msg snowflake.ID) {
	w.e.ok("PUT", fmt.Sprintf("%s/channels/%d/messages/%d/reactions/%s/@me", v10, w.general, msg, walkEmoji), w.alice.Token, nil, nil)
}

// attachment posts a message with a file and returns the file's signed
// URL's path and query under /api/v10.
func (w *walkWorld) attachment() string {
	w.t.Helper()
	var status int
	var raw []byte
	for {
		status, raw = w.e.upload("POST", fmt.Sprintf("%s/channels/%d/messages", v10, w.general), w.alice.Token,
			map[string]any{"content": "a file"}, uploadstest.File("files[0]", "cat.png", "image/png", uploadstest.PNG()))
		if status != http.StatusTooManyRequests {
			break
		}
		time.Sleep(retryAfter(w.t, nil, raw))
	}
	var m wire.Message
	if status != http.StatusOK || json.Unmarshal(raw, &m) != nil || len(m.Attachments) != 1 {
		w.t.Fatalf("upload: %d %s", status, raw)
	}
	u, err := url.Parse(m.Attachments[0].URL)
	if err != nil {
		w.t.Fatalf("attachment URL %q: %v", m.Attachments[0].URL, err)
	}
	path, ok := strings.CutPrefix(u.Path, v10)
	if !ok {
		w.t.Fatalf("attachment URL %q is not under %s", m.Attachments[0].URL, v10)
	}
	return path + "?" + u.RawQuery
}

// hookMessage executes the world's webhook and returns its message.
func (w *walkWorld) hookMessage() snowflake.ID {
	var m wire.Message
	w.e.ok("POST", whPath(w.hook)+"?wait=true", "", map[string]any{"content": "from the hook"}, &m)
	return m.ID
}

func (w *walkWorld) newApp() walkApp {
	var out struct {
		ID    snowflake.ID `json:"id"`
		Token string       `json:"token"`
	}
	w.e.ok("POST", v10+"/applications", w.alice.Token, map[string]any{"name": w.uniq("Walkbot")}, &out)
	if out.Token == "" {
		w.t.Fatalf("application %d without a bot token", out.ID)
	}
	return walkApp{ID: out.ID, Token: "Bot " + out.Token}
}

func (w *walkWorld) install(a walkApp) {
	w.e.ok("POST", fmt.Sprintf("%s/oauth2/authorize?client_id=%d&scope=bot", v10, a.ID), w.alice.Token,
		map[string]any{"guild_id": w.guild.String(), "permissions": "3072", "authorize": true}, nil)
}

func (w *walkWorld) command(guild bool) snowflake.ID {
	path := fmt.Sprintf("%s/applications/%d/commands", v10, w.app.ID)
	if guild {
		path = fmt.Sprintf("%s/applications/%d/guilds/%d/commands", v10, w.app.ID, w.guild)
	}
	var c struct {
		ID snowflake.ID `json:"id"`
	}
	w.e.ok("POST", path, w.app.Token, map[string]any{"name": w.uniq("cmd"), "description": "walks"}, &c)
	return c.ID
}

// invoke runs the ping command as bob; nextInteraction reads what the
// bot got.
func (w *walkWorld) invoke() {
	w.e.ok("POST", v10+"/interactions", w.bob.Token, map[string]any{
		"type": 2, "application_id": w.app.ID.String(), "guild_id": w.guild.String(), "channel_id": w.general.String(),
		"data": map[string]any{"id": w.cmd.String(), "name": "ping", "type": 1},
	}, nil)
}

// nextInteraction is the next INTERACTION_CREATE the bot got: its id
// and token.
func (w *walkWorld) nextInteraction() (snowflake.ID, string) {
	w.t.Helper()
	f, _, err := w.bot.Next("INTERACTION_CREATE", 15*time.Second, nil)
	if err != nil {
		w.t.Fatal(err)
	}
	var p struct {
		ID    snowflake.ID `json:"id"`
		Token string       `json:"token"`
	}
	if err := json.Unmarshal(f.D, &p); err != nil {
		w.t.Fatal(err)
	}
	return p.ID, p.Token
}

// interaction invokes the command and answers it with callback (nil:
// left unanswered); it returns the interaction's followup webhook path.
func (w *walkWorld) interaction(callback map[string]any) (snowflake.ID, string) {
	w.invoke()
	id, token := w.nextInteraction()
	if callback != nil {
		w.e.ok("POST", fmt.Sprintf("%s/interactions/%d/%s/callback", v10, id, token), "", callback, nil)
	}
	return id, token
}

func (w *walkWorld) followupPath(token string) string {
	return fmt.Sprintf("/webhooks/%d/%s", w.app.ID, token)
}

// walkEmoji is 👍 as a path segment.
const walkEmoji = "%F0%9F%91%8D"

// wreq is a walkReq.
func wreq(path, token string, body any) walkReq { return walkReq{path: path, token: token, body: body} }

// walkEmpty is an empty JSON object body.
var walkEmpty = map[string]any{}

// gatewayBot is the api role's own route.
const gatewayBot = "GET /gateway/bot"

// walkCases are the cases by route pattern.
var walkCases = map[string]walkCase{
	gatewayBot: {200, func(w *walkWorld) walkReq { return wreq("/gateway/bot", w.app.Token, nil) }, nil},
	// Accounts and the current user.
	"POST /auth/register": {200, func(w *walkWorld) walkReq {
		return wreq("/auth/register", "", map[string]any{"username": w.e.name(w.uniq("walk-new")), "password": "password123"})
	}, nil},
	"POST /auth/login": {200, func(w *walkWorld) walkReq {
		return wreq("/auth/login", "", map[string]any{"login": w.e.name("walk-alice"), "password": "password123"})
	}, nil},
	"GET /gateway":                 {200, func(w *walkWorld) walkReq { return wreq("/gateway", "", nil) }, nil},
	"GET /users/@me":               {200, func(w *walkWorld) walkReq { return wreq("/users/@me", w.alice.Token, nil) }, nil},
	"GET /oauth2/applications/@me": {200, func(w *walkWorld) walkReq { return wreq("/oauth2/applications/@me", w.app.Token, nil) }, nil},
	"GET /users/@me/guilds":        {200, func(w *walkWorld) walkReq { return wreq("/users/@me/guilds", w.bob.Token, nil) }, nil},
	"DELETE /users/@me/guilds/{guild}": {204, func(w *walkWorld) walkReq {
		return wreq(fmt.Sprintf("/users/@me/guilds/%d", w.guild), w.member().Token, nil)
	}, nil},
	"POST /users/@me/channels": {200, func(w *walkWorld) walkReq {
		return wreq("/users/@me/channels", w.alice.Token, map[string]any{"recipient_id": w.bob.ID.String()})
	}, nil},
	"GET /users/{user}": {200, func(w *walkWorld) walkReq { return wreq(fmt.Sprintf("/users/%d", w.bob.ID), w.alice.Token, nil) }, nil},

	// Guilds, roles, members.
	"POST /guilds":        {201, func(w *walkWorld) walkReq { return wreq("/guilds", w.alice.Token, map[string]any{"name": "Another"}) }, nil},
	"GET /guilds/{guild}": {200, func(w *walkWorld) walkReq { return wreq(fmt.Sprintf("/guilds/%d", w.guild), w.bob.Token, nil) }, nil},
	"PATCH /guilds/{guild}": {200, func(w *walkWorld) walkReq {
		return wreq(fmt.Sprintf("/guilds/%d", w.guild), w.alice.Token, map[string]any{"name": "Walk"})
	}, nil},
	"DELETE /guilds/{guild}": {204, func(w *walkWorld) walkReq {
		var g wire.Guild
		w.e.ok("POST", v10+"/guilds", w.alice.Token, map[string]any{"name": "Doomed"}, &g)
		return wreq(fmt.Sprintf("/guilds/%d", g.ID), w.alice.Token, nil)
	}, nil},
	"GET /guilds/{guild}/channels": {200, func(w *walkWorld) walkReq { return wreq(fmt.Sprintf("/guilds/%d/channels", w.guild), w.bob.Token, nil) }, nil},
	"POST /guilds/{guild}/channels": {201, func(w *walkWorld) walkReq {
		return wreq(fmt.Sprintf("/guilds/%d/channels", w.guild), w.alice.Token, map[string]any{"name": "more"})
	}, nil},
	"GET /guilds/{guild}/roles": {200, func(w *walkWorld) walkReq { return wreq(fmt.Sprintf("/guilds/%d/roles", w.guild), w.bob.Token, nil) }, nil},
	"POST /guilds/{guild}/roles": {200, func(w *walkWorld) walkReq {
		return wreq(fmt.Sprintf("/guilds/%d/roles", w.guild), w.alice.Token, map[string]any{"name": "extra"})
	}, nil},
	"PATCH /guilds/{guild}/roles": {200, func(w *walkWorld) walkReq {
		return wreq(fmt.Sprintf("/guilds/%d/roles", w.guild), w.alice.Token, []map[string]any{{"id": w.role.String(), "position": 1}})
	}, nil},
	"PATCH /guilds/{guild}/roles/{role}": {200, func(w *walkWorld) walkReq {
		return wreq(fmt.Sprintf("/guilds/%d/roles/%d", w.guild, w.role), w.alice.Token, map[string]any{"name": "walkers"})
	}, nil},
	"DELETE /guilds/{guild}/roles/{role}": {204, func(w *walkWorld) walkReq {
		return wreq(fmt.Sprintf("/guilds/%d/roles/%d", w.guild, w.newRole()), w.alice.Token, nil)
	}, nil},
	"GET /guilds/{guild}/members": {200, func(w *walkWorld) walkReq {
		return wreq(fmt.Sprintf("/guilds/%d/members?limit=2", w.guild), w.alice.Token, nil)
	}, nil},
	"GET /guilds/{guild}/members/{user}": {200, func(w *walkWorld) walkReq {
		return wreq(fmt.Sprintf("/guilds/%d/members/%d", w.guild, w.bob.ID), w.alice.Token, nil)
	}, nil},
	"PATCH /guilds/{guild}/members/{user}": {200, func(w *walkWorld) walkReq {
		return wreq(fmt.Sprintf("/guilds/%d/members/%d", w.guild, w.bob.ID), w.alice.Token, map[string]any{"nick": "bobby"})
	}, nil},
	"DELETE /guilds/{guild}/members/{user}": {204, func(w *walkWorld) walkReq {
		return wreq(fmt.Sprintf("/guilds/%d/members/%d", w.guild, w.member().ID), w.alice.Token, nil)
	}, nil},
	"PUT /guilds/{guild}/members/{user}/roles/{role}": {204, func(w *walkWorld) walkReq {
		return wreq(fmt.Sprintf("/guilds/%d/members/%d/roles/%d", w.guild, w.bob.ID, w.role), w.alice.Token, nil)
	}, nil},
	"DELETE /guilds/{guild}/members/{user}/roles/{role}": {204, func(w *walkWorld) walkReq {
		w.e.ok("PUT", fmt.Sprintf("%s/guilds/%d/members/%d/roles/%d", v10, w.guild, w.bob.ID, w.role), w.alice.Token, nil, nil)
		return wreq(fmt.Sprintf("/guilds/%d/members/%d/roles/%d", w.guild, w.bob.ID, w.role), w.alice.Token, nil)
	}, nil},
	"GET /guilds/{guild}/members/search": {200, func(w *walkWorld) walkReq {
		return wreq(fmt.Sprintf("/guilds/%d/members/search?query=walk-bob", w.guild), w.alice.Token, nil)
	}, nil},
	"PUT /guilds/{guild}/members/{user}": {403, func(w *walkWorld) walkReq {
		return wreq(fmt.Sprintf("/guilds/%d/members/%d", w.guild, w.bob.ID), w.app.Token, map[string]any{"access_token": "x"})
	}, nil},
	"GET /guilds/{guild}/preview": {200, func(w *walkWorld) walkReq { return wreq(fmt.Sprintf("/guilds/%d/preview", w.guild), w.bob.Token, nil) }, nil},

	// Moderation.
	"GET /guilds/{guild}/bans": {200, func(w *walkWorld) walkReq { return wreq(fmt.Sprintf("/guilds/%d/bans", w.guild), w.alice.Token, nil) }, nil},
	"GET /guilds/{guild}/bans/{user}": {200, func(w *walkWorld) walkReq {
		u := w.member()
		w.e.ok("PUT", fmt.Sprintf("%s/guilds/%d/bans/%d", v10, w.guild, u.ID), w.alice.Token, walkEmpty, nil)
		return wreq(fmt.Sprintf("/guilds/%d/bans/%d", w.guild, u.ID), w.alice.Token, nil)
	}, nil},
	"PUT /guilds/{guild}/bans/{user}": {204, func(w *walkWorld) walkReq {
		return wreq(fmt.Sprintf("/guilds/%d/bans/%d", w.guild, w.member().ID), w.alice.Token, walkEmpty)
	}, nil},
	"DELETE /guilds/{guild}/bans/{user}": {204, func(w *walkWorld) walkReq {
		u := w.member()
		w.e.ok("PUT", fmt.Sprintf("%s/guilds/%d/bans/%d", v10, w.guild, u.ID), w.alice.Token, walkEmpty, nil)
		return wreq(fmt.Sprintf("/guilds/%d/bans/%d", w.guild, u.ID), w.alice.Token, nil)
	}, nil},
	"POST /guilds/{guild}/bulk-ban": {200, func(w *walkWorld) walkReq {
		return wreq(fmt.Sprintf("/guilds/%d/bulk-ban", w.guild), w.alice.Token, map[string]any{"user_ids": []string{w.member().ID.String()}})
	}, nil},
	"GET /guilds/{guild}/audit-logs": {200, func(w *walkWorld) walkReq {
		return wreq(fmt.Sprintf("/guilds/%d/audit-logs?limit=1", w.guild), w.alice.Token, nil)
	}, nil},

	// Channels and messages.
	"GET /channels/{channel}": {200, func(w *walkWorld) walkReq { return wreq(fmt.Sprintf("/channels/%d", w.general), w.bob.Token, nil) }, nil},
	"PATCH /channels/{channel}": {200, func(w *walkWorld) walkReq {
		return wreq(fmt.Sprintf("/channels/%d", w.other), w.alice.Token, map[string]any{"topic": "walking"})
	}, nil},
	"DELETE /channels/{channel}": {200, func(w *walkWorld) walkReq {
		return wreq(fmt.Sprintf("/channels/%d", w.channel()), w.alice.Token, nil)
	}, nil},
	"PUT /channels/{channel}/permissions/{target}": {204, func(w *walkWorld) walkReq {
		return wreq(fmt.Sprintf("/channels/%d/permissions/%d", w.other, w.role), w.alice.Token, map[string]any{"type": 0, "allow": "1024", "deny": "0"})
	}, nil},
	"DELETE /channels/{channel}/permissions/{target}": {204, func(w *walkWorld) walkReq {
		w.e.ok("PUT", fmt.Sprintf("%s/channels/%d/permissions/%d", v10, w.other, w.role), w.alice.Token, map[string]any{"type": 0, "allow": "1024", "deny": "0"}, nil)
		return wreq(fmt.Sprintf("/channels/%d/permissions/%d", w.other, w.role), w.alice.Token, nil)
	}, nil},
	"POST /channels/{channel}/invites": {200, func(w *walkWorld) walkReq {
		return wreq(fmt.Sprintf("/channels/%d/invites", w.general), w.alice.Token, walkEmpty)
	}, nil},
	"POST /channels/{channel}/typing": {204, func(w *walkWorld) walkReq {
		return wreq(fmt.Sprintf("/channels/%d/typing", w.general), w.bob.Token, nil)
	}, nil},
	"GET /channels/{channel}/messages": {200, func(w *walkWorld) walkReq {
		return wreq(fmt.Sprintf("/channels/%d/messages?limit=1&around=%d", w.general, w.msg), w.bob.Token, nil)
	}, nil},
	"POST /channels/{channel}/messages": {200, func(w *walkWorld) walkReq {
		return wreq(fmt.Sprintf("/channels/%d/messages", w.general), w.bob.Token, map[string]any{"content": "hi"})
	}, nil},
	"POST /channels/{channel}/messages/bulk-delete": {204, func(w *walkWorld) walkReq {
		return wreq(fmt.Sprintf("/channels/%d/messages/bulk-delete", w.general), w.alice.Token,
			map[string]any{"messages": []string{w.post("one").String(), w.post("two").String()}})
	}, nil},
	"GET /channels/{channel}/messages/{message}": {200, func(w *walkWorld) walkReq {
		return wreq(fmt.Sprintf("/channels/%d/messages/%d", w.general, w.post("read me")), w.bob.Token, nil)
	}, nil},
	"PATCH /channels/{channel}/messages/{message}": {200, func(w *walkWorld) walkReq {
		return wreq(fmt.Sprintf("/channels/%d/messages/%d", w.general, w.post("edit me")), w.alice.Token, map[string]any{"content": "edited"})
	}, nil},
	"DELETE /channels/{channel}/messages/{message}": {204, func(w *walkWorld) walkReq {
		return wreq(fmt.Sprintf("/channels/%d/messages/%d", w.general, w.post("delete me")), w.alice.Token, nil)
	}, nil},
	"POST /channels/{channel}/messages/{message}/ack": {200, func(w *walkWorld) walkReq {
		return wreq(fmt.Sprintf("/channels/%d/messages/%d/ack", w.general, w.post("ack me")), w.bob.Token, walkEmpty)
	}, nil},
	"GET /channels/{channel}/messages/{message}/reactions/{emoji}": {200, func(w *walkWorld) walkReq {
		m := w.post("react")
		w.react(m)
		return wreq(fmt.Sprintf("/channels/%d/messages/%d/reactions/%s", w.general, m, walkEmoji), w.bob.Token, nil)
	}, nil},
	"PUT /channels/{channel}/messages/{message}/reactions/{emoji}/{user}": {204, func(w *walkWorld) walkReq {
		return wreq(fmt.Sprintf("/channels/%d/messages/%d/reactions/%s/@me", w.general, w.post("react"), walkEmoji), w.bob.Token, nil)
	}, nil},
	"DELETE /channels/{channel}/messages/{message}/reactions/{emoji}/{user}": {204, func(w *walkWorld) walkReq {
		m := w.post("react")
		w.react(m)
		return wreq(fmt.Sprintf("/channels/%d/messages/%d/reactions/%s/@me", w.general, m, walkEmoji), w.alice.Token, nil)
	}, nil},
	"DELETE /channels/{channel}/messages/{message}/reactions/{emoji}": {204, func(w *walkWorld) walkReq {
		m := w.post("react")
		w.react(m)
		return wreq(fmt.Sprintf("/channels/%d/messages/%d/reactions/%s", w.general, m, walkEmoji), w.alice.Token, nil)
	}, nil},
	"DELETE /channels/{channel}/messages/{a}/{b}": {204, func(w *walkWorld) walkReq {
		m := w.post("react")
		w.react(m)
		return wreq(fmt.Sprintf("/channels/%d/messages/%d/reactions", w.general, m), w.alice.Token, nil)
	}, nil},
	"GET /channels/{channel}/messages/pins": {200, func(w *walkWorld) walkReq {
		return wreq(fmt.Sprintf("/channels/%d/messages/pins", w.general), w.bob.Token, nil)
	}, nil},
	"PUT /channels/{channel}/messages/pins/{message}": {204, func(w *walkWorld) walkReq {
		return wreq(fmt.Sprintf("/channels/%d/messages/pins/%d", w.general, w.post("pin me")), w.alice.Token, nil)
	}, nil},
	"GET /channels/{channel}/pins": {200, func(w *walkWorld) walkReq { return wreq(fmt.Sprintf("/channels/%d/pins", w.general), w.bob.Token, nil) }, nil},
	"PUT /channels/{channel}/pins/{message}": {204, func(w *walkWorld) walkReq {
		return wreq(fmt.Sprintf("/channels/%d/pins/%d", w.general, w.post("pin me")), w.alice.Token, nil)
	}, nil},
	"DELETE /channels/{channel}/pins/{message}": {204, func(w *walkWorld) walkReq {
		m := w.post("unpin me")
		w.e.ok("PUT", fmt.Sprintf("%s/channels/%d/pins/%d", v10, w.general, m), w.alice.Token, nil, nil)
		return wreq(fmt.Sprintf("/channels/%d/pins/%d", w.general, m), w.alice.Token, nil)
	}, nil},

	// Threads.
	"POST /channels/{channel}/messages/{message}/threads": {201, func(w *walkWorld) walkReq {
		return wreq(fmt.Sprintf("/channels/%d/messages/%d/threads", w.general, w.post("thread me")), w.alice.Token, map[string]any{"name": "from a message"})
	}, nil},
	"POST /channels/{channel}/threads": {201, func(w *walkWorld) walkReq {
		return wreq(fmt.Sprintf("/channels/%d/threads", w.general), w.alice.Token, map[string]any{"name": "another", "type": 11})
	}, nil},
	"GET /channels/{channel}/threads/archived/public": {200, func(w *walkWorld) walkReq {
		return wreq(fmt.Sprintf("/channels/%d/threads/archived/public", w.general), w.bob.Token, nil)
	}, nil},
	"GET /channels/{channel}/threads/archived/private": {200, func(w *walkWorld) walkReq {
		return wreq(fmt.Sprintf("/channels/%d/threads/archived/private", w.general), w.alice.Token, nil)
	}, nil},
	"GET /channels/{channel}/users/@me/threads/archived/private": {200, func(w *walkWorld) walkReq {
		return wreq(fmt.Sprintf("/channels/%d/users/@me/threads/archived/private", w.general), w.bob.Token, nil)
	}, nil},
	"GET /guilds/{guild}/threads/active": {200, func(w *walkWorld) walkReq {
		return wreq(fmt.Sprintf("/guilds/%d/threads/active", w.guild), w.bob.Token, nil)
	}, nil},
	"GET /channels/{channel}/thread-members": {200, func(w *walkWorld) walkReq {
		return wreq(fmt.Sprintf("/channels/%d/thread-members", w.thread), w.alice.Token, nil)
	}, nil},
	"GET /channels/{channel}/thread-members/{user}": {200, func(w *walkWorld) walkReq {
		return wreq(fmt.Sprintf("/channels/%d/thread-members/%d", w.thread, w.alice.ID), w.bob.Token, nil)
	}, nil},
	"PUT /channels/{channel}/thread-members/{user}": {204, func(w *walkWorld) walkReq {
		return wreq(fmt.Sprintf("/channels/%d/thread-members/%d", w.thread, w.bob.ID), w.alice.Token, nil)
	}, nil},
	"DELETE /channels/{channel}/thread-members/{user}": {204, func(w *walkWorld) walkReq {
		w.e.ok("PUT", fmt.Sprintf("%s/channels/%d/thread-members/%d", v10, w.thread, w.bob.ID), w.alice.Token, nil, nil)
		return wreq(fmt.Sprintf("/channels/%d/thread-members/%d", w.thread, w.bob.ID), w.alice.Token, nil)
	}, nil},

	// An attachment uploaded through one node, fetched by its signed URL
	// through the other.
	"GET /attachments/{channel}/{attachment}/{name}": {200, func(w *walkWorld) walkReq {
		return wreq(w.attachment(), "", nil)
	}, nil},

	// Voice regions.
	"GET /voice/regions":          {200, func(w *walkWorld) walkReq { return wreq("/voice/regions", w.bob.Token, nil) }, nil},
	"GET /guilds/{guild}/regions": {200, func(w *walkWorld) walkReq { return wreq(fmt.Sprintf("/guilds/%d/regions", w.guild), w.bob.Token, nil) }, nil},

	// Invites by code.
	"GET /invites/{code}": {200, func(w *walkWorld) walkReq { return wreq("/invites/"+w.invite, "", nil) }, nil},
	"POST /invites/{code}": {200, func(w *walkWorld) walkReq {
		return wreq("/invites/"+w.newInvite(), w.e.register(w.uniq("walk-joiner"), false).Token, walkEmpty)
	}, nil},
	"DELETE /invites/{code}": {200, func(w *walkWorld) walkReq { return wreq("/invites/"+w.newInvite(), w.alice.Token, nil) }, nil},

	// What Concord does not have answers the same everywhere.
	"GET /guilds/{guild}/emojis":         {200, func(w *walkWorld) walkReq { return wreq(fmt.Sprintf("/guilds/%d/emojis", w.guild), w.bob.Token, nil) }, nil},
	"GET /guilds/{guild}/emojis/{emoji}": {404, func(w *walkWorld) walkReq { return wreq(fmt.Sprintf("/guilds/%d/emojis/1", w.guild), w.bob.Token, nil) }, nil},
	"POST /guilds/{guild}/emojis": {400, func(w *walkWorld) walkReq {
		return wreq(fmt.Sprintf("/guilds/%d/emojis", w.guild), w.alice.Token, map[string]any{"name": "x"})
	}, nil},
	"PATCH /guilds/{guild}/emojis/{emoji}": {404, func(w *walkWorld) walkReq {
		return wreq(fmt.Sprintf("/guilds/%d/emojis/1", w.guild), w.alice.Token, map[string]any{"name": "x"})
	}, nil},
	"DELETE /guilds/{guild}/emojis/{emoji}": {404, func(w *walkWorld) walkReq {
		return wreq(fmt.Sprintf("/guilds/%d/emojis/1", w.guild), w.alice.Token, nil)
	}, nil},
	"GET /guilds/{guild}/stickers": {200, func(w *walkWorld) walkReq { return wreq(fmt.Sprintf("/guilds/%d/stickers", w.guild), w.bob.Token, nil) }, nil},
	"GET /guilds/{guild}/stickers/{sticker}": {404, func(w *walkWorld) walkReq {
		return wreq(fmt.Sprintf("/guilds/%d/stickers/1", w.guild), w.bob.Token, nil)
	}, nil},
	"POST /guilds/{guild}/stickers": {400, func(w *walkWorld) walkReq {
		return wreq(fmt.Sprintf("/guilds/%d/stickers", w.guild), w.alice.Token, map[string]any{"name": "x"})
	}, nil},
	"PATCH /guilds/{guild}/stickers/{sticker}": {404, func(w *walkWorld) walkReq {
		return wreq(fmt.Sprintf("/guilds/%d/stickers/1", w.guild), w.alice.Token, map[string]any{"name": "x"})
	}, nil},
	"DELETE /guilds/{guild}/stickers/{sticker}": {404, func(w *walkWorld) walkReq {
		return wreq(fmt.Sprintf("/guilds/%d/stickers/1", w.guild), w.alice.Token, nil)
	}, nil},
	"GET /stickers/{sticker}": {404, func(w *walkWorld) walkReq { return wreq("/stickers/1", w.bob.Token, nil) }, nil},

	// Webhooks: managed by id, used by token.
	"POST /channels/{channel}/webhooks": {200, func(w *walkWorld) walkReq {
		return wreq(fmt.Sprintf("/channels/%d/webhooks", w.other), w.alice.Token, map[string]any{"name": "Another"})
	}, nil},
	"GET /channels/{channel}/webhooks": {200, func(w *walkWorld) walkReq {
		return wreq(fmt.Sprintf("/channels/%d/webhooks", w.general), w.alice.Token, nil)
	}, nil},
	"GET /guilds/{guild}/webhooks": {200, func(w *walkWorld) walkReq {
		return wreq(fmt.Sprintf("/guilds/%d/webhooks", w.guild), w.alice.Token, nil)
	}, nil},
	"GET /webhooks/{webhook}": {200, func(w *walkWorld) walkReq { return wreq(fmt.Sprintf("/webhooks/%d", w.hook.ID), w.alice.Token, nil) }, nil},
	"PATCH /webhooks/{webhook}": {200, func(w *walkWorld) walkReq {
		return wreq(fmt.Sprintf("/webhooks/%d", w.hook.ID), w.alice.Token, map[string]any{"name": "Walker"})
	}, nil},
	"DELETE /webhooks/{webhook}": {204, func(w *walkWorld) walkReq {
		return wreq(fmt.Sprintf("/webhooks/%d", w.e.createWebhook(w.alice.Token, w.other, "Doomed").ID), w.alice.Token, nil)
	}, nil},
	"GET /webhooks/{webhook}/{token}": {200, func(w *walkWorld) walkReq { return wreq(strings.TrimPrefix(whPath(w.hook), v10), "", nil) }, nil},
	"PATCH /webhooks/{webhook}/{token}": {200, func(w *walkWorld) walkReq {
		return wreq(strings.TrimPrefix(whPath(w.hook), v10), "", map[string]any{"name": "Walker"})
	}, nil},
	"DELETE /webhooks/{webhook}/{token}": {204, func(w *walkWorld) walkReq {
		return wreq(strings.TrimPrefix(whPath(w.e.createWebhook(w.alice.Token, w.other, "Doomed")), v10), "", nil)
	}, nil},
	"POST /webhooks/{webhook}/{token}": {200, func(w *walkWorld) walkReq {
		return wreq(strings.TrimPrefix(whPath(w.hook), v10)+"?wait=true", "", map[string]any{"content": "hooked"})
	}, nil},
	// The round trip of issue 33: executed through one api node, the
	// message is read, edited and deleted by token through the other.
	"GET /webhooks/{webhook}/{token}/messages/{message}": {200, func(w *walkWorld) walkReq {
		return wreq(fmt.Sprintf("%s/messages/%d", strings.TrimPrefix(whPath(w.hook), v10), w.hookMessage()), "", nil)
	}, nil},
	"PATCH /webhooks/{webhook}/{token}/messages/{message}": {200, func(w *walkWorld) walkReq {
		return wreq(fmt.Sprintf("%s/messages/%d", strings.TrimPrefix(whPath(w.hook), v10), w.hookMessage()), "", map[string]any{"content": "edited"})
	}, nil},
	"DELETE /webhooks/{webhook}/{token}/messages/{message}": {204, func(w *walkWorld) walkReq {
		return wreq(fmt.Sprintf("%s/messages/%d", strings.TrimPrefix(whPath(w.hook), v10), w.hookMessage()), "", nil)
	}, nil},

	// Applications and their commands.
	"POST /applications": {201, func(w *walkWorld) walkReq {
		return wreq("/applications", w.alice.Token, map[string]any{"name": w.uniq("App")})
	}, nil},
	"GET /applications":     {200, func(w *walkWorld) walkReq { return wreq("/applications", w.alice.Token, nil) }, nil},
	"GET /applications/@me": {200, func(w *walkWorld) walkReq { return wreq("/applications/@me", w.app.Token, nil) }, nil},
	"PATCH /applications/@me": {200, func(w *walkWorld) walkReq {
		return wreq("/applications/@me", w.app.Token, map[string]any{"description": "walks"})
	}, nil},
	"GET /applications/{app}": {200, func(w *walkWorld) walkReq { return wreq(fmt.Sprintf("/applications/%d", w.app.ID), w.alice.Token, nil) }, nil},
	"PATCH /applications/{app}": {200, func(w *walkWorld) walkReq {
		return wreq(fmt.Sprintf("/applications/%d", w.app.ID), w.alice.Token, map[string]any{"description": "walks"})
	}, nil},
	"POST /applications/{app}/bot/reset": {200, func(w *walkWorld) walkReq {
		return wreq(fmt.Sprintf("/applications/%d/bot/reset", w.newApp().ID), w.alice.Token, nil)
	}, nil},
	"GET /applications/{app}/commands": {200, func(w *walkWorld) walkReq {
		return wreq(fmt.Sprintf("/applications/%d/commands", w.app.ID), w.app.Token, nil)
	}, nil},
	"POST /applications/{app}/commands": {201, func(w *walkWorld) walkReq {
		return wreq(fmt.Sprintf("/applications/%d/commands", w.app.ID), w.app.Token, map[string]any{"name": w.uniq("new"), "description": "walks"})
	}, nil},
	// A bulk overwrite of a fresh application's commands: the world's
	// ping must stay.
	"PUT /applications/{app}/commands": {200, func(w *walkWorld) walkReq {
		a := w.newApp()
		return wreq(fmt.Sprintf("/applications/%d/commands", a.ID), a.Token, []map[string]any{{"name": "one", "description": "walks"}})
	}, nil},
	"GET /applications/{app}/commands/{cmd}": {200, func(w *walkWorld) walkReq {
		return wreq(fmt.Sprintf("/applications/%d/commands/%d", w.app.ID, w.command(false)), w.app.Token, nil)
	}, nil},
	"PATCH /applications/{app}/commands/{cmd}": {200, func(w *walkWorld) walkReq {
		return wreq(fmt.Sprintf("/applications/%d/commands/%d", w.app.ID, w.command(false)), w.app.Token, map[string]any{"description": "walks on"})
	}, nil},
	"DELETE /applications/{app}/commands/{cmd}": {204, func(w *walkWorld) walkReq {
		return wreq(fmt.Sprintf("/applications/%d/commands/%d", w.app.ID, w.command(false)), w.app.Token, nil)
	}, nil},
	"GET /applications/{app}/guilds/{guild}/commands": {200, func(w *walkWorld) walkReq {
		return wreq(fmt.Sprintf("/applications/%d/guilds/%d/commands", w.app.ID, w.guild), w.app.Token, nil)
	}, nil},
	"POST /applications/{app}/guilds/{guild}/commands": {201, func(w *walkWorld) walkReq {
		return wreq(fmt.Sprintf("/applications/%d/guilds/%d/commands", w.app.ID, w.guild), w.app.Token, map[string]any{"name": w.uniq("new"), "description": "walks"})
	}, nil},
	"PUT /applications/{app}/guilds/{guild}/commands": {200, func(w *walkWorld) walkReq {
		return wreq(fmt.Sprintf("/applications/%d/guilds/%d/commands", w.app.ID, w.guild), w.app.Token, []map[string]any{{"name": "one", "description": "walks"}})
	}, nil},
	"GET /applications/{app}/guilds/{guild}/commands/{cmd}": {200, func(w *walkWorld) walkReq {
		return wreq(fmt.Sprintf("/applications/%d/guilds/%d/commands/%d", w.app.ID, w.guild, w.command(true)), w.app.Token, nil)
	}, nil},
	"PATCH /applications/{app}/guilds/{guild}/commands/{cmd}": {200, func(w *walkWorld) walkReq {
		return wreq(fmt.Sprintf("/applications/%d/guilds/%d/commands/%d", w.app.ID, w.guild, w.command(true)), w.app.Token, map[string]any{"description": "walks on"})
	}, nil},
	"DELETE /applications/{app}/guilds/{guild}/commands/{cmd}": {204, func(w *walkWorld) walkReq {
		return wreq(fmt.Sprintf("/applications/%d/guilds/%d/commands/%d", w.app.ID, w.guild, w.command(true)), w.app.Token, nil)
	}, nil},

	// Installs.
	"POST /oauth2/authorize": {200, func(w *walkWorld) walkReq {
		return wreq(fmt.Sprintf("/oauth2/authorize?client_id=%d&scope=bot", w.newApp().ID), w.alice.Token,
			map[string]any{"guild_id": w.guild.String(), "permissions": "0", "authorize": true})
	}, nil},
	"DELETE /guilds/{guild}/integrations/{app}": {204, func(w *walkWorld) walkReq {
		a := w.newApp()
		w.install(a)
		return wreq(fmt.Sprintf("/guilds/%d/integrations/%d", w.guild, a.ID), w.alice.Token, nil)
	}, nil},

	// Interactions: invoked, answered and followed up by token.
	"POST /interactions": {204, func(w *walkWorld) walkReq {
		return wreq("/interactions", w.bob.Token, map[string]any{
			"type": 2, "application_id": w.app.ID.String(), "guild_id": w.guild.String(), "channel_id": w.general.String(),
			"data": map[string]any{"id": w.cmd.String(), "name": "ping", "type": 1},
		})
	}, func(w *walkWorld) { w.nextInteraction() }},
	"POST /interactions/{id}/{token}/callback": {204, func(w *walkWorld) walkReq {
		id, token := w.interaction(nil)
		return wreq(fmt.Sprintf("/interactions/%d/%s/callback", id, token), "", map[string]any{"type": 4, "data": map[string]any{"content": "pong"}})
	}, nil},
	"POST /webhooks/{app}/{token}": {200, func(w *walkWorld) walkReq {
		_, token := w.interaction(map[string]any{"type": 5})
		return wreq(w.followupPath(token), "", map[string]any{"content": "followed up"})
	}, nil},
	"GET /webhooks/{app}/{token}/messages/{msg}": {200, func(w *walkWorld) walkReq {
		_, token := w.interaction(map[string]any{"type": 4, "data": map[string]any{"content": "pong"}})
		return wreq(w.followupPath(token)+"/messages/@original", "", nil)
	}, nil},
	"PATCH /webhooks/{app}/{token}/messages/{msg}": {200, func(w *walkWorld) walkReq {
		_, token := w.interaction(map[string]any{"type": 5})
		return wreq(w.followupPath(token)+"/messages/@original", "", map[string]any{"content": "done"})
	}, nil},
	"DELETE /webhooks/{app}/{token}/messages/{msg}": {204, func(w *walkWorld) walkReq {
		_, token := w.interaction(map[string]any{"type": 5})
		var m wire.Message
		w.e.ok("POST", v10+w.followupPath(token), "", map[string]any{"content": "followup"}, &m)
		return wreq(fmt.Sprintf("%s/messages/%d", w.followupPath(token), m.ID), "", nil)
	}, nil},
}
