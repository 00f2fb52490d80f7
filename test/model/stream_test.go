package model

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"pgregory.net/rapid"

	"github.com/concord-chat/concord/runtime/base/snowflake"
)

// stream is one logical gateway session of a user (an IDENTIFY and the
// RESUMEs that continue it) and the checker of what it received.
//
// Every dispatch is attributed to the action that caused it and checked
// against the model's visibility after that action:
//   - messages, their edits and deletes carry a tag (their content is the
//     index of the action that wrote them; a delete names its message), so
//     they are attributed exactly;
//   - channel events, GUILD_CREATE and everything else naming a guild
//     channel are attributed to the span of actions since the last sync
//     marker the stream received: after every action that may move
//     visibility the owner posts "sync-k" in a channel every member sees,
//     and the guild's order puts it after all of action k's events. The
//     event must be allowed after some action of that span, and at each
//     marker the channels the client was told it sees must be exactly the
//     model's.
type stream struct {
	w       *world
	user    int
	conn    *gwConn
	dropped bool
	resume  resumeState
	start   int // action that identified it
	checked int // dispatches of conn already checked
	lastSeq int64

	known      map[snowflake.ID]bool
	lastMarker int
	pending    []pend
	seen       map[string]bool // message tags received in MESSAGE_CREATE
}

// pend is a span-attributed fact waiting for the next marker.
type pend struct {
	what   string
	ch     snowflake.ID // 0: a guild membership fact
	detail string
}

func (w *world) identify(t *rapid.T, u int) *stream {
	st := &stream{w: w, user: u, start: w.action, lastMarker: w.action - 1, known: map[snowflake.ID]bool{}, seen: map[string]bool{}}
	st.conn = w.s.dial(t, w.acct[u], nil)
	fs := st.conn.waitFor(t, w.acct[u].Name+"'s READY", hasType("READY"))
	var ready struct {
		SessionID string `json:"session_id"`
	}
	if err := json.Unmarshal(fs[0].D, &ready); err != nil || ready.SessionID == "" {
		t.Fatalf("READY %s: %v", fs[0].D, err)
	}
	st.resume.sessionID = ready.SessionID
	st.conn.settled(t)
	if w.member[u] {
		st.conn.waitFor(t, w.acct[u].Name+"'s GUILD_CREATE", hasType("GUILD_CREATE"))
	}
	return st
}

// live reports whether the stream is connected now.
func (st *stream) live() bool { return st != nil && !st.dropped }

func (st *stream) fail(t *rapid.T, f dispatch, format string, args ...any) {
	t.Helper()
	d := string(f.D)
	if len(d) > 600 {
		d = d[:600] + "…"
	}
	t.Fatalf("VIOLATION at action %d: %s got %s (seq %d): %s\n  payload: %s", st.w.action, st.w.acct[st.user].Name, f.T, f.S,
		fmt.Sprintf(format, args...), d)
}

// process checks every dispatch received since the last call.
func (st *stream) process(t *rapid.T) {
	t.Helper()
	fs := st.conn.snapshot()
	for _, f := range fs[st.checked:] {
		if f.S != st.lastSeq+1 {
			st.fail(t, f, "sequence %d after %d", f.S, st.lastSeq)
		}
		st.lastSeq = f.S
		st.check(t, f)
		st.w.stats.mu.Lock()
		st.w.stats.events++
		st.w.stats.mu.Unlock()
	}
	st.checked = len(fs)
}

type chanObj struct {
	ID      snowflake.ID `json:"id"`
	GuildID snowflake.ID `json:"guild_id"`
}

type eventMsg struct {
	ID        snowflake.ID `json:"id"`
	ChannelID snowflake.ID `json:"channel_id"`
	Content   string       `json:"content"`
	Ref       *struct {
		Content string `json:"content"`
	} `json:"referenced_message"`
}

