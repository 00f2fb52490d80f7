package model

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strconv"

	"pgregory.net/rapid"

	"github.com/concord-chat/concord/runtime/base/snowflake"
)

// expect compares a REST answer with the model's verdict: allowed must
// succeed, forbidden must fail (with code, when the model knows it).
func (w *world) expect(t *rapid.T, what string, r reply, allowed bool, code int) {
	t.Helper()
	w.stats.count(what, allowed)
	switch {
	case allowed && !r.ok():
		t.Fatalf("action %d %s: the model allows it, the server answered %s", w.action, what, r)
	case !allowed && r.ok():
		t.Fatalf("VIOLATION at action %d %s: the model forbids it (code %d), the server answered %s", w.action, what, code, r)
	case !allowed && code != 0 && r.code() != code:
		t.Fatalf("action %d %s: the model expects code %d, the server answered %s", w.action, what, code, r)
	case !r.ok() && (bytes.Contains(r.Body, []byte(`"content"`)) || bytes.Contains(r.Body, []byte(`"channel_id"`))):
		t.Fatalf("VIOLATION at action %d %s: an error answer carries stored content: %s", w.action, what, r)
	}
}

// barrier posts sync marker k and waits until every connected member's
// stream has it, then checks what every stream received so far.
func (w *world) barrier(t *rapid.T) {
	t.Helper()
	marker := "sync-" + strconv.Itoa(w.action)
	w.s.must(t, "POST", fmt.Sprintf("/channels/%d/messages", w.sync), w.acct[owner].Token, map[string]any{"content": marker}, nil)
	for u := 1; u < nUsers; u++ {
		st := w.streams[u]
		if st.live() && w.member[u] {
			st.conn.waitFor(t, w.acct[u].Name+" "+marker, func(fs []dispatch) bool { return hasContent(fs, marker) })
		}
	}
	w.processAll(t)
}

func (w *world) processAll(t *rapid.T) {
	t.Helper()
	for u := 1; u < nUsers; u++ {
		if w.streams[u] != nil {
			w.streams[u].process(t)
		}
	}
}

func hasContent(fs []dispatch, content string) bool {
	for i := len(fs) - 1; i >= 0; i-- {
		if fs[i].T == "MESSAGE_CREATE" {
			var m eventMsg
			if json.Unmarshal(fs[i].D, &m) == nil && m.Content == content {
				return true
			}
		}
	}
	return false
}

func (w *world) user(t *rapid.T, label string, from int) int {
	return rapid.IntRange(from, nUsers-1).Draw(t, label)
}

func (w *world) channel(t *rapid.T) snowflake.ID {
	return w.chans[rapid.IntRange(0, len(w.chans)-1).Draw(t, "channel")]
}

// join: a user accepts the invite.
func (w *world) join(t *rapid.T) {
	u := w.user(t, "user", 1)
	r := w.s.call(t, "POST", "/invites/"+w.invite, w.acct[u].Token, map[string]any{})
	w.expect(t, "join", r, true, 0)
	if !w.member[u] {
		w.member[u] = true
		w.roles[u] = map[snowflake.ID]bool{}
	}
	w.snap()
	w.barrier(t)
}

// leave: a member leaves (the owner cannot).
func (w *world) leave(t *rapid.T) {
	u := w.user(t, "user", 1)
	r := w.s.call(t, "DELETE", fmt.Sprintf("/users/@me/guilds/%d", w.guild), w.acct[u].Token, nil)
	w.expect(t, "leave", r, w.member[u], 0)
	w.member[u] = false
	w.roles[u] = map[snowflake.ID]bool{}
	w.snap()
	if r.ok() {
		w.barrier(t)
	}
}

