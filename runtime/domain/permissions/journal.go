package permissions

import "github.com/concord-chat/concord/runtime/base/snowflake"

// Op names an Engine mutation in a Change.
type Op uint8

// The mutations a journal records.
const (
	OpOwner         Op = iota + 1 // SetOwner(ID)
	OpRole                        // SetRole(ID, Bits)
	OpDeleteRole                  // DeleteRole(ID)
	OpOverwrites                  // SetOverwrites(ID, Overwrites)
	OpDeleteChannel               // DeleteChannel(ID)
	OpMember                      // SetMember(*Member)
	OpDeleteMember                // DeleteMember(ID)
)

// Change is one mutation of an Engine, in a form another Engine applies
// (Apply): a fan-out relay holds a replica of a guild's permission state
// by applying the owner's journal in order.
type Change struct {
	Op         Op           `json:"op"`
	ID         snowflake.ID `json:"id"`
	Bits       Bits         `json:"bits,omitempty"`
	Overwrites []Overwrite  `json:"overwrites,omitempty"`
	Member     *Member      `json:"member,omitempty"`
}

// SetJournal makes the engine hand every later mutation to fn, in call
// order, before applying it; nil stops the journal. Role positions are
// not journaled: they decide grants, never what a member can view.
func (e *Engine) SetJournal(fn func(Change)) { e.journal = fn }

func (e *Engine) record(c Change) {
	if e.journal != nil {
		e.journal(c)
	}
}

// Apply performs a journaled change.
func (e *Engine) Apply(c Change) {
	switch c.Op {
	case OpOwner:
		e.SetOwner(c.ID)
	case OpRole:
		e.SetRole(c.ID, c.Bits)
	case OpDeleteRole:
		e.DeleteRole(c.ID)
	case OpOverwrites:
		e.SetOverwrites(c.ID, c.Overwrites)
	case OpDeleteChannel:
		e.DeleteChannel(c.ID)
	case OpMember:
		if c.Member != nil {
			e.SetMember(*c.Member)
		}
	case OpDeleteMember:
		e.DeleteMember(c.ID)
	}
}
