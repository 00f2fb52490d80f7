package load

import (
	"encoding/json"
	"testing"
)

func TestIntAfter(t *testing.T) {
	line := []byte(`{"round":12,"ts":1700000000123456789,"content":"x"}`)
	if v, ok := intAfter(line, roundKey); !ok || v != 12 {
		t.Fatalf("round %d %v", v, ok)
	}
	if v, ok := intAfter(line, tsKey); !ok || v != 1700000000123456789 {
		t.Fatalf("ts %d %v", v, ok)
	}
	if _, ok := intAfter([]byte(`{"op":11}`), tsKey); ok {
		t.Fatal("found ts in a frame without one")
	}
}

func TestPercentile(t *testing.T) {
	v := make([]int64, 100)
	for i := range v {
		v[i] = int64(i + 1)
	}
	for p, want := range map[int]int64{50: 50, 99: 99, 100: 100, 1: 1} {
		if got := percentile(v, p); got != want {
			t.Errorf("p%d = %d, want %d", p, got, want)
		}
	}
	if percentile(nil, 50) != 0 {
		t.Error("empty")
	}
}

func TestSources(t *testing.T) {
	s := sources(3, 50000, 20000)
	if len(s) != 3 || s[0] != "127.10.4.1" || s[2] != "127.10.4.3" {
		t.Fatalf("%v", s)
	}
}

// Every event of the mix is a JSON object whose round and send time the
// uncompressed client finds where it looks for them.
func TestMixEvent(t *testing.T) {
	types := map[string]bool{}
	for round := 1; round <= 12; round++ {
		typ, d := mixEvent(round, 1234567890123)
		types[typ] = true
		if !json.Valid(d) {
			t.Fatalf("round %d (%s): invalid JSON %s", round, typ, d)
		}
		frame := []byte(`{"t":"` + typ + `","s":9,"op":0,"d":` + string(d) + `}`)
		if r, ok := intAfter(frame, roundKey); !ok || r != int64(round) {
			t.Fatalf("round %d: read round %d, %v", round, r, ok)
		}
		if ts, ok := intAfter(frame, tsKey); !ok || ts != 1234567890123 {
			t.Fatalf("round %d: read ts %d, %v", round, ts, ok)
		}
	}
	if len(types) != 4 {
		t.Fatalf("event types %v, want the four of the mix", types)
	}
}
