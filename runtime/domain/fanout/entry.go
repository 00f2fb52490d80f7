// Package fanout is the relay side of a big guild's fan-out. Above a
// threshold of online sessions a guild's owner hands its sessions to
// relays, each owning a slice of at most a few ten thousand, and sends
// every event once per relay on one ordered stream of Entry values that
// also carries every permission-state change (permissions.Change). A
// Slice applies that stream: it holds a replica of the guild's permission
// state and its sessions' intents and active channels, and decides itself
// which of its sessions get each event — VIEW_CHANNEL, intents, passive
// or active (docs/api.md, "Passive sessions") — the per-session work the
// owner would otherwise do for every online session.
//
// Every entry carries the state version it was produced at. A slice
// that is not at that version (it missed entries: a relay that restarted
// or a stream that broke) refuses the entry with ErrBehind and delivers
// nothing until the owner sends a snapshot (Entry.Reset); what was in
// flight is lost, as live events may be: history is the truth.
package fanout

import (
	"encoding/json"
	"errors"

	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/event"
	"github.com/concord-chat/concord/runtime/domain/permissions"
)

// ErrBehind is returned by Slice.Apply for an entry produced at another
// state version than the slice holds: the owner must send a snapshot.
var ErrBehind = errors.New("fanout: slice behind the owner's state version")

// ErrSuperseded is returned by Slice.Apply for an entry of an owner that
// is no longer the slice's: the guild moved to another guild node, whose
// snapshot took the slice over. The entry is dropped.
var ErrSuperseded = errors.New("fanout: slice taken over by another owner")

// Entry is one element of an owner's stream to a relay.
type Entry struct {
	Guild snowflake.ID `json:"guild"`
	// Owner names the owner incarnation (one actor's sliced period) that
	// produced the entry. A Reset makes it the slice's owner; entries of
	// any other owner are refused with ErrSuperseded, so an owner that
	// lost the guild to another node cannot deliver over, or drop, the
	// slice its successor took over, whatever order the two streams
	// reach the relay in.
	Owner string `json:"owner,omitempty"`
	// Version is the owner's state version once this entry's Changes
	// are applied (the version an Event was produced at).
	Version uint64 `json:"version"`
	// Reset starts a snapshot: the slice forgets its state and sessions,
	// then applies the rest of the entry.
	Reset bool `json:"reset,omitempty"`
	// Drop ends the slice: its owner took its sessions back, or stopped
	// running the guild (it moved to another guild node, or was
	// deleted). The relay forgets the guild's slice and its memory.
	Drop bool `json:"drop,omitempty"`
	// Members is the guild's member count (the passive threshold), set
	// on a Reset and on events.
	Members int `json:"members,omitempty"`
	// Changes are permission-state changes, in order.
	Changes []permissions.Change `json:"changes,omitempty"`
	// Add hands sessions to the slice; Remove takes them away.
	Add    []Slot            `json:"add,omitempty"`
	Remove []event.SessionID `json:"remove,omitempty"`
	// Active replaces a session's active channels (its latest op 14).
	Active *Active `json:"active,omitempty"`
	// Channels tells the slice which channels are threads of which
	// parent, for a Reset or a new thread.
	Channels []Channel `json:"channels,omitempty"`
	// Visibility replaces the guild's channel list and, unless the entry
	// is a Reset, brings the sessions' channel lists up to date.
	Visibility *Visibility `json:"visibility,omitempty"`
	// Event is a dispatch the slice filters for its sessions.
	Event *Event `json:"event,omitempty"`
	// Direct is a dispatch the owner decided itself (GUILD_CREATE, a
	// member-list update, typing, a private thread's events): its
	// targets, by gateway node, are sessions of this slice.
	Direct *Direct `json:"direct,omitempty"`
}

// Slot is one session handed to a slice.
type Slot struct {
	Session event.Session `json:"session"`
	// Active lists the channels of its latest op 14; HasActive is false
	// when it sent none.
	Active    []snowflake.ID `json:"active,omitempty"`
	HasActive bool           `json:"has_active,omitempty"`
	// Member is the session user's member record, for the replica; later
	// changes to it arrive as Changes like every other.
	Member *permissions.Member `json:"member,omitempty"`
}

// Active is a session's latest op 14 channels.
type Active struct {
	Session  event.SessionID `json:"session"`
	Channels []snowflake.ID  `json:"channels"`
}

// Channel is a guild channel's place: threads are viewed through their
// parent and are active where their parent is.
type Channel struct {
	ID     snowflake.ID `json:"id"`
	Parent snowflake.ID `json:"parent,omitempty"`
	Thread bool         `json:"thread,omitempty"`
	Gone   bool         `json:"gone,omitempty"`
}

// Kind is how a slice decides an event's recipients.
type Kind uint8

// Kinds of events.
const (
	// KindGuild goes to every session with the intent.
	KindGuild Kind = iota
	// KindChannel goes to sessions with the intent that view Channel.
	KindChannel
	// KindContent is KindChannel withheld from sessions passive in the
	// channel (deletes, reactions, typing).
	KindContent
	// KindMessage is MESSAGE_CREATE or MESSAGE_UPDATE: KindContent with
	// the mention exception for a create, and payload variant 1 (content
	// stripped) for bots without MESSAGE_CONTENT that neither wrote nor
	// are mentioned in it.
	KindMessage
)

// Event is one dispatch for a slice to filter.
type Event struct {
	Type string `json:"type"`
	// Payloads are the serialised `d` variants: [full] or, for
	// KindMessage, [full, stripped].
	Payloads []json.RawMessage `json:"payloads"`
	Kind     Kind              `json:"kind"`
	Intent   uint64            `json:"intent"`
	Channel  snowflake.ID      `json:"channel,omitempty"`
	// Message facts (KindMessage).
	Create          bool           `json:"create,omitempty"`
	MessageID       snowflake.ID   `json:"message_id,omitempty"`
	Author          snowflake.ID   `json:"author,omitempty"`
	MentionUsers    []snowflake.ID `json:"mention_users,omitempty"`
	MentionRoles    []snowflake.ID `json:"mention_roles,omitempty"`
	MentionEveryone bool           `json:"mention_everyone,omitempty"`
}

// Direct is an owner-decided dispatch.
type Direct struct {
	Type     string                    `json:"type"`
	Payloads []json.RawMessage         `json:"payloads"`
	Targets  map[string][]event.Target `json:"targets"`
}