// role grants or removes r1 or r2: MANAGE_ROLES at guild level and the
// role strictly below the actor's highest (the owner is above all).
func (w *world) role(t *rapid.T) {
	actor := rapid.SampledFrom([]int{owner, owner, 1, 2, 3, 4}).Draw(t, "actor")
	u := w.user(t, "member", 1)
	role := rapid.SampledFrom([]snowflake.ID{w.r1, w.r2}).Draw(t, "role")
	add := rapid.Bool().Draw(t, "add")
	allowed, code := true, 0
	switch {
	case !w.member[actor]:
		allowed, code = false, 50001
	case w.base(actor)&permRoles == 0:
		allowed, code = false, 50013
	case !w.member[u]:
		allowed, code = false, 10007
	case actor != owner && w.rolePos[role] >= w.highest(actor):
		allowed, code = false, 50013
	}
	method := "PUT"
	if !add {
		method = "DELETE"
	}
	r := w.s.call(t, method, fmt.Sprintf("/guilds/%d/members/%d/roles/%d", w.guild, w.acct[u].ID, role), w.acct[actor].Token, nil)
	w.expect(t, fmt.Sprintf("%s role %d of %s by %s", method, role, w.acct[u].Name, w.acct[actor].Name), r, allowed, code)
	if allowed {
		if add {
			w.roles[u][role] = true
		} else {
			delete(w.roles[u], role)
		}
	}
	w.snap()
	if r.ok() {
		w.barrier(t)
	}
}

func (w *world) drawBits(t *rapid.T, label string) uint64 {
	var b uint64
	mask := rapid.IntRange(0, 1<<len(overwriteBits)-1).Draw(t, label)
	for i, bit := range overwriteBits {
		if mask&(1<<i) != 0 {
			b |= bit
		}
	}
	return b
}

// overwrite puts or deletes one overwrite. Discord's rule: VIEW_CHANNEL
// and MANAGE_ROLES in the channel, and every bit the change touches held
// by the actor in the overwrite scope (world.overwriteScope; the owner
// holds all). Only the owner deletes.
func (w *world) overwrite(t *rapid.T) {
	actor := rapid.SampledFrom([]int{owner, owner, owner, 1, 2, 3, 4}).Draw(t, "actor")
	ch := w.channel(t)
	kind := rapid.IntRange(0, 3+nUsers-2).Draw(t, "target")
	var tg target
	switch kind {
	case 0:
		tg = target{false, w.guild}
	case 1:
		tg = target{false, w.r1}
	case 2:
		tg = target{false, w.r2}
	default:
		tg = target{true, w.acct[kind-2].ID}
	}
	del := actor == owner && rapid.IntRange(0, 3).Draw(t, "delete") == 0
	old, had := w.ows[ch][tg]
	next := allowDeny{}
	if !del {
		next.allow = w.drawBits(t, "allow")
		next.deny = w.drawBits(t, "deny") &^ next.allow
	}
	changed := (old.allow ^ next.allow) | (old.deny ^ next.deny)
	p := w.perms(actor, ch)
	allowed, code := true, 0
	switch {
	case !w.member[actor] || p&permView == 0:
		allowed, code = false, 50001
	case p&permRoles == 0:
		allowed, code = false, 50013
	case changed&^w.overwriteScope(actor, ch) != 0:
		allowed, code = false, 50013
	}
	typ := 0
	if tg.member {
		typ = 1
	}
	var r reply
	what := fmt.Sprintf("overwrite %d on %d by %s: %+v → %+v", tg.id, ch, w.acct[actor].Name, old, next)
	if del {
		r = w.s.call(t, "DELETE", fmt.Sprintf("/channels/%d/permissions/%d", ch, tg.id), w.acct[actor].Token, nil)
	} else {
		r = w.s.call(t, "PUT", fmt.Sprintf("/channels/%d/permissions/%d", ch, tg.id), w.acct[actor].Token,
			map[string]any{"type": typ, "allow": strconv.FormatUint(next.allow, 10), "deny": strconv.FormatUint(next.deny, 10)})
	}
	w.expect(t, what, r, allowed, code)
	if allowed {
		if del {
			delete(w.ows[ch], tg)
		} else {
			w.ows[ch][tg] = next
		}
	}
	_ = had
	w.snap()
	if r.ok() {
		w.barrier(t)
	}
}

