package guild

import (
	"encoding/json"
	"hash/fnv"
	"slices"
	"strconv"
	"strings"

	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/fanout"
)

// A sliced guild's relays keep its channel list (fanout.Visibility). The
// snapshot sends it whole; afterwards the owner sends each relay only
// what it does not hold: it remembers, per relay, a hash of each channel
// as last sent (actorSliced.sent), and a change that moves permissions
// carries the channels whose object changed (the overwritten channel, a
// created or moved one) and the ids of those gone, instead of every
// channel with its payload. A role change is then a few hundred bytes
// per relay whatever the guild's channel count.

// visPrint hashes what a relay decides and announces about a channel,
// without thread member objects (a user's own travel with the entries
// for that user: fanout.Visibility.UserThreads).
func visPrint(c fanout.VisibleChannel) uint64 {
	c.ThreadMembers = nil
	raw, _ := json.Marshal(c)
	h := fnv.New64a()
	h.Write(raw)
	return h.Sum64()
}

// visSent records that relay now holds the whole list v (a snapshot).
func (st *actorSliced) visSent(relay string, v *fanout.Visibility) {
	if st.sent == nil {
		st.sent = make(map[string]map[snowflake.ID]uint64)
	}
	m := make(map[snowflake.ID]uint64, len(v.Channels))
	for _, c := range v.Channels {
		m[c.ID] = visPrint(c)
	}
	st.sent[relay] = m
}

// visibilityEntries turns full, the guild's whole channel list after a
// change, into one entry per relay carrying only what that relay lacks;
// relays that lack the same get the same entry, so it is encoded once.
func (a *Actor) visibilityEntries(relays []string, full *fanout.Visibility) []*fanout.Entry {
	st := a.sliced
	prints := make([]uint64, len(full.Channels))
	for i, c := range full.Channels {
		prints[i] = visPrint(c)
	}
	var userThreads map[snowflake.ID]json.RawMessage
	if full.User != 0 {
		userThreads = make(map[snowflake.ID]json.RawMessage)
		for _, c := range full.Channels {
			if m, ok := c.ThreadMembers[full.User]; ok {
				userThreads[c.ID] = m
			}
		}
	}
	deleted := make(map[snowflake.ID]bool, len(full.Deleted))
	for _, c := range full.Deleted {
		deleted[c.ID] = true
	}
	current := make(map[snowflake.ID]bool, len(full.Channels))
	for _, c := range full.Channels {
		current[c.ID] = true
	}
	out := make([]*fanout.Entry, len(relays))
	byKey := make(map[string]*fanout.Entry)
	for i, r := range relays {
		held := st.sent[r]
		var changed []int
		var removed []snowflake.ID
		for j, c := range full.Channels {
			if p, ok := held[c.ID]; !ok || p != prints[j] {
				changed = append(changed, j)
			}
		}
		for id := range held {
			if !current[id] && !deleted[id] {
				removed = append(removed, id)
			}
		}
		slices.SortFunc(removed, cmpID)
		var key strings.Builder
		for _, j := range changed {
			key.WriteString(strconv.Itoa(j))
			key.WriteByte(',')
		}
		key.WriteByte('|')
		for _, id := range removed {
			key.WriteString(id.String())
			key.WriteByte(',')
		}
		e := byKey[key.String()]
		if e == nil {
			v := &fanout.Visibility{Delta: true, Removed: removed, Deleted: full.Deleted, Updated: full.Updated, User: full.User, UserThreads: userThreads}
			v.Channels = make([]fanout.VisibleChannel, 0, len(changed))
			for _, j := range changed {
				v.Channels = append(v.Channels, full.Channels[j])
			}
			e = &fanout.Entry{Guild: a.id, Owner: st.owner, Version: st.version, Visibility: v}
			byKey[key.String()] = e
		}
		out[i] = e
		if held == nil {
			held = make(map[snowflake.ID]uint64, len(full.Channels))
			if st.sent == nil {
				st.sent = make(map[string]map[snowflake.ID]uint64)
			}
			st.sent[r] = held
		}
		for _, j := range changed {
			held[full.Channels[j].ID] = prints[j]
		}
		for id := range held {
			if !current[id] {
				delete(held, id)
			}
		}
	}
	return out
}
