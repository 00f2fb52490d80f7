package model

import (
	"fmt"
	"strconv"

	"pgregory.net/rapid"

	"github.com/concord-chat/concord/runtime/base/snowflake"
)

// The reference model: who is a member, with which roles, which
// overwrites each channel has, which messages exist, which DMs exist — and
// from those, computed independently of the server's permission engine,
// what each user may see and do. Permission rules are Discord's:
// @everyone and role bits, then the @everyone overwrite, the role
// overwrites together, the member overwrite; the owner holds everything;
// without VIEW_CHANNEL nothing else counts.

const (
	owner  = 0 // index of the guild owner in world.acct
	nUsers = 5 // owner, three people, one bot
	botIdx = 4
	allBit = ^uint64(0)
)

// bits the generator hands out in overwrites.
var overwriteBits = []uint64{permView, permSend, permHistory, permManMsg, permRoles}

type target struct {
	member bool
	id     snowflake.ID
}

type allowDeny struct{ allow, deny uint64 }

type mmsg struct {
	id      snowflake.ID
	ch      snowflake.ID
	author  int
	content string // the tag of the action that wrote it last
	ref     snowflake.ID
	alive   bool
	deleted int // action that deleted it
}

type mdm struct {
	id         snowflake.ID
	group      bool
	recipients []int
}

type nonceKey struct {
	user  int
	ch    snowflake.ID
	nonce string
}

// snapshot is the visibility after one action.
type snapshot struct {
	member [nUsers]bool
	vis    [nUsers]map[snowflake.ID]bool
}

type world struct {
	s    *server
	acct [nUsers]account

	guild, sync snowflake.ID
	chans       []snowflake.ID // general, c1, c2: the channels actions use
	r1, r2      snowflake.ID   // r1 (no bits) ranks below r2 (MANAGE_ROLES)
	roleBits    map[snowflake.ID]uint64
	rolePos     map[snowflake.ID]int
	invite      string

	member [nUsers]bool
	roles  [nUsers]map[snowflake.ID]bool
	ows    map[snowflake.ID]map[target]allowDeny

	msgs      []*mmsg
	byID      map[snowflake.ID]*mmsg
	tagAction map[string]int
	nonces    map[nonceKey]snowflake.ID
	pinned    map[snowflake.ID]bool
	// reacted holds, per message, the users whose 👍 is on it.
	reacted map[snowflake.ID]map[int]bool
	dms     []*mdm
	dmByID  map[snowflake.ID]*mdm
	dmPair  map[[2]int]*mdm

	action int        // index of the action running now (1-based)
	hist   []snapshot // hist[k]: after action k; hist[0]: after setup
	sends  []sendRec  // every successful send, for completeness

	streams [nUsers]*stream
	stats   *stats
}

type sendRec struct {
	action int
	ch     snowflake.ID
	dm     *mdm
	tag    string
}

func (w *world) tag() string { return "t" + strconv.Itoa(w.action) }

// base is a member's guild-level permissions.
func (w *world) base(u int) uint64 {
	if !w.member[u] {
		return 0
	}
	if u == owner {
		return allBit
	}
	b := w.roleBits[w.guild]
	for r := range w.roles[u] {
		b |= w.roleBits[r]
	}
	return b
}

// perms is a user's effective permissions in a guild channel now.
func (w *world) perms(u int, ch snowflake.ID) uint64 {
	if !w.member[u] {
		return 0
	}
	if u == owner {
		return allBit
	}
	p := w.base(u)
	o := w.ows[ch]
	if e, ok := o[target{false, w.guild}]; ok {
		p = p&^e.deny | e.allow
	}
	var a, d uint64
	for r := range w.roles[u] {
		if e, ok := o[target{false, r}]; ok {
			a |= e.allow
			d |= e.deny
		}
	}
	p = p&^d | a
	if e, ok := o[target{true, w.acct[u].ID}]; ok {
		p = p&^e.deny | e.allow
	}
	if p&permView == 0 {
		return 0
	}
	return p
}

// overwriteScope is what u may allow or deny in ch's overwrites, Discord's
// documented rule computed here on its own: everything for the owner; the
// permissions in ch when an overwrite of ch that applies to u allows
// MANAGE_ROLES; else u's guild-level permissions (the model's channels sit
// in no category). The state is the one before the edit, so an overwrite
// never vouches for itself.
func (w *world) overwriteScope(u int, ch snowflake.ID) uint64 {
	if u == owner {
		return allBit
	}
	for tg, e := range w.ows[ch] {
		applies := tg == target{false, w.guild} ||
			(!tg.member && w.roles[u][tg.id]) ||
			(tg.member && tg.id == w.acct[u].ID)
		if applies && e.allow&permRoles != 0 {
			return w.perms(u, ch)
		}
	}
	return w.base(u)
}

func (w *world) can(u int, ch snowflake.ID, bit uint64) bool { return w.perms(u, ch)&bit == bit }

func (w *world) highest(u int) int {
	top := 0
	for r := range w.roles[u] {
		top = max(top, w.rolePos[r])
	}
	return top
}