// checkRendered compares a rendered message with the model: content as
// now, referenced message present exactly when it exists, as it is now.
func (w *world) checkRendered(t *rapid.T, what string, body []byte, m *mmsg) {
	t.Helper()
	var got msgObj
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatalf("action %d %s: decode %s: %v", w.action, what, body, err)
	}
	if got.ID != m.id || got.ChannelID != m.ch || got.Content != m.content {
		t.Fatalf("action %d %s: got %s, model has %+v", w.action, what, body, *m)
	}
	ref := w.byID[m.ref]
	switch {
	case ref != nil && ref.alive && (got.Ref == nil || got.Ref.Content != ref.content || got.Ref.ChannelID != ref.ch):
		t.Fatalf("action %d %s: referenced_message should be %q: %s", w.action, what, ref.content, body)
	case (ref == nil || !ref.alive) && got.Ref != nil:
		t.Fatalf("VIOLATION at action %d %s: referenced_message of a missing message: %s", w.action, what, body)
	}
}

// send posts in a guild channel, maybe as a reply, maybe with a nonce.
func (w *world) send(t *rapid.T) {
	u := w.user(t, "author", 0)
	ch := w.channel(t)
	body := map[string]any{"content": w.tag()}
	var ref *mmsg
	if len(w.msgs) > 0 && rapid.Bool().Draw(t, "reply") {
		ref = rapid.SampledFrom(w.msgs).Draw(t, "ref")
		body["message_reference"] = map[string]any{"message_id": ref.id.String()}
	}
	nonce := ""
	if rapid.Bool().Draw(t, "nonce") {
		nonce = rapid.SampledFrom([]string{"n1", "n2"}).Draw(t, "which")
		body["nonce"], body["enforce_nonce"] = nonce, true
	}
	r := w.s.call(t, "POST", fmt.Sprintf("/channels/%d/messages", ch), w.acct[u].Token, body)
	what := fmt.Sprintf("send by %s in %d %v", w.acct[u].Name, ch, body)
	if id, ok := w.nonces[nonceKey{u, ch, nonce}]; nonce != "" && ok {
		// A retry: the earlier message, as the sender may see it now.
		prev := w.byID[id]
		switch {
		case !w.can(u, ch, permView):
			w.expect(t, what+" (replay)", r, false, 50001)
		case !prev.alive:
			w.expect(t, what+" (replay of a deleted message)", r, false, 10008)
		default:
			w.expect(t, what+" (replay)", r, true, 0)
			w.checkRendered(t, what+" (replay)", r.Body, prev)
		}
		return
	}
	allowed, code := true, 0
	switch {
	case !w.can(u, ch, permView):
		allowed, code = false, 50001
	case ref != nil && (ref.ch != ch || !ref.alive):
		allowed, code = false, 50035
	case !w.can(u, ch, permSend):
		allowed, code = false, 50013
	}
	w.expect(t, what, r, allowed, code)
	if !allowed {
		return
	}
	var got msgObj
	if err := json.Unmarshal(r.Body, &got); err != nil {
		t.Fatal(err)
	}
	m := &mmsg{id: got.ID, ch: ch, author: u, content: w.tag(), alive: true}
	if ref != nil {
		m.ref = ref.id
	}
	w.addMessage(m)
	if nonce != "" {
		w.nonces[nonceKey{u, ch, nonce}] = m.id
	}
	w.sends = append(w.sends, sendRec{action: w.action, ch: ch, tag: m.content})
	w.checkRendered(t, what, r.Body, m)
}

func (w *world) addMessage(m *mmsg) {
	w.msgs = append(w.msgs, m)
	w.byID[m.id] = m
	w.tagAction[m.content] = w.action
}

