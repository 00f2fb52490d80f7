package fanout

import (
	"cmp"
	"context"
	"encoding/json"
	"slices"

	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/event"
	"github.com/concord-chat/concord/runtime/domain/permissions"
)

// intentGuilds is the GUILDS intent: channel create, update and delete.
const intentGuilds uint64 = 1 << 0

// Visibility brings a slice's sessions' channel lists up to date after a
// change that may have moved permissions (a role's permissions, an
// overwrite, a member's roles, a channel created, moved or deleted): the
// owner's syncVisibility, done by the relay for its slice. Each session
// that lost a channel gets CHANNEL_DELETE, one that gained it
// CHANNEL_CREATE (THREAD_LIST_SYNC for threads that appear with their
// parent), one that still sees an updated channel CHANNEL_UPDATE — the
// same events in the same order as the owner sends them itself. The
// owner's cost of a guild-wide permission change is then one entry per
// relay instead of a channel-list diff per online session.
//
// A snapshot carries the whole list. After it, an entry carries what the
// relay does not hold yet (Delta): the channels created or changed since
// the owner's previous entry to that relay, and the ids of those gone. A
// role or overwrite change moves no channel object but the overwritten
// channel's, so its entry is a few hundred bytes whatever the guild's
// channel count; the permission state itself travels as the entry
// stream's Changes.
type Visibility struct {
	// Channels is every channel of the guild after the change, which
	// replaces the slice's list; with Delta, only the channels that are
	// new or changed, which replace their earlier version.
	Channels []VisibleChannel `json:"channels"`
	// Delta marks Channels as changes to the list the relay holds.
	Delta bool `json:"delta,omitempty"`
	// Removed are channels gone from the guild that Deleted does not
	// list (with Delta).
	Removed []snowflake.ID `json:"removed,omitempty"`
	// Deleted are the channels the change removed.
	Deleted []VisibleChannel `json:"deleted,omitempty"`
	// Updated are the channels the change updated.
	Updated []snowflake.ID `json:"updated,omitempty"`
	// User, when set, limits the sync to that user's sessions (their
	// member record or thread membership changed). The channels' thread
	// member objects then carry that user's only: with Delta, a
	// channel's other users' objects are kept, and UserThreads replaces
	// all of User's.
	User snowflake.ID `json:"user,omitempty"`
	// UserThreads are User's thread member objects by thread, every one
	// of them (with Delta and User).
	UserThreads map[snowflake.ID]json.RawMessage `json:"user_threads,omitempty"`
}

// VisibleChannel is one channel as a slice decides and announces it.
type VisibleChannel struct {
	ID     snowflake.ID `json:"id"`
	Parent snowflake.ID `json:"parent,omitempty"`
	Thread bool         `json:"thread,omitempty"`
	// Private threads are seen by their members and by those who may
	// manage threads in the parent.
	Private  bool           `json:"private,omitempty"`
	Members  []snowflake.ID `json:"members,omitempty"`
	Archived bool           `json:"archived,omitempty"`
	// Position orders the channels (then the id), as the owner does.
	Position int `json:"position"`
	// Payload is the channel object; Created the one a THREAD_CREATE
	// carries when it differs (newly_created).
	Payload json.RawMessage `json:"payload"`
	Created json.RawMessage `json:"created,omitempty"`
	// ThreadMembers are a thread's member objects by user, for the
	// THREAD_LIST_SYNC of a session whose user is one.
	ThreadMembers map[snowflake.ID]json.RawMessage `json:"thread_members,omitempty"`
}

func (c *VisibleChannel) place() Channel {
	return Channel{ID: c.ID, Parent: c.Parent, Thread: c.Thread}
}

// setChannels replaces the slice's channel list.
func (x *Slice) setChannels(list []VisibleChannel) {
	x.vis = make(map[snowflake.ID]*VisibleChannel, len(list))
	x.channels = make(map[snowflake.ID]Channel)
	for i := range list {
		c := &list[i]
		x.vis[c.ID] = c
		if c.Thread {
			x.channels[c.ID] = c.place()
		}
	}
}

// mergeChannels applies a Delta to the slice's channel list. Entries are
// shared by every in-process relay, so what the slice keeps is copied
// before it is changed.
func (x *Slice) mergeChannels(v *Visibility) {
	gone := func(id snowflake.ID) {
		delete(x.vis, id)
		delete(x.channels, id)
	}
	for _, id := range v.Removed {
		gone(id)
	}
	for i := range v.Deleted {
		gone(v.Deleted[i].ID)
	}
	for i := range v.Channels {
		c := v.Channels[i]
		if v.User != 0 {
			// Only User's thread member objects came along.
			if old := x.vis[c.ID]; old != nil {
				c.ThreadMembers = old.ThreadMembers
			} else {
				c.ThreadMembers = nil
			}
		}
		x.vis[c.ID] = &c
		if c.Thread {
			x.channels[c.ID] = c.place()
		} else {
			delete(x.channels, c.ID)
		}
	}
	if v.User == 0 {
		return
	}
	for id, c := range x.vis {
		m, ok := v.UserThreads[id]
		if _, had := c.ThreadMembers[v.User]; !ok && !had {
			continue
		}
		cc := *c
		cc.ThreadMembers = make(map[snowflake.ID]json.RawMessage, len(c.ThreadMembers)+1)
		for u, o := range c.ThreadMembers {
			cc.ThreadMembers[u] = o
		}
		if ok {
			cc.ThreadMembers[v.User] = m
		} else {
			delete(cc.ThreadMembers, v.User)
		}
		x.vis[id] = &cc
	}
}

