package snowflake_test

import (
	"encoding/json"
	"errors"
	"math/big"
	"strconv"
	"testing"
	"time"

	"github.com/concord-chat/concord/runtime/base/snowflake"
)

// parseOracle says what Parse must do, written without strconv: 1 to 20
// ASCII digits whose value fits in 64 bits.
func parseOracle(s string) (uint64, bool) {
	if len(s) == 0 || len(s) > 20 {
		return 0, false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
	}
	v, ok := new(big.Int).SetString(s, 10)
	if !ok || !v.IsUint64() {
		return 0, false
	}
	return v.Uint64(), true
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"0", "1", "175928847299117063", "18446744073709551615",
		"18446744073709551616", "-1", "+1", "", " 1", "1 ", "0x10", "1_000", "00000000000000000001",
		"000000000000000000001", "1e3", "١٢٣"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		id, err := snowflake.Parse(s)
		want, ok := parseOracle(s)
		if ok != (err == nil) {
			t.Fatalf("Parse(%q) = %d, %v; oracle ok=%v", s, id, err, ok)
		}
		if err != nil {
			if !errors.Is(err, snowflake.ErrInvalid) {
				t.Fatalf("Parse(%q) error %v is not ErrInvalid", s, err)
			}
			return
		}
		if uint64(id) != want {
			t.Fatalf("Parse(%q) = %d, want %d", s, id, want)
		}
		back, err := snowflake.Parse(id.String())
		if err != nil || back != id {
			t.Fatalf("round trip of %d: %d, %v", id, back, err)
		}
	})
}

func FuzzUnmarshalJSON(f *testing.F) {
	for _, s := range []string{`"175928847299117063"`, `175928847299117063`, `null`, `"null"`, `""`, `"`,
		`"18446744073709551615"`, `18446744073709551616`, `-1`, `1.0`, `1e3`, `"\u0031"`, `true`,
		`{}`, `[]`, `" 1"`, `"1"x`, `0`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var id snowflake.ID
		err := id.UnmarshalJSON(b)
		// Oracle: null, a bare decimal, or a decimal in double quotes.
		s, want, ok := string(b), uint64(0), false
		switch {
		case s == "null":
			ok = true
		case len(s) >= 2 && s[0] == '"' && s[len(s)-1] == '"':
			want, ok = parseOracle(s[1 : len(s)-1])
		default:
			want, ok = parseOracle(s)
		}
		if ok != (err == nil) || (ok && uint64(id) != want) {
			t.Fatalf("UnmarshalJSON(%q) = %d, %v; oracle %d, %v", b, id, err, want, ok)
		}
		if err != nil {
			return
		}
		out, err := id.MarshalJSON()
		if err != nil || string(out) != `"`+strconv.FormatUint(want, 10)+`"` {
			t.Fatalf("MarshalJSON(%d) = %s, %v", id, out, err)
		}
		// Through encoding/json, which checks the JSON first, the same.
		if json.Valid(b) {
			var viaJSON snowflake.ID
			if err := json.Unmarshal(b, &viaJSON); err != nil || viaJSON != id {
				t.Fatalf("json.Unmarshal(%q) = %d, %v; UnmarshalJSON gave %d", b, viaJSON, err, id)
			}
		}
	})
}

func TestJSONShapes(t *testing.T) {
	var v struct {
		A snowflake.ID `json:"a"`
		B snowflake.ID `json:"b"`
		C snowflake.ID `json:"c"`
	}
	if err := json.Unmarshal([]byte(`{"a":"41771983423143937","b":41771983423143937,"c":null}`), &v); err != nil {
		t.Fatal(err)
	}
	if v.A != 41771983423143937 || v.B != v.A || v.C != 0 {
		t.Fatalf("%+v", v)
	}
	out, _ := json.Marshal(v)
	if string(out) != `{"a":"41771983423143937","b":"41771983423143937","c":"0"}` {
		t.Fatal(string(out))
	}
}

func TestFromTimeCursor(t *testing.T) {
	tm := time.Date(2020, 1, 2, 3, 4, 5, 6_000_000, time.UTC)
	c := snowflake.FromTime(tm)
	if !c.Time().Equal(tm) || c.Sequence() != 0 || c.Worker() != 0 {
		t.Fatalf("cursor %d -> %v", c, c.Time())
	}
	if snowflake.FromTime(time.UnixMilli(snowflake.Epoch-1)) != 0 {
		t.Fatal("before epoch must be 0")
	}
}