// edit changes a message's content: VIEW_CHANNEL, and only the author.
func (w *world) edit(t *rapid.T) {
	if len(w.msgs) == 0 {
		t.Skip("no message yet")
	}
	u := w.user(t, "editor", 0)
	m := rapid.SampledFrom(w.msgs).Draw(t, "message")
	allowed, code := true, 0
	switch {
	case w.dmByID[m.ch] == nil && !w.can(u, m.ch, permView), w.dmByID[m.ch] != nil && !w.recipient(w.dmByID[m.ch], u):
		allowed, code = false, 50001
	case !m.alive:
		allowed, code = false, 10008
	case m.author != u:
		allowed, code = false, 50005
	}
	r := w.s.call(t, "PATCH", fmt.Sprintf("/channels/%d/messages/%d", m.ch, m.id), w.acct[u].Token, map[string]any{"content": w.tag()})
	what := fmt.Sprintf("edit of %d by %s", m.id, w.acct[u].Name)
	w.expect(t, what, r, allowed, code)
	if allowed {
		m.content = w.tag()
		w.tagAction[m.content] = w.action
		w.checkRendered(t, what, r.Body, m)
	}
}

// remove deletes a message: VIEW_CHANNEL, and the author or
// MANAGE_MESSAGES.
func (w *world) remove(t *rapid.T) {
	if len(w.msgs) == 0 {
		t.Skip("no message yet")
	}
	u := w.user(t, "deleter", 0)
	m := rapid.SampledFrom(w.msgs).Draw(t, "message")
	dm := w.dmByID[m.ch]
	allowed, code := true, 0
	switch {
	case dm == nil && !w.can(u, m.ch, permView), dm != nil && !w.recipient(dm, u):
		allowed, code = false, 50001
	case !m.alive:
		allowed, code = false, 10008
	case m.author != u && (dm != nil || !w.can(u, m.ch, permManMsg)):
		allowed, code = false, 50013
	}
	r := w.s.call(t, "DELETE", fmt.Sprintf("/channels/%d/messages/%d", m.ch, m.id), w.acct[u].Token, nil)
	w.expect(t, fmt.Sprintf("delete of %d by %s", m.id, w.acct[u].Name), r, allowed, code)
	if allowed {
		m.alive, m.deleted = false, w.action
	}
}

// history lists a channel: VIEW_CHANNEL, and the messages only with
// READ_MESSAGE_HISTORY, each as it is now.
func (w *world) history(t *rapid.T) {
	u := w.user(t, "reader", 0)
	ch := w.channel(t)
	r := w.s.call(t, "GET", fmt.Sprintf("/channels/%d/messages", ch), w.acct[u].Token, nil)
	what := fmt.Sprintf("history of %d by %s", ch, w.acct[u].Name)
	w.expect(t, what, r, w.can(u, ch, permView), 50001)
	if !r.ok() {
		return
	}
	var page []json.RawMessage
	if err := json.Unmarshal(r.Body, &page); err != nil {
		t.Fatal(err)
	}
	var want []*mmsg
	if w.can(u, ch, permHistory) {
		for _, m := range w.msgs {
			if m.ch == ch && m.alive {
				want = append(want, m)
			}
		}
		slices.Reverse(want)
	}
	if len(page) != len(want) {
		t.Fatalf("VIOLATION at action %d %s: %d messages, the model %d: %s", w.action, what, len(page), len(want), r.Body)
	}
	for i, raw := range page {
		w.checkRendered(t, what, raw, want[i])
	}
}

// get reads one message: VIEW_CHANNEL, then READ_MESSAGE_HISTORY.
func (w *world) get(t *rapid.T) {
	if len(w.msgs) == 0 {
		t.Skip("no message yet")
	}
	u := w.user(t, "reader", 0)
	m := rapid.SampledFrom(w.msgs).Draw(t, "message")
	dm := w.dmByID[m.ch]
	allowed, code := true, 0
	switch {
	case dm == nil && !w.can(u, m.ch, permView), dm != nil && !w.recipient(dm, u):
		allowed, code = false, 50001
	case dm == nil && !w.can(u, m.ch, permHistory):
		allowed, code = false, 50013
	case !m.alive:
		allowed, code = false, 10008
	}
	r := w.s.call(t, "GET", fmt.Sprintf("/channels/%d/messages/%d", m.ch, m.id), w.acct[u].Token, nil)
	what := fmt.Sprintf("get %d by %s", m.id, w.acct[u].Name)
	w.expect(t, what, r, allowed, code)
	if allowed {
		w.checkRendered(t, what, r.Body, m)
	}
}