// sharesGuild is the DM rule: the model world has one guild.
func (w *world) sharesGuild(a, b int) bool { return a == b || (w.member[a] && w.member[b]) }

// snap records the visibility after the current action.
func (w *world) snap() {
	var s snapshot
	for u := range nUsers {
		s.member[u] = w.member[u]
		s.vis[u] = map[snowflake.ID]bool{}
		for _, ch := range append([]snowflake.ID{w.sync}, w.chans...) {
			if w.can(u, ch, permView) {
				s.vis[u][ch] = true
			}
		}
	}
	for len(w.hist) < w.action {
		w.hist = append(w.hist, w.hist[len(w.hist)-1])
	}
	w.hist = append(w.hist[:w.action], s)
}

// visibleAt reports whether u saw guild channel ch after action k.
func (w *world) visibleAt(k, u int, ch snowflake.ID) bool {
	if k >= len(w.hist) {
		k = len(w.hist) - 1
	}
	return w.hist[k].vis[u][ch]
}

func (w *world) recipient(dm *mdm, u int) bool {
	for _, r := range dm.recipients {
		if r == u {
			return true
		}
	}
	return false
}

// setup builds the world for one sequence: fresh accounts, a guild with
// three channels and a sync channel, two roles and an invite; every user
// but the owner connected to the gateway and not yet a member.
func newWorld(t *rapid.T, s *server) *world {
	w := &world{s: s, roleBits: map[snowflake.ID]uint64{}, rolePos: map[snowflake.ID]int{},
		ows: map[snowflake.ID]map[target]allowDeny{}, byID: map[snowflake.ID]*mmsg{}, tagAction: map[string]int{},
		nonces: map[nonceKey]snowflake.ID{}, pinned: map[snowflake.ID]bool{}, reacted: map[snowflake.ID]map[int]bool{}, dmByID: map[snowflake.ID]*mdm{}, dmPair: map[[2]int]*mdm{}}
	names := [nUsers]string{"owner", "ann", "ben", "cat", "bot"}
	for i := range nUsers {
		w.acct[i] = s.register(t, names[i], i == botIdx)
		w.roles[i] = map[snowflake.ID]bool{}
	}
	o := w.acct[owner].Token
	var g idObj
	s.must(t, "POST", "/guilds", o, map[string]any{"name": "model guild"}, &g)
	w.guild = g.ID
	var chans []idObj
	s.must(t, "GET", fmt.Sprintf("/guilds/%d/channels", g.ID), o, nil, &chans)
	w.chans = append(w.chans, chans[0].ID)
	for _, name := range []string{"c1", "c2"} {
		var c idObj
		s.must(t, "POST", fmt.Sprintf("/guilds/%d/channels", g.ID), o, map[string]any{"name": name, "type": 0}, &c)
		w.chans = append(w.chans, c.ID)
	}
	var sc idObj
	s.must(t, "POST", fmt.Sprintf("/guilds/%d/channels", g.ID), o, map[string]any{"name": "sync", "type": 0,
		"permission_overwrites": []map[string]any{{"id": g.ID.String(), "type": 0, "allow": strconv.Itoa(permView)}}}, &sc)
	w.sync = sc.ID
	w.ows[w.sync] = map[target]allowDeny{{false, w.guild}: {allow: permView}}
	for _, ch := range w.chans {
		w.ows[ch] = map[target]allowDeny{}
	}
	// A new role goes right above @everyone: r2 first, then r1 below it.
	var r2, r1 idObj
	s.must(t, "POST", fmt.Sprintf("/guilds/%d/roles", g.ID), o, map[string]any{"name": "r2", "permissions": strconv.Itoa(permRoles)}, &r2)
	s.must(t, "POST", fmt.Sprintf("/guilds/%d/roles", g.ID), o, map[string]any{"name": "r1", "permissions": "0"}, &r1)
	w.r1, w.r2 = r1.ID, r2.ID
	var roles []struct {
		ID          snowflake.ID `json:"id"`
		Position    int          `json:"position"`
		Permissions string       `json:"permissions"`
	}
	s.must(t, "GET", fmt.Sprintf("/guilds/%d/roles", g.ID), o, nil, &roles)
	for _, r := range roles {
		bits, err := strconv.ParseUint(r.Permissions, 10, 64)
		if err != nil {
			t.Fatalf("role %d permissions %q", r.ID, r.Permissions)
		}
		w.roleBits[r.ID], w.rolePos[r.ID] = bits, r.Position
	}
	if w.rolePos[w.r1] >= w.rolePos[w.r2] || w.roleBits[w.guild]&(permView|permSend|permHistory) != permView|permSend|permHistory {
		t.Fatalf("setup roles = %+v", roles)
	}
	var inv struct {
		Code string `json:"code"`
	}
	s.must(t, "POST", fmt.Sprintf("/channels/%d/invites", w.chans[0]), o, map[string]any{}, &inv)
	w.invite = inv.Code
	w.member[owner] = true
	w.hist = []snapshot{{}}
	w.snap()
	for u := 1; u < nUsers; u++ {
		w.streams[u] = w.identify(t, u)
	}
	return w
}
