package memberlist

import (
	"encoding/json"
	"strconv"

	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/event"
)

// DispatchType is the dispatch name of member-list updates.
const DispatchType = "GUILD_MEMBER_LIST_UPDATE"

// Operation kinds of GUILD_MEMBER_LIST_UPDATE.
const (
	OpSync       = "SYNC"
	OpInsert     = "INSERT"
	OpUpdate     = "UPDATE"
	OpDelete     = "DELETE"
	OpInvalidate = "INVALIDATE"
)

// Op is one operation of a GUILD_MEMBER_LIST_UPDATE. SYNC and INVALIDATE
// carry Range (SYNC also Items); INSERT and UPDATE carry Index and Item;
// DELETE carries Index.
type Op struct {
	Op    string
	Range [2]int
	Index int
	Items []json.RawMessage
	Item  json.RawMessage
}

// appendJSON encodes the op in Discord's shape.
func (o Op) appendJSON(b []byte) []byte {
	b = append(b, `{"op":"`...)
	b = append(b, o.Op...)
	b = append(b, '"')
	switch o.Op {
	case OpSync, OpInvalidate:
		b = append(b, `,"range":[`...)
		b = strconv.AppendInt(b, int64(o.Range[0]), 10)
		b = append(b, ',')
		b = strconv.AppendInt(b, int64(o.Range[1]), 10)
		b = append(b, ']')
		if o.Op == OpSync {
			b = append(b, `,"items":[`...)
			for i, it := range o.Items {
				if i > 0 {
					b = append(b, ',')
				}
				b = append(b, it...)
			}
			b = append(b, ']')
		}
	default:
		b = append(b, `,"index":`...)
		b = strconv.AppendInt(b, int64(o.Index), 10)
		if o.Op != OpDelete {
			b = append(b, `,"item":`...)
			b = append(b, o.Item...)
		}
	}
	return append(b, '}')
}

// MarshalJSON encodes the op in Discord's shape.
func (o Op) MarshalJSON() ([]byte, error) { return o.appendJSON(nil), nil }

// GroupCount is one entry of the payload's `groups`: a group id (a role
// id, "online" or "offline") and how many members it holds.
type GroupCount struct {
	ID    string `json:"id"`
	Count int    `json:"count"`
}

// Variant is one encoded GUILD_MEMBER_LIST_UPDATE payload and the sessions
// that receive it.
type Variant struct {
	Payload  json.RawMessage
	Sessions []event.Session
	// Ops are the operations encoded in Payload.
	Ops []Op
}

// Dispatch is what one change to a list sends: sessions that receive the
// same operations share a variant, encoded once.
type Dispatch struct {
	Variants []Variant
}

// Deliveries returns the number of session deliveries in d.
func (d Dispatch) Deliveries() int {
	n := 0
	for _, v := range d.Variants {
		n += len(v.Sessions)
	}
	return n
}

// Empty reports whether d delivers nothing.
func (d Dispatch) Empty() bool { return len(d.Variants) == 0 }

// Merge appends o's variants to d.
func (d *Dispatch) Merge(o Dispatch) { d.Variants = append(d.Variants, o.Variants...) }

// Batches groups d into one event.Batch of Type DispatchType per gateway
// node, keyed by node name. Each batch carries only the payload variants
// its node's sessions receive, so a batch sent between processes holds no
// payload nobody on that node reads.
func (d Dispatch) Batches() map[string]event.Batch {
	if d.Empty() {
		return nil
	}
	type nodeBatch struct {
		b     event.Batch
		local map[int]int // variant index in d → index in b.Payloads
	}
	byNode := make(map[string]*nodeBatch)
	for vi, v := range d.Variants {
		for _, s := range v.Sessions {
			nb := byNode[s.Node]
			if nb == nil {
				nb = &nodeBatch{b: event.Batch{Type: DispatchType}, local: make(map[int]int)}
				byNode[s.Node] = nb
			}
			li, ok := nb.local[vi]
			if !ok {
				li = len(nb.b.Payloads)
				nb.local[vi] = li
				nb.b.Payloads = append(nb.b.Payloads, v.Payload)
			}
			nb.b.Targets = append(nb.b.Targets, event.Target{Session: s.ID, Variant: li})
		}
	}
	out := make(map[string]event.Batch, len(byNode))
	for n, nb := range byNode {
		out[n] = nb.b
	}
	return out
}

// encodeHead writes the start of a GUILD_MEMBER_LIST_UPDATE payload, up
// to its ops, shared by every variant of one change.
func encodeHead(guildID snowflake.ID, listID string, memberCount, onlineCount int, groups []GroupCount) []byte {
	b := make([]byte, 0, 96+32*len(groups))
	b = append(b, `{"guild_id":"`...)
	b = strconv.AppendUint(b, uint64(guildID), 10)
	b = append(b, `","id":`...)
	b = strconv.AppendQuote(b, listID)
	b = append(b, `,"member_count":`...)
	b = strconv.AppendInt(b, int64(memberCount), 10)
	b = append(b, `,"online_count":`...)
	b = strconv.AppendInt(b, int64(onlineCount), 10)
	b = append(b, `,"groups":[`...)
	for i, g := range groups {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"id":`...)
		b = strconv.AppendQuote(b, g.ID)
		b = append(b, `,"count":`...)
		b = strconv.AppendInt(b, int64(g.Count), 10)
		b = append(b, '}')
	}
	return append(b, `],"ops":[`...)
}

// encodeOps completes a payload started by encodeHead.
func encodeOps(head []byte, ops []Op) json.RawMessage {
	n := len(head) + 2
	for _, o := range ops {
		n += 48 + len(o.Item)
		for _, it := range o.Items {
			n += len(it) + 1
		}
	}
	b := make([]byte, 0, n)
	b = append(b, head...)
	for i, o := range ops {
		if i > 0 {
			b = append(b, ',')
		}
		b = o.appendJSON(b)
	}
	return append(b, "]}"...)
}

// groupItem encodes a group header row.
func groupItem(id string, count int) json.RawMessage {
	b := make([]byte, 0, 48)
	b = append(b, `{"group":{"id":`...)
	b = strconv.AppendQuote(b, id)
	b = append(b, `,"count":`...)
	b = strconv.AppendInt(b, int64(count), 10)
	return append(b, "}}"...)
}

// memberItem wraps a member object as a row item.
func memberItem(m json.RawMessage) json.RawMessage {
	b := make([]byte, 0, len(m)+12)
	b = append(b, `{"member":`...)
	b = append(b, m...)
	return append(b, '}')
}