// openDM opens a DM or a group DM: only with users the opener shares a
// guild with (50007).
func (w *world) openDM(t *rapid.T) {
	u := w.user(t, "opener", 0)
	others := rapid.SliceOfNDistinct(rapid.IntRange(0, nUsers-1), 1, 2, rapid.ID[int]).Filter(func(s []int) bool {
		return !slices.Contains(s, u)
	}).Draw(t, "recipients")
	allowed := true
	ids := []string{}
	for _, o := range others {
		allowed = allowed && w.sharesGuild(u, o)
		ids = append(ids, w.acct[o].ID.String())
	}
	r := w.s.call(t, "POST", "/users/@me/channels", w.acct[u].Token, map[string]any{"recipients": ids})
	w.expect(t, fmt.Sprintf("dm by %s with %v", w.acct[u].Name, others), r, allowed, 50007)
	if !allowed {
		return
	}
	var c idObj
	if err := json.Unmarshal(r.Body, &c); err != nil {
		t.Fatal(err)
	}
	if len(others) == 1 {
		pair := [2]int{min(u, others[0]), max(u, others[0])}
		if dm := w.dmPair[pair]; dm != nil {
			if dm.id != c.ID {
				t.Fatalf("action %d: second DM %d for a pair that has %d", w.action, c.ID, dm.id)
			}
			return
		}
		dm := &mdm{id: c.ID, recipients: []int{u, others[0]}}
		w.dmPair[pair] = dm
		w.addDM(dm)
		return
	}
	w.addDM(&mdm{id: c.ID, group: true, recipients: append([]int{u}, others...)})
}

func (w *world) addDM(dm *mdm) {
	w.dms = append(w.dms, dm)
	w.dmByID[dm.id] = dm
}

// sendDM posts in a DM: recipients only, and in a one-to-one DM only
// while the two still share a guild.
func (w *world) sendDM(t *rapid.T) {
	if len(w.dms) == 0 {
		t.Skip("no DM yet")
	}
	dm := rapid.SampledFrom(w.dms).Draw(t, "dm")
	u := w.user(t, "author", 0)
	allowed, code := true, 0
	switch {
	case !w.recipient(dm, u):
		allowed, code = false, 50001
	case !dm.group:
		for _, o := range dm.recipients {
			if o != u && !w.sharesGuild(u, o) {
				allowed, code = false, 50007
			}
		}
	}
	r := w.s.call(t, "POST", fmt.Sprintf("/channels/%d/messages", dm.id), w.acct[u].Token, map[string]any{"content": w.tag()})
	w.expect(t, fmt.Sprintf("dm send by %s in %d", w.acct[u].Name, dm.id), r, allowed, code)
	if !allowed {
		return
	}
	var got msgObj
	if err := json.Unmarshal(r.Body, &got); err != nil {
		t.Fatal(err)
	}
	m := &mmsg{id: got.ID, ch: dm.id, author: u, content: w.tag(), alive: true}
	w.addMessage(m)
	w.sends = append(w.sends, sendRec{action: w.action, dm: dm, tag: m.content})
}

// reconnect ends a user's session and identifies anew.
func (w *world) reconnect(t *rapid.T) {
	u := w.user(t, "user", 1)
	st := w.streams[u]
	if !st.dropped {
		st.process(t)
		st.conn.closeNormally()
	}
	st.settle(t, dispatch{T: "(reconnect)"}, w.action)
	w.streams[u] = w.identify(t, u)
	w.streams[u].process(t)
}

