package wire

import (
	"strconv"
	"testing"
)

// FuzzParseBits: a permission bitset from a client's JSON parses to the
// value its digits say (string or number form), null is null, and
// anything else is an error, never a silent zero.
func FuzzParseBits(f *testing.F) {
	for _, s := range []string{`"8"`, `8`, `null`, `"18446744073709551615"`, `"18446744073709551616"`, `""`, `"-1"`, `1.5`, `"0x10"`, `"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		v, null, err := ParseBits(b)
		if err != nil {
			return
		}
		s := string(b)
		if null {
			if s != "null" || v != 0 {
				t.Fatalf("%q parsed as null %d", s, v)
			}
			return
		}
		if len(s) >= 2 && s[0] == '"' && s[len(s)-1] == '"' {
			s = s[1 : len(s)-1]
		}
		want, perr := strconv.ParseUint(s, 10, 64)
		if perr != nil || want != v {
			t.Fatalf("%q parsed as %d, its digits say %d (%v)", b, v, want, perr)
		}
	})
}