func (st *stream) check(t *rapid.T, f dispatch) {
	t.Helper()
	w, u := st.w, st.user
	switch f.T {
	case "READY":
		var r struct {
			SessionID       string    `json:"session_id"`
			PrivateChannels []chanObj `json:"private_channels"`
			Guilds          []chanObj `json:"guilds"`
		}
		decode(t, f, &r)
		for _, c := range r.PrivateChannels {
			if dm := w.dmByID[c.ID]; dm == nil || !w.recipient(dm, u) {
				st.fail(t, f, "private channel %d is not the user's", c.ID)
			}
		}
		for _, g := range r.Guilds {
			if g.ID != w.guild {
				st.fail(t, f, "guild %d the user never joined", g.ID)
			}
			st.pending = append(st.pending, pend{what: "READY guild", detail: string(f.D)})
		}
	case "GUILD_CREATE":
		var g struct {
			ID       snowflake.ID `json:"id"`
			Channels []chanObj    `json:"channels"`
		}
		decode(t, f, &g)
		if g.ID != w.guild {
			st.fail(t, f, "guild %d the user never joined", g.ID)
		}
		st.pending = append(st.pending, pend{what: "GUILD_CREATE"})
		st.known = map[snowflake.ID]bool{}
		for _, c := range g.Channels {
			st.pending = append(st.pending, pend{what: "GUILD_CREATE channel", ch: c.ID})
			st.known[c.ID] = true
		}
	case "GUILD_DELETE":
		st.known = map[snowflake.ID]bool{}
	case "CHANNEL_CREATE", "CHANNEL_UPDATE", "CHANNEL_DELETE":
		var c chanObj
		decode(t, f, &c)
		if c.GuildID == 0 {
			if dm := w.dmByID[c.ID]; dm == nil || !w.recipient(dm, u) {
				st.fail(t, f, "private channel %d is not the user's", c.ID)
			}
			return
		}
		if f.T == "CHANNEL_DELETE" {
			delete(st.known, c.ID)
			return
		}
		st.pending = append(st.pending, pend{what: f.T, ch: c.ID})
		if f.T == "CHANNEL_CREATE" {
			st.known[c.ID] = true
		}
	case "MESSAGE_CREATE", "MESSAGE_UPDATE":
		var m eventMsg
		decode(t, f, &m)
		if m.ChannelID == w.sync {
			k, ok := strings.CutPrefix(m.Content, "sync-")
			n, err := strconv.Atoi(k)
			if !ok || err != nil || f.T != "MESSAGE_CREATE" {
				st.fail(t, f, "unexpected message in the sync channel")
			}
			st.marker(t, f, n)
			return
		}
		p, ok := w.tagAction[m.Content]
		if !ok {
			st.fail(t, f, "content %q no action wrote", m.Content)
		}
		if dm := w.dmByID[m.ChannelID]; dm != nil {
			if !w.recipient(dm, u) {
				st.fail(t, f, "message of a DM the user is not in")
			}
		} else {
			if !w.isChan(m.ChannelID) {
				st.fail(t, f, "message of unknown channel %d", m.ChannelID)
			}
			if !w.visibleAt(p, u, m.ChannelID) {
				st.fail(t, f, "LEAK: channel %d was hidden from the user at action %d, which wrote %q", m.ChannelID, p, m.Content)
			}
			if !st.known[m.ChannelID] {
				st.fail(t, f, "message in channel %d the client was never told it sees", m.ChannelID)
			}
		}
		if m.Ref != nil {
			if q, ok := w.tagAction[m.Ref.Content]; !ok || q > p {
				st.fail(t, f, "referenced_message content %q was not written before action %d", m.Ref.Content, p)
			}
		}
		if f.T == "MESSAGE_CREATE" {
			st.seen[m.Content] = true
		}
	case "MESSAGE_DELETE":
		var m eventMsg
		decode(t, f, &m)
		mm := w.byID[m.ID]
		if mm == nil || mm.alive || mm.ch != m.ChannelID {
			st.fail(t, f, "delete of message %d the model did not delete", m.ID)
		}
		if dm := w.dmByID[m.ChannelID]; dm != nil {
			if !w.recipient(dm, u) {
				st.fail(t, f, "delete in a DM the user is not in")
			}
		} else if !w.visibleAt(mm.deleted, u, m.ChannelID) {
			st.fail(t, f, "LEAK: delete in channel %d hidden from the user at action %d", m.ChannelID, mm.deleted)
		}
	case "MESSAGE_DELETE_BULK":
		var b struct {
			IDs       []snowflake.ID `json:"ids"`
			ChannelID snowflake.ID   `json:"channel_id"`
		}
		decode(t, f, &b)
		for _, id := range b.IDs {
			mm := w.byID[id]
			if mm == nil || mm.alive || mm.ch != b.ChannelID {
				st.fail(t, f, "bulk delete names message %d the model did not delete in channel %d", id, b.ChannelID)
			}
			if !w.visibleAt(mm.deleted, u, b.ChannelID) {
				st.fail(t, f, "LEAK: bulk delete in channel %d hidden from the user at action %d", b.ChannelID, mm.deleted)
			}
		}
	default:
		var c struct {
			ChannelID snowflake.ID `json:"channel_id"`
		}
		if json.Unmarshal(f.D, &c) != nil || c.ChannelID == 0 || c.ChannelID == w.sync {
			return
		}
		if dm := w.dmByID[c.ChannelID]; dm != nil {
			if !w.recipient(dm, u) {
				st.fail(t, f, "event of a DM the user is not in")
			}
			return
		}
		st.pending = append(st.pending, pend{what: f.T, ch: c.ChannelID})
	}
}