// drop cuts a user's connection; the session stays resumable.
func (w *world) drop(t *rapid.T) {
	u := w.user(t, "user", 1)
	st := w.streams[u]
	if st.dropped {
		t.Skip("already dropped")
	}
	st.conn.drop()
	st.process(t)
	st.dropped = true
	st.resume.seq = st.lastSeq
}

// resume reconnects a dropped session with RESUME: the server replays
// what it missed, which is checked like live events.
func (w *world) resumeSession(t *rapid.T, u int) {
	st := w.streams[u]
	st.conn = w.s.dial(t, w.acct[u], &st.resume)
	st.checked = 0
	st.dropped = false
	st.conn.waitFor(t, w.acct[u].Name+"'s RESUMED", hasType("RESUMED"))
	st.process(t)
}

func (w *world) resume(t *rapid.T) {
	u := w.user(t, "user", 1)
	if !w.streams[u].dropped {
		t.Skip("not dropped")
	}
	w.resumeSession(t, u)
}

// finish resumes dropped sessions, posts a last marker, waits for every
// message each live session should have received and checks the rest.
func (w *world) finish(t *rapid.T) {
	w.action++
	w.snap()
	for u := 1; u < nUsers; u++ {
		if w.streams[u].dropped {
			w.resumeSession(t, u)
		}
	}
	w.barrier(t)
	for u := 1; u < nUsers; u++ {
		st := w.streams[u]
		var want []string
		for _, s := range w.sends {
			if s.action <= st.start {
				continue
			}
			if (s.dm != nil && w.recipient(s.dm, u)) || (s.dm == nil && w.visibleAt(s.action, u, s.ch)) {
				want = append(want, s.tag)
			}
		}
		st.conn.waitFor(t, fmt.Sprintf("%s's messages %v", w.acct[u].Name, want), func(fs []dispatch) bool {
			got := map[string]bool{}
			for _, f := range fs {
				if f.T == "MESSAGE_CREATE" {
					var m eventMsg
					if json.Unmarshal(f.D, &m) == nil {
						got[m.Content] = true
					}
				}
			}
			for _, tag := range want {
				if !got[tag] && !st.seen[tag] {
					return false
				}
			}
			return true
		})
		st.process(t)
		st.settle(t, dispatch{T: "(end)"}, w.action)
		st.conn.closeNormally()
	}
}

// editRole changes r1's permissions (the owner edits the role).
func (w *world) editRole(t *rapid.T) {
	bits := w.drawBits(t, "bits")
	r := w.s.call(t, "PATCH", fmt.Sprintf("/guilds/%d/roles/%d", w.guild, w.r1), w.acct[owner].Token,
		map[string]any{"permissions": strconv.FormatUint(bits, 10)})
	w.expect(t, fmt.Sprintf("role-edit r1 → %d", bits), r, true, 0)
	w.roleBits[w.r1] = bits
	w.snap()
	w.barrier(t)
}

// channels lists the guild's channels and reads one: exactly the visible
// ones, and 50001 for a hidden one.
func (w *world) channels(t *rapid.T) {
	u := w.user(t, "reader", 0)
	r := w.s.call(t, "GET", fmt.Sprintf("/guilds/%d/channels", w.guild), w.acct[u].Token, nil)
	what := fmt.Sprintf("channels by %s", w.acct[u].Name)
	w.expect(t, what, r, w.member[u], 0)
	if r.ok() {
		var list []idObj
		if err := json.Unmarshal(r.Body, &list); err != nil {
			t.Fatal(err)
		}
		want := 0
		for _, ch := range append([]snowflake.ID{w.sync}, w.chans...) {
			if w.can(u, ch, permView) {
				want++
			}
		}
		for _, c := range list {
			if !w.isChan(c.ID) || !w.can(u, c.ID, permView) {
				t.Fatalf("VIOLATION at action %d %s: lists hidden channel %d: %s", w.action, what, c.ID, r.Body)
			}
		}
		if len(list) != want {
			t.Fatalf("action %d %s: %d channels, the model %d: %s", w.action, what, len(list), want, r.Body)
		}
	}
	ch := w.channel(t)
	r = w.s.call(t, "GET", fmt.Sprintf("/channels/%d", ch), w.acct[u].Token, nil)
	w.expect(t, fmt.Sprintf("channel %d by %s", ch, w.acct[u].Name), r, w.can(u, ch, permView), 50001)
}

