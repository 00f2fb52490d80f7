package bots

import (
	"encoding/json"
	"reflect"
	"strconv"
)

// flexInts is a list of small integers that clients may send as JSON
// numbers or as numeric strings (command contexts and integration_types:
// some libraries send ["0","1"], which Discord accepts). It is written
// back as numbers.
type flexInts []int

// UnmarshalJSON accepts [0, "1", ...] and null.
func (f *flexInts) UnmarshalJSON(b []byte) error {
	var raw []json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	if raw == nil {
		*f = nil
		return nil
	}
	out := make(flexInts, 0, len(raw))
	for _, r := range raw {
		var n int
		if err := json.Unmarshal(r, &n); err == nil {
			out = append(out, n)
			continue
		}
		var s string
		if err := json.Unmarshal(r, &s); err != nil {
			return &json.UnmarshalTypeError{Value: string(r), Type: jsonIntType}
		}
		n, err := strconv.Atoi(s)
		if err != nil {
			return &json.UnmarshalTypeError{Value: s, Type: jsonIntType}
		}
		out = append(out, n)
	}
	*f = out
	return nil
}

var jsonIntType = reflect.TypeFor[int]()