// marker closes the span of actions up to k: every pending fact must hold
// after one of them, and the client's channels must be the model's.
func (st *stream) marker(t *rapid.T, f dispatch, k int) {
	t.Helper()
	st.settle(t, f, k)
	want := st.w.hist[k]
	if !want.member[st.user] {
		st.fail(t, f, "LEAK: sync marker %d reached a non-member", k)
	}
	if len(st.known) != len(want.vis[st.user]) {
		st.fail(t, f, "at marker %d the client sees channels %v, the model %v", k, keys(st.known), keys(want.vis[st.user]))
	}
	for ch := range want.vis[st.user] {
		if !st.known[ch] {
			st.fail(t, f, "at marker %d the client sees channels %v, the model %v", k, keys(st.known), keys(want.vis[st.user]))
		}
	}
	st.lastMarker = k
}

// settle checks the pending facts against the actions (lastMarker, k].
func (st *stream) settle(t *rapid.T, f dispatch, k int) {
	t.Helper()
	w := st.w
	for _, p := range st.pending {
		ok := false
		for x := max(st.lastMarker+1, 0); x <= k && !ok; x++ {
			if p.ch == 0 {
				ok = w.hist[min(x, len(w.hist)-1)].member[st.user]
			} else {
				ok = w.visibleAt(x, st.user, p.ch)
			}
		}
		if !ok {
			st.fail(t, f, "LEAK: %s names channel %d (0: the guild), hidden from the user at every action %d..%d %s",
				p.what, p.ch, st.lastMarker+1, k, p.detail)
		}
	}
	st.pending = st.pending[:0]
}

func (w *world) isChan(id snowflake.ID) bool {
	for _, c := range w.chans {
		if c == id {
			return true
		}
	}
	return id == w.sync
}

func decode(t *rapid.T, f dispatch, v any) {
	t.Helper()
	if err := json.Unmarshal(f.D, v); err != nil {
		t.Fatalf("decode %s: %v: %s", f.T, err, f.D)
	}
}

func keys(m map[snowflake.ID]bool) []snowflake.ID {
	out := make([]snowflake.ID, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