// typing sends TYPING_START: VIEW_CHANNEL and SEND_MESSAGES; the
// dispatch names the channel, so it is checked like any other event.
func (w *world) typing(t *rapid.T) {
	u := w.user(t, "typer", 0)
	ch := w.channel(t)
	allowed, code := true, 0
	switch {
	case !w.can(u, ch, permView):
		allowed, code = false, 50001
	case !w.can(u, ch, permSend):
		allowed, code = false, 50013
	}
	r := w.s.call(t, "POST", fmt.Sprintf("/channels/%d/typing", ch), w.acct[u].Token, nil)
	w.expect(t, fmt.Sprintf("typing by %s in %d", w.acct[u].Name, ch), r, allowed, code)
}

// bulk deletes two messages named in a channel (MANAGE_MESSAGES there);
// ids of other channels' messages are ignored, never deleted or named.
func (w *world) bulk(t *rapid.T) {
	if len(w.msgs) < 2 {
		t.Skip("fewer than two messages")
	}
	u := w.user(t, "deleter", 0)
	ch := w.channel(t)
	picked := rapid.SliceOfNDistinct(rapid.SampledFrom(w.msgs), 2, 2, func(m *mmsg) snowflake.ID { return m.id }).Draw(t, "messages")
	allowed, code := true, 0
	switch {
	case !w.can(u, ch, permView):
		allowed, code = false, 50001
	case !w.can(u, ch, permManMsg):
		allowed, code = false, 50013
	}
	ids := []string{picked[0].id.String(), picked[1].id.String()}
	r := w.s.call(t, "POST", fmt.Sprintf("/channels/%d/messages/bulk-delete", ch), w.acct[u].Token, map[string]any{"messages": ids})
	w.expect(t, fmt.Sprintf("bulk-delete in %d by %s of %v", ch, w.acct[u].Name, ids), r, allowed, code)
	if allowed {
		for _, m := range picked {
			if m.ch == ch && m.alive {
				m.alive, m.deleted = false, w.action
			}
		}
	}
}

// pin pins or unpins a message (PIN_MESSAGES or MANAGE_MESSAGES in a
// guild channel, any recipient in a DM), then lists the channel's pins
// as another user: VIEW_CHANNEL, and the pinned messages only with
// READ_MESSAGE_HISTORY.
func (w *world) pin(t *rapid.T) {
	if len(w.msgs) == 0 {
		t.Skip("no message yet")
	}
	u := w.user(t, "pinner", 0)
	m := rapid.SampledFrom(w.msgs).Draw(t, "message")
	on := rapid.Bool().Draw(t, "pin")
	dm := w.dmByID[m.ch]
	allowed, code := true, 0
	switch {
	case dm == nil && !w.can(u, m.ch, permView), dm != nil && !w.recipient(dm, u):
		allowed, code = false, 50001
	case dm == nil && w.perms(u, m.ch)&(permPin|permManMsg) == 0:
		allowed, code = false, 50013
	case !m.alive:
		allowed, code = false, 10008
	}
	method := "PUT"
	if !on {
		method = "DELETE"
	}
	r := w.s.call(t, method, fmt.Sprintf("/channels/%d/pins/%d", m.ch, m.id), w.acct[u].Token, nil)
	w.expect(t, fmt.Sprintf("pin %s of %d by %s", method, m.id, w.acct[u].Name), r, allowed, code)
	if allowed {
		w.pinned[m.id] = on
	}
	if dm != nil {
		return
	}
	v := w.user(t, "lister", 0)
	r = w.s.call(t, "GET", fmt.Sprintf("/channels/%d/pins", m.ch), w.acct[v].Token, nil)
	what := fmt.Sprintf("pins of %d by %s", m.ch, w.acct[v].Name)
	w.expect(t, what, r, w.can(v, m.ch, permView), 50001)
	if !r.ok() {
		return
	}
	var list []msgObj
	if err := json.Unmarshal(r.Body, &list); err != nil {
		t.Fatal(err)
	}
	want := map[snowflake.ID]bool{}
	if w.can(v, m.ch, permHistory) {
		for _, x := range w.msgs {
			if x.ch == m.ch && x.alive && w.pinned[x.id] {
				want[x.id] = true
			}
		}
	}
	if len(list) != len(want) {
		t.Fatalf("VIOLATION at action %d %s: %d pins, the model %d: %s", w.action, what, len(list), len(want), r.Body)
	}
	for _, x := range list {
		if !want[x.ID] || x.Content != w.byID[x.ID].content {
			t.Fatalf("VIOLATION at action %d %s: pin %d not in the model's %v: %s", w.action, what, x.ID, want, r.Body)
		}
	}
}

