package wire

import (
	"time"
)

// TimestampLayout is Discord's timestamp format: UTC, six fraction digits,
// "+00:00" rather than "Z" (discord.py parses it with fromisoformat).
const TimestampLayout = "2006-01-02T15:04:05.000000+00:00"

// Timestamp is a time encoded in TimestampLayout.
type Timestamp time.Time

// NewTimestamp returns t as a Timestamp.
func NewTimestamp(t time.Time) Timestamp { return Timestamp(t) }

// OptionalTimestamp returns nil for the zero time and t otherwise, for
// fields that are null when unset.
func OptionalTimestamp(t time.Time) *Timestamp {
	if t.IsZero() {
		return nil
	}
	ts := Timestamp(t)
	return &ts
}

// Time returns the time.
func (t Timestamp) Time() time.Time { return time.Time(t) }

// String formats the timestamp in TimestampLayout.
func (t Timestamp) String() string { return time.Time(t).UTC().Format(TimestampLayout) }

// MarshalJSON encodes the timestamp as a JSON string in TimestampLayout.
func (t Timestamp) MarshalJSON() ([]byte, error) {
	b := make([]byte, 0, len(TimestampLayout)+2)
	b = append(b, '"')
	b = time.Time(t).UTC().AppendFormat(b, TimestampLayout)
	return append(b, '"'), nil
}

// UnmarshalJSON accepts RFC 3339 with or without fraction digits.
func (t *Timestamp) UnmarshalJSON(b []byte) error {
	s := string(b)
	if s == "null" {
		*t = Timestamp{}
		return nil
	}
	if len(s) < 2 || s[0] != '"' || s[len(s)-1] != '"' {
		return &time.ParseError{Layout: time.RFC3339Nano, Value: s, Message: ": not a JSON string"}
	}
	v, err := time.Parse(time.RFC3339Nano, s[1:len(s)-1])
	if err != nil {
		return err
	}
	*t = Timestamp(v)
	return nil
}
