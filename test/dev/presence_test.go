package dev

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/concord-chat/concord/internal/gwtest"
	"github.com/concord-chat/concord/internal/resttest"
	"github.com/concord-chat/concord/runtime/adapters/counters/counterstest"
	"github.com/concord-chat/concord/runtime/app"
	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/config"
	"github.com/concord-chat/concord/runtime/services/presencerole"
	"github.com/concord-chat/concord/runtime/services/wiring"
)

// gwClient is a gateway session of these tests: the shared test client
// (gwtest) with the test's failure reporting.
type gwClient struct {
	*gwtest.Conn
	t    *testing.T
	name string
}

// gwWait bounds every wait for a frame of these tests.
const gwWait = 15 * time.Second

// dialAs identifies with the given properties.os and presence (nil: none)
// and waits for READY.
func dialAs(t *testing.T, addr, name, token, os string, pres map[string]any) *gwClient {
	t.Helper()
	g := dialGateway(t, addr, name, token, gwtest.Options{OS: os, Presence: pres})
	g.next("READY")
	return g
}

// dialGateway connects and identifies per o (its Name is name); it does
// not wait for READY.
func dialGateway(t *testing.T, addr, name, token string, o gwtest.Options) *gwClient {
	t.Helper()
	o.Name = name
	c, err := gwtest.Dial(gwtest.URL(addr), token, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return &gwClient{Conn: c, t: t, name: name}
}

func (g *gwClient) send(op int, d any) {
	g.t.Helper()
	if err := g.Send(map[string]any{"op": op, "d": d}); err != nil {
		g.t.Fatalf("%s: send op %d: %v", g.name, op, err)
	}
}

// until returns the dispatches received before the first one named typ
// for which match (nil: any) holds, and that one's d.
func (g *gwClient) until(typ string, match func(json.RawMessage) bool) ([]gwtest.Frame, json.RawMessage) {
	g.t.Helper()
	f, before, err := g.Next(typ, gwWait, match)
	if err != nil {
		g.t.Fatal(err)
	}
	return before, f.D
}

// next waits for the dispatch named typ.
func (g *gwClient) next(typ string) json.RawMessage {
	g.t.Helper()
	_, d := g.until(typ, nil)
	return d
}

// none fails if any dispatch named typ arrives before the message marker
// (a MESSAGE_CREATE whose content is marker).
func (g *gwClient) none(typ, marker string, also func(gwtest.Frame) bool) {
	g.t.Helper()
	before, _ := g.until("MESSAGE_CREATE", func(d json.RawMessage) bool { return strings.Contains(string(d), marker) })
	for _, f := range before {
		if f.Type == typ && (also == nil || also(f)) {
			g.t.Fatalf("%s: unexpected %s before %s: %s", g.name, f.Type, marker, f.D)
		}
	}
}

type testUser struct {
	Token  string `json:"token"`
	UserID string `json:"user_id"`
}

// presenceFixture is a platform with a fake presence clock, a guild owned
// by alice and its general channel.
type presenceFixture struct {
	t       *testing.T
	p       *app.Node
	addr    string
	clock   *counterstest.Clock // the presence role's clock: windows pass when the test says so
	guild   string
	general string
	invite  string
	users   map[string]testUser
	markers int
	// sessions counts the sessions dial opened.
	sessions int
}

func newPresenceFixture(t *testing.T, members ...string) *presenceFixture {
	clock := counterstest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	p, addr := startTestPlatform(t, func(c *config.Config) {
		c.Presence = config.Presence{Window: 5 * time.Second, TickInterval: -1, Now: clock.Now}
	})
	f := &presenceFixture{t: t, p: p, addr: addr, clock: clock, users: make(map[string]testUser)}
	f.register("alice")
	var g struct {
		ID string `json:"id"`
	}
	resttest.Call(t, addr, f.users["alice"].Token, "POST", "/guilds", map[string]string{"name": "presence"}, &g)
	f.guild = g.ID
	var chans []struct {
		ID   string `json:"id"`
		Name string `json:"name"`
	}
	resttest.Call(t, addr, f.users["alice"].Token, "GET", "/guilds/"+g.ID+"/channels", nil, &chans)
	for _, c := range chans {
		if c.Name == "general" {
			f.general = c.ID
		}
	}
	var inv struct {
		Code string `json:"code"`
	}
	resttest.Call(t, addr, f.users["alice"].Token, "POST", "/channels/"+f.general+"/invites", map[string]any{}, &inv)
	f.invite = inv.Code
	for _, m := range members {
		f.join(m)
	}
	return f
}

func (f *presenceFixture) register(name string) {
	var u testUser
	resttest.Call(f.t, f.addr, "", "POST", "/auth/register", map[string]string{"username": name, "password": name + " password!"}, &u)
	f.users[name] = u
}

func (f *presenceFixture) join(name string) {
	f.register(name)
	resttest.Call(f.t, f.addr, f.users[name].Token, "POST", "/invites/"+f.invite, map[string]any{}, nil)
}

// dial connects a user and waits for the guild's GUILD_CREATE and for
// the presence role to know the session.
func (f *presenceFixture) dial(name, os string, pres map[string]any) *gwClient {
	g := dialAs(f.t, f.addr, name, f.users[name].Token, os, pres)
	g.next("GUILD_CREATE")
	f.sessions++
	f.waitSessions(f.sessions)
	return g
}

// presence is the presence role's in-process service holder, the one
// the role provides to the process's seams in `concord dev`.
func (f *presenceFixture) presence() *presencerole.Local {
	f.t.Helper()
	l, ok := wiring.Lookup(f.p.Seams(), presencerole.LocalKey)
	if !ok {
		f.t.Fatal("the presence role provided no in-process service")
	}
	return l
}

// tick closes the coalescing window: due presence changes are broadcast.
func (f *presenceFixture) tick() {
	f.clock.Advance(6 * time.Second)
	f.presence().Service().Tick(context.Background())
}

// marker posts a message in general and returns its content; it reaches
// every connected member after everything the guild sent before it.
func (f *presenceFixture) marker() string {
	f.markers++
	content := "marker-" + time.Now().Format("150405.000000") + "-" + string(rune('a'+f.markers%26))
	resttest.Call(f.t, f.addr, f.users["alice"].Token, "POST", "/channels/"+f.general+"/messages", map[string]string{"content": content}, nil)
	return content
}

// waitSessions waits until the presence role knows n sessions.
func (f *presenceFixture) waitSessions(n int) {
	f.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for f.presence().Service().Sessions() != n {
		if time.Now().After(deadline) {
			f.t.Fatalf("presence knows %d sessions, want %d", f.presence().Service().Sessions(), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// presenceOf decodes a PRESENCE_UPDATE.
type presenceD struct {
	User struct {
		ID string `json:"id"`
	} `json:"user"`
	GuildID      string            `json:"guild_id"`
	Status       string            `json:"status"`
	ClientStatus map[string]string `json:"client_status"`
}

func decodePresence(t *testing.T, d json.RawMessage) presenceD {
	t.Helper()
	var p presenceD
	if err := json.Unmarshal(d, &p); err != nil {
		t.Fatalf("PRESENCE_UPDATE %s: %v", d, err)
	}
	return p
}

func presenceFor(userID string) func(json.RawMessage) bool {
	return func(d json.RawMessage) bool { return strings.Contains(string(d), `"user":{"id":"`+userID+`"}`) }
}

// TestPresenceMultiDeviceAndCoalescing: a user on desktop (online) and
// mobile (idle) shows online with both client statuses; dnd set on one
// device applies to all; a change reverted and a session opened and
// closed inside one window broadcast nothing.
func TestPresenceMultiDeviceAndCoalescing(t *testing.T) {
	f := newPresenceFixture(t, "bob")
	alice := f.dial("alice", "linux", nil)
	bob := f.users["bob"]
	desk := f.dial("bob", "linux", map[string]any{"status": "online", "since": 0, "activities": []any{}, "afk": false})
	f.dial("bob", "android", map[string]any{"status": "idle", "since": 0, "activities": []any{}, "afk": true})
	f.tick()
	_, d := alice.until("PRESENCE_UPDATE", presenceFor(bob.UserID))
	p := decodePresence(t, d)
	if p.Status != "online" || p.GuildID != f.guild || p.ClientStatus["desktop"] != "online" || p.ClientStatus["mobile"] != "idle" {
		t.Fatalf("desktop online + mobile idle: %s", d)
	}

	f.clock.Advance(time.Second)
	desk.send(3, map[string]any{"status": "dnd", "since": nil, "activities": []any{}, "afk": false})
	f.waitUpdate(bob.UserID, "dnd")
	f.tick()
	_, d = alice.until("PRESENCE_UPDATE", presenceFor(bob.UserID))
	if p := decodePresence(t, d); p.Status != "dnd" || p.ClientStatus["desktop"] != "dnd" || p.ClientStatus["mobile"] != "dnd" {
		t.Fatalf("dnd on one device: %s", d)
	}

	// Inside one window: online then back to dnd, and a web session that
	// opens and closes. Nothing changed when the window closes.
	f.clock.Advance(time.Second)
	desk.send(3, map[string]any{"status": "online", "since": nil, "activities": []any{}, "afk": false})
	f.waitUpdate(bob.UserID, "online")
	f.clock.Advance(time.Second)
	desk.send(3, map[string]any{"status": "dnd", "since": nil, "activities": []any{}, "afk": false})
	f.waitUpdate(bob.UserID, "dnd")
	web := dialAs(t, f.addr, "bob-web", bob.Token, "linux", nil)
	web.next("GUILD_CREATE")
	f.waitSessions(f.sessions + 1)
	web.CloseNormally()
	f.waitSessions(f.sessions)
	f.tick()
	alice.none("PRESENCE_UPDATE", f.marker(), func(fr gwtest.Frame) bool { return presenceFor(bob.UserID)(fr.D) })
}

// waitUpdate waits until the presence role folds userID's status to want.
func (f *presenceFixture) waitUpdate(userID, want string) {
	f.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		id, err := snowflake.Parse(userID)
		if err != nil {
			f.t.Fatal(err)
		}
		if got := f.presence().Service().Get(id).Status; string(got) == want {
			return
		}
		if time.Now().After(deadline) {
			f.t.Fatalf("presence of %s never became %s", userID, want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// listUpdate is a GUILD_MEMBER_LIST_UPDATE as the tests read it.
type listUpdate struct {
	GuildID     string `json:"guild_id"`
	ID          string `json:"id"`
	MemberCount int    `json:"member_count"`
	OnlineCount int    `json:"online_count"`
	Ops         []struct {
		Op    string            `json:"op"`
		Range [2]int            `json:"range"`
		Index int               `json:"index"`
		Items []json.RawMessage `json:"items"`
		Item  json.RawMessage   `json:"item"`
	} `json:"ops"`
}

func decodeList(t *testing.T, d json.RawMessage) listUpdate {
	t.Helper()
	var l listUpdate
	if err := json.Unmarshal(d, &l); err != nil {
		t.Fatalf("GUILD_MEMBER_LIST_UPDATE %s: %v", d, err)
	}
	return l
}

// rowUser returns the user id of a member row, or "group:<id>" for a
// header.
func rowUser(t *testing.T, item json.RawMessage) string {
	t.Helper()
	var r struct {
		Group *struct {
			ID string `json:"id"`
		} `json:"group"`
		Member *struct {
			User struct {
				ID string `json:"id"`
			} `json:"user"`
			Presence struct {
				Status string `json:"status"`
			} `json:"presence"`
		} `json:"member"`
	}
	if err := json.Unmarshal(item, &r); err != nil {
		t.Fatalf("row %s: %v", item, err)
	}
	if r.Group != nil {
		return "group:" + r.Group.ID
	}
	return r.Member.User.ID + ":" + r.Member.Presence.Status
}

// opsString renders a list update's ops as "OP index row" lines.
func opsString(t *testing.T, l listUpdate) string {
	var b strings.Builder
	for _, o := range l.Ops {
		switch o.Op {
		case "SYNC":
			b.WriteString("SYNC")
			for _, it := range o.Items {
				b.WriteString(" " + rowUser(t, it))
			}
		case "DELETE":
			b.WriteString("DELETE " + itoa(o.Index))
		case "INVALIDATE":
			b.WriteString("INVALIDATE")
		default:
			b.WriteString(o.Op + " " + itoa(o.Index) + " " + rowUser(t, o.Item))
		}
		b.WriteString("; ")
	}
	return b.String()
}

func itoa(i int) string { return strconv.Itoa(i) }

// TestMemberListRangesOverSockets: op 14 [[0,99]] gets a SYNC of the
// rows; a member joining, coming online and going idle each send exactly
// the INSERT / DELETE+INSERT / UPDATE that moves those rows; a member
// denied a channel never appears in that channel's list, and cannot
// subscribe to it.
func TestMemberListRangesOverSockets(t *testing.T) {
	f := newPresenceFixture(t, "bob", "carol")
	alice := f.dial("alice", "linux", nil)
	a, b, c := f.users["alice"].UserID, f.users["bob"].UserID, f.users["carol"].UserID
	f.tick()
	alice.until("PRESENCE_UPDATE", presenceFor(a))

	alice.send(14, map[string]any{"guild_id": f.guild, "channels": map[string]any{f.general: [][]int{{0, 99}}}})
	general := decodeList(t, alice.next("GUILD_MEMBER_LIST_UPDATE"))
	want := "SYNC group:online " + a + ":online group:offline " + b + ":offline " + c + ":offline; "
	if got := opsString(t, general); got != want || general.GuildID != f.guild || general.OnlineCount != 1 || general.MemberCount != 3 {
		t.Fatalf("SYNC: %s (online %d, members %d), want %s", got, general.OnlineCount, general.MemberCount, want)
	}

	f.join("dave")
	d := f.users["dave"].UserID
	l := decodeList(t, alice.next("GUILD_MEMBER_LIST_UPDATE"))
	if got, want := opsString(t, l), "INSERT 5 "+d+":offline; "; got != want || l.MemberCount != 4 {
		t.Fatalf("member joined: %s (members %d), want %s", got, l.MemberCount, want)
	}

	bob := f.dial("bob", "linux", nil)
	f.tick()
	before, raw := alice.until("GUILD_MEMBER_LIST_UPDATE", nil)
	for _, fr := range before {
		if fr.Type == "PRESENCE_UPDATE" {
			t.Fatalf("PRESENCE_UPDATE before the list moved the row: %s", fr.D)
		}
	}
	l = decodeList(t, raw)
	if got, want := opsString(t, l), "DELETE 3; INSERT 2 "+b+":online; "; got != want || l.OnlineCount != 2 {
		t.Fatalf("member online: %s (online %d), want %s", got, l.OnlineCount, want)
	}

	f.clock.Advance(time.Second)
	bob.send(3, map[string]any{"status": "idle", "since": 0, "activities": []any{}, "afk": true})
	f.waitUpdate(b, "idle")
	f.tick()
	l = decodeList(t, alice.next("GUILD_MEMBER_LIST_UPDATE"))
	if got, want := opsString(t, l), "UPDATE 2 "+b+":idle; "; got != want {
		t.Fatalf("member idle: %s, want %s", got, want)
	}

	// A channel carol may not view has its own list without her.
	var secret struct {
		ID string `json:"id"`
	}
	resttest.Call(t, f.addr, f.users["alice"].Token, "POST", "/guilds/"+f.guild+"/channels", map[string]any{
		"name": "secret", "permission_overwrites": []map[string]any{{"id": c, "type": 1, "allow": "0", "deny": "1024"}},
	}, &secret)
	alice.send(14, map[string]any{"guild_id": f.guild, "channels": map[string]any{secret.ID: [][]int{{0, 99}}}})
	_, raw = alice.until("GUILD_MEMBER_LIST_UPDATE", func(d json.RawMessage) bool { return decodeList(t, d).ID != general.ID })
	hidden := decodeList(t, raw)
	want = "SYNC group:online " + a + ":online " + b + ":idle group:offline " + d + ":offline; "
	if got := opsString(t, hidden); got != want {
		t.Fatalf("secret SYNC: %s, want %s", got, want)
	}

	// Carol cannot subscribe to it; her coming online moves rows in the
	// general list only.
	carol := f.dial("carol", "linux", nil)
	carol.send(14, map[string]any{"guild_id": f.guild, "channels": map[string]any{secret.ID: [][]int{{0, 99}}}})
	f.tick()
	_, raw = alice.until("GUILD_MEMBER_LIST_UPDATE", nil)
	l = decodeList(t, raw)
	if got, want := opsString(t, l), "DELETE 4; INSERT 3 "+c+":online; "; l.ID != general.ID || got != want {
		t.Fatalf("carol online: list %s ops %s, want %s in %s", l.ID, got, want, general.ID)
	}
	m := f.marker()
	alice.none("GUILD_MEMBER_LIST_UPDATE", m, func(fr gwtest.Frame) bool { return strings.Contains(string(fr.D), c) })
	carol.none("GUILD_MEMBER_LIST_UPDATE", m, nil)
}

// TestRequestGuildMembersOverSockets: op 8 is answered with
// GUILD_MEMBERS_CHUNK echoing the nonce, honouring query, limit, user_ids
// (not_found) and presences; a malformed op 8 closes with 4002.
func TestRequestGuildMembersOverSockets(t *testing.T) {
	f := newPresenceFixture(t, "bob", "bert", "carol")
	alice := f.dial("alice", "linux", nil)
	f.dial("bob", "linux", nil)
	f.tick()
	bob := f.users["bob"].UserID
	alice.until("PRESENCE_UPDATE", presenceFor(bob))

	type chunk struct {
		GuildID string `json:"guild_id"`
		Members []struct {
			User struct {
				ID       string `json:"id"`
				Username string `json:"username"`
			} `json:"user"`
		} `json:"members"`
		ChunkIndex int      `json:"chunk_index"`
		ChunkCount int      `json:"chunk_count"`
		NotFound   []string `json:"not_found"`
		Presences  []struct {
			User struct {
				ID string `json:"id"`
			} `json:"user"`
			Status string `json:"status"`
		} `json:"presences"`
		Nonce string `json:"nonce"`
	}
	read := func() chunk {
		var c chunk
		if err := json.Unmarshal(alice.next("GUILD_MEMBERS_CHUNK"), &c); err != nil {
			t.Fatal(err)
		}
		return c
	}
	alice.send(8, map[string]any{"guild_id": f.guild, "query": "b", "limit": 10, "presences": true, "nonce": "q1"})
	c := read()
	names := []string{}
	for _, m := range c.Members {
		names = append(names, m.User.Username)
	}
	if c.Nonce != "q1" || c.GuildID != f.guild || c.ChunkCount != 1 || strings.Join(names, ",") != "bob,bert" && strings.Join(names, ",") != "bert,bob" {
		t.Fatalf("query chunk %+v", c)
	}
	if len(c.Presences) != 1 || c.Presences[0].User.ID != bob || c.Presences[0].Status != "online" {
		t.Fatalf("presences %+v", c.Presences)
	}

	alice.send(8, map[string]any{"guild_id": f.guild, "query": "", "limit": 1, "nonce": "q2"})
	if c := read(); c.Nonce != "q2" || len(c.Members) != 1 || c.Presences != nil {
		t.Fatalf("limit chunk %+v", c)
	}

	alice.send(8, map[string]any{"guild_id": f.guild, "user_ids": []string{f.users["carol"].UserID, "42"}, "nonce": "q3"})
	if c := read(); c.Nonce != "q3" || len(c.Members) != 1 || c.Members[0].User.ID != f.users["carol"].UserID ||
		len(c.NotFound) != 1 || c.NotFound[0] != "42" {
		t.Fatalf("user_ids chunk %+v", c)
	}

	alice.send(8, map[string]any{"guild_id": f.guild, "nonce": "bad"})
	if code := alice.closeCode(); code != 4002 {
		t.Fatalf("bad op 8 ended the connection with close %d, want 4002", code)
	}
}

// TestTypingGoesToFocusedSessions: TYPING_START reaches the session that
// has the channel open (op 14) and not the same user's other session, at
// most once per throttle window.
func TestTypingGoesToFocusedSessions(t *testing.T) {
	f := newPresenceFixture(t, "bob")
	focused := f.dial("bob", "linux", nil)
	elsewhere := f.dial("bob", "linux", nil)
	focused.send(14, map[string]any{"guild_id": f.guild, "channels": map[string]any{f.general: [][]int{{0, 99}}}})
	focused.next("GUILD_MEMBER_LIST_UPDATE")
	alice := f.users["alice"]
	resttest.Call(t, f.addr, alice.Token, "POST", "/channels/"+f.general+"/typing", nil, nil)
	d := focused.next("TYPING_START")
	if !strings.Contains(string(d), `"user_id":"`+alice.UserID+`"`) || !strings.Contains(string(d), `"channel_id":"`+f.general+`"`) {
		t.Fatalf("TYPING_START %s", d)
	}
	resttest.Call(t, f.addr, alice.Token, "POST", "/channels/"+f.general+"/typing", nil, nil) // throttled
	m := f.marker()
	focused.none("TYPING_START", m, nil)
	elsewhere.none("TYPING_START", m, nil)
}

// TestPresenceRoleCrashRecovery: a presence role that restarts knows
// nothing, rebuilds every session from the gateway's re-report without
// re-announcing anyone (guilds kept the frozen statuses), and then
// broadcasts live changes again.
func TestPresenceRoleCrashRecovery(t *testing.T) {
	f := newPresenceFixture(t, "bob")
	alice := f.dial("alice", "linux", nil)
	bob := f.dial("bob", "android", map[string]any{"status": "dnd", "since": 0, "activities": []any{map[string]any{"name": "chess", "type": 0}}, "afk": false})
	b := f.users["bob"].UserID
	f.tick()
	_, d := alice.until("PRESENCE_UPDATE", presenceFor(b))
	before := decodePresence(t, d)

	svc, err := f.presence().Restart(time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	bid, _ := snowflake.Parse(b)
	if svc.Sessions() != 0 || svc.Get(bid).Status != "offline" {
		t.Fatalf("fresh presence role knows %d sessions", svc.Sessions())
	}
	// An op 3 before the re-report is kept, not refused.
	f.clock.Advance(time.Second)
	alice.send(3, map[string]any{"status": "idle", "since": 0, "activities": []any{}, "afk": true})
	f.waitUpdate(f.users["alice"].UserID, "idle")
	f.p.Gateway().ReportSessions(context.Background())
	if n := svc.Sessions(); n != f.sessions {
		t.Fatalf("rebuilt %d sessions, want %d", n, f.sessions)
	}
	if p := svc.Get(bid); string(p.Status) != before.Status || p.ClientStatus.Mobile != "dnd" || len(p.Activities) != 1 {
		t.Fatalf("rebuilt presence %+v, before %+v", p, before)
	}
	f.tick()
	alice.none("PRESENCE_UPDATE", f.marker(), func(fr gwtest.Frame) bool { return presenceFor(b)(fr.D) })
	if p := svc.Get(bid); p.Status != "dnd" {
		t.Fatalf("after the window bob is %s", p.Status)
	}

	f.clock.Advance(time.Second)
	bob.send(3, map[string]any{"status": "online", "since": 0, "activities": []any{}, "afk": false})
	f.waitUpdate(b, "online")
	f.tick()
	_, d = alice.until("PRESENCE_UPDATE", presenceFor(b))
	if p := decodePresence(t, d); p.Status != "online" || p.ClientStatus["mobile"] != "online" {
		t.Fatalf("after recovery: %s", d)
	}
}

// closeCode waits for the server to close g's connection and returns the
// close code.
func (g *gwClient) closeCode() int {
	g.t.Helper()
	select {
	case <-g.Done():
	case <-time.After(gwWait):
		g.t.Fatalf("%s: the server did not close the connection within %v", g.name, gwWait)
	}
	code := g.CloseCode()
	if code == 0 {
		g.t.Fatalf("%s: connection ended without a close frame", g.name)
	}
	return code
}

// TestPresenceBadInput: an unknown status or an oversized activity closes
// with 4002, an op 3 flood with 4008, an op 14 that does not decode with
// 4002; op 14 for a channel the user cannot see is refused without
// closing.
func TestPresenceBadInput(t *testing.T) {
	f := newPresenceFixture(t)
	for name, d := range map[string]map[string]any{
		"unknown status":     {"status": "sleeping", "since": 0, "activities": []any{}, "afk": false},
		"oversized activity": {"status": "online", "since": 0, "activities": []any{map[string]any{"name": strings.Repeat("x", 200), "type": 0}}, "afk": false},
	} {
		g := f.dial("alice", "linux", nil)
		g.send(3, d)
		if c := g.closeCode(); c != 4002 {
			t.Errorf("%s: close %d, want 4002", name, c)
		}
	}
	g := f.dial("alice", "linux", nil)
	for i := 0; i < 6; i++ {
		g.send(3, map[string]any{"status": "online", "since": 0, "activities": []any{}, "afk": false})
	}
	if c := g.closeCode(); c != 4008 {
		t.Errorf("flood: close %d, want 4008", c)
	}
	g = f.dial("alice", "linux", nil)
	g.send(14, map[string]any{"guild_id": f.guild, "channels": map[string]any{f.general: []any{"all"}}})
	if c := g.closeCode(); c != 4002 {
		t.Errorf("bad op 14: close %d, want 4002", c)
	}
}