// thumbsUp is the one emoji the model reacts with, escaped for a path.
var thumbsUp = url.PathEscape("\U0001F44D")

// react adds or removes the actor's reaction on a guild message, then
// lists who reacted as another user. Both need VIEW_CHANNEL and
// READ_MESSAGE_HISTORY; the first reaction of an emoji on a message also
// ADD_REACTIONS. Reaction events are checked by the streams like every
// event naming a channel.
func (w *world) react(t *rapid.T) {
	var guildMsgs []*mmsg
	for _, m := range w.msgs {
		if w.dmByID[m.ch] == nil {
			guildMsgs = append(guildMsgs, m)
		}
	}
	if len(guildMsgs) == 0 {
		t.Skip("no guild message yet")
	}
	u := w.user(t, "reactor", 0)
	m := rapid.SampledFrom(guildMsgs).Draw(t, "message")
	on := rapid.Bool().Draw(t, "react")
	readable := func(u int) (bool, int) {
		switch {
		case !w.can(u, m.ch, permView):
			return false, 50001
		case !w.can(u, m.ch, permHistory):
			return false, 50013
		case !m.alive:
			return false, 10008
		}
		return true, 0
	}
	allowed, code := readable(u)
	if allowed && on && len(w.reacted[m.id]) == 0 && !w.can(u, m.ch, permReact) {
		allowed, code = false, 50013
	}
	method := "PUT"
	if !on {
		method = "DELETE"
	}
	path := fmt.Sprintf("/channels/%d/messages/%d/reactions/%s", m.ch, m.id, thumbsUp)
	r := w.s.call(t, method, path+"/@me", w.acct[u].Token, nil)
	w.expect(t, fmt.Sprintf("reaction %s on %d by %s", method, m.id, w.acct[u].Name), r, allowed, code)
	if allowed {
		if w.reacted[m.id] == nil {
			w.reacted[m.id] = map[int]bool{}
		}
		if on {
			w.reacted[m.id][u] = true
		} else {
			delete(w.reacted[m.id], u)
		}
	}
	v := w.user(t, "reaction lister", 0)
	r = w.s.call(t, "GET", path, w.acct[v].Token, nil)
	what := fmt.Sprintf("reactions on %d listed by %s", m.id, w.acct[v].Name)
	ok, code := readable(v)
	w.expect(t, what, r, ok, code)
	if !r.ok() {
		return
	}
	var users []struct {
		ID snowflake.ID `json:"id"`
	}
	if err := json.Unmarshal(r.Body, &users); err != nil {
		t.Fatal(err)
	}
	if len(users) != len(w.reacted[m.id]) {
		t.Fatalf("action %d %s: %d users, the model %d: %s", w.action, what, len(users), len(w.reacted[m.id]), r.Body)
	}
	for _, x := range users {
		found := false
		for ru := range w.reacted[m.id] {
			found = found || w.acct[ru].ID == x.ID
		}
		if !found {
			t.Fatalf("action %d %s: user %d not in the model: %s", w.action, what, x.ID, r.Body)
		}
	}
}
