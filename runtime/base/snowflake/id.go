// Package snowflake defines Concord's 64-bit ids in Discord's layout and a
// generator that never hands out the same id twice.
//
// Layout, most significant bit first: 42 bits of milliseconds since
// Epoch (2015-01-01T00:00:00Z), 5 bits worker, 5 bits process, 12 bits
// sequence. Ids sort by creation time, and (ms-Epoch)<<22 is a valid
// pagination cursor for "everything before/after this instant".
package snowflake

import (
	"fmt"
	"strconv"
	"time"
)

// Epoch is Discord's epoch in Unix milliseconds (2015-01-01T00:00:00Z).
const Epoch int64 = 1420070400000

// ID is a snowflake. It encodes as a JSON string and decodes from a JSON
// string or number, as Discord clients expect.
type ID uint64

// Parse reads a decimal snowflake.
func Parse(s string) (ID, error) {
	if s == "" || len(s) > 20 {
		return 0, fmt.Errorf("%w: %q", ErrInvalid, s)
	}
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%w: %q", ErrInvalid, s)
	}
	return ID(v), nil
}

// String returns the decimal form.
func (id ID) String() string { return strconv.FormatUint(uint64(id), 10) }

// Time returns the creation time encoded in the id.
func (id ID) Time() time.Time {
	return time.UnixMilli(int64(uint64(id)>>22) + Epoch).UTC()
}

// FromTime returns the smallest id minted at t: a pagination cursor.
func FromTime(t time.Time) ID {
	ms := t.UnixMilli() - Epoch
	if ms < 0 {
		return 0
	}
	return ID(uint64(ms) << 22)
}

// MarshalJSON encodes the id as a JSON string.
func (id ID) MarshalJSON() ([]byte, error) {
	b := make([]byte, 0, 22)
	b = append(b, '"')
	b = strconv.AppendUint(b, uint64(id), 10)
	return append(b, '"'), nil
}

// UnmarshalJSON accepts a JSON string or number (discord.py sends numbers).
func (id *ID) UnmarshalJSON(b []byte) error {
	s := string(b)
	if s == "null" {
		*id = 0
		return nil
	}
	if len(s) >= 2 && s[0] == '"' && s[len(s)-1] == '"' {
		s = s[1 : len(s)-1]
	}
	v, err := Parse(s)
	if err != nil {
		return err
	}
	*id = v
	return nil
}