// visibleTo lists the channels a user sees now, as the owner's
// visibleChannels does: a thread through its parent, a private thread
// only for its members and those who may manage threads there.
func (x *Slice) visibleTo(user snowflake.ID) map[snowflake.ID]bool {
	out := make(map[snowflake.ID]bool)
	now := x.now()
	for id, c := range x.vis {
		via := id
		if c.Thread {
			via = c.Parent
		}
		p := x.engine.Channel(user, via, now)
		if !permissions.AccessOf(p).CanView() {
			continue
		}
		if c.Private && !p.Has(permissions.ManageThreads) && !slices.Contains(c.Members, user) {
			continue
		}
		out[id] = true
	}
	return out
}

// ThreadEvent is a channel event's name for a thread (THREAD_CREATE for
// CHANNEL_CREATE, …); the owner and the relays name them the same way.
func ThreadEvent(typ string, thread bool) string {
	if !thread {
		return typ
	}
	switch typ {
	case "CHANNEL_CREATE":
		return "THREAD_CREATE"
	case "CHANNEL_UPDATE":
		return "THREAD_UPDATE"
	case "CHANNEL_DELETE":
		return "THREAD_DELETE"
	}
	return typ
}

// ChannelEventRank orders one visibility change's channel events:
// deletions first, then creations, then the rest, so a client never holds
// a channel it lost while it learns of one it gained.
func ChannelEventRank(t string) int {
	switch t {
	case "CHANNEL_DELETE":
		return 0
	case "CHANNEL_CREATE":
		return 1
	}
	return 2
}

type threadListSync struct {
	GuildID    snowflake.ID      `json:"guild_id"`
	ChannelIDs []snowflake.ID    `json:"channel_ids,omitempty"`
	Threads    []json.RawMessage `json:"threads"`
	Members    []json.RawMessage `json:"members"`
}

// syncVisibility applies a Visibility entry: the new channel list, then
// each session's diff against the channels it saw.
func (x *Slice) syncVisibility(ctx context.Context, v *Visibility) {
	if v.Delta {
		x.mergeChannels(v)
	} else {
		x.setChannels(v.Channels)
	}
	deleted := make(map[snowflake.ID]*VisibleChannel, len(v.Deleted))
	for i := range v.Deleted {
		deleted[v.Deleted[i].ID] = &v.Deleted[i]
	}
	updated := make(map[snowflake.ID]bool, len(v.Updated))
	for _, id := range v.Updated {
		updated[id] = true
	}
	type key struct {
		typ string
		pos int
		id  snowflake.ID
	}
	groups := make(map[key]*batches)
	add := func(typ string, c *VisibleChannel, s event.Session) {
		typ = ThreadEvent(typ, c.Thread)
		k := key{typ, c.Position, c.ID}
		b := groups[k]
		if b == nil {
			p := c.Payload
			if typ == "THREAD_CREATE" && c.Created != nil {
				p = c.Created
			}
			b = &batches{typ: typ, payloads: []json.RawMessage{p}}
			groups[k] = b
		}
		b.add(s, 0)
	}
	type threadSync struct {
		s       event.Session
		threads []snowflake.ID
	}
	var syncs []threadSync
	perUser := make(map[snowflake.ID]map[snowflake.ID]bool)
	for _, s := range x.slots() {
		ss := s.s
		if v.User != 0 && ss.UserID != v.User {
			continue
		}
		now, ok := perUser[ss.UserID]
		if !ok {
			now = x.visibleTo(ss.UserID)
			perUser[ss.UserID] = now
		}
		send := wants(ss, intentGuilds)
		if send {
			for id := range s.visible {
				if now[id] {
					continue
				}
				if c, ok := x.vis[id]; ok {
					add("CHANNEL_DELETE", c, ss)
				} else if c, ok := deleted[id]; ok {
					add("CHANNEL_DELETE", c, ss)
				}
			}
			var synced []snowflake.ID
			for id := range now {
				c := x.vis[id]
				switch {
				case !s.visible[id] && c.Thread && now[c.Parent] && !s.visible[c.Parent]:
					synced = append(synced, id)
				case !s.visible[id]:
					add("CHANNEL_CREATE", c, ss)
				case updated[id]:
					add("CHANNEL_UPDATE", c, ss)
				}
			}
			if len(synced) > 0 {
				syncs = append(syncs, threadSync{ss, synced})
			}
		}
		s.visible = now
	}
	keys := make([]key, 0, len(groups))
	for k := range groups {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b key) int {
		if a.typ != b.typ {
			return ChannelEventRank(a.typ) - ChannelEventRank(b.typ)
		}
		if a.pos != b.pos {
			return a.pos - b.pos
		}
		return cmp.Compare(a.id, b.id)
	})
	for _, k := range keys {
		x.deliver(ctx, groups[k])
	}
	for _, sy := range syncs {
		ev := threadListSync{GuildID: x.guild, Threads: []json.RawMessage{}, Members: []json.RawMessage{}}
		parents := map[snowflake.ID]bool{}
		slices.Sort(sy.threads)
		for _, id := range sy.threads {
			c := x.vis[id]
			if c.Archived {
				continue
			}
			ev.Threads = append(ev.Threads, c.Payload)
			if m, ok := c.ThreadMembers[sy.s.UserID]; ok {
				ev.Members = append(ev.Members, m)
			}
			if !parents[c.Parent] {
				parents[c.Parent] = true
				ev.ChannelIDs = append(ev.ChannelIDs, c.Parent)
			}
		}
		if len(ev.Threads) == 0 {
			continue
		}
		slices.Sort(ev.ChannelIDs)
		raw, _ := json.Marshal(ev)
		b := &batches{typ: "THREAD_LIST_SYNC", payloads: []json.RawMessage{raw}}
		b.add(sy.s, 0)
		x.deliver(ctx, b)
	}
}
