package gateway

import (
	"encoding/json"
	"errors"
	"testing"
)

func TestDecodeFrame(t *testing.T) {
	cases := []struct {
		in   string
		op   int
		want error
	}{
		{`{"op":1,"d":null}`, 1, nil},
		{`{"op":1,"d":0}`, 1, nil},
		{`{"op":1}`, 1, nil},
		{`{"op":1,"d":"1"}`, 0, ErrDecode},
		{`{"op":2,"d":{"token":"x"}}`, 2, nil},
		{`{"op":2,"d":null}`, 0, ErrDecode},
		{`{"op":6,"d":{}}`, 6, nil},
		{`{"op":8,"d":[]}`, 0, ErrDecode},
		{`{"op":3,"d":{},"s":null,"t":null}`, 3, nil},
		{`{"op":7,"d":null}`, 0, ErrUnknownOpcode},
		{`{"op":-1}`, 0, ErrUnknownOpcode},
		{`{"op":1.5}`, 0, ErrDecode},
		{`{"op":1e2}`, 0, ErrDecode},
		{`{"op":"1"}`, 0, ErrDecode},
		{`{"op":99999999999999999999}`, 0, ErrDecode},
		{`{}`, 0, ErrDecode},
		{`null`, 0, ErrDecode},
		{`{"op":1`, 0, ErrDecode},
		{``, 0, ErrDecode},
	}
	for _, tc := range cases {
		f, err := decodeFrame([]byte(tc.in))
		if !errors.Is(err, tc.want) || (err == nil && f.Op != tc.op) {
			t.Errorf("decodeFrame(%s) = op %d, %v; want op %d, %v", tc.in, f.Op, err, tc.op, tc.want)
		}
	}
}

func TestDecodeIdentify(t *testing.T) {
	id, err := decodeIdentify(json.RawMessage(`{"token":"Bot abc","intents":"513","shard":[0,1],"large_threshold":1000,
		"compress":true,"properties":{"$os":"linux","$browser":"DiscordGo"},"presence":{"game":{"name":"x"},"status":""}}`))
	if err != nil {
		t.Fatal(err)
	}
	if id.Token != "abc" || id.Intents != 513 || !id.HasShard || id.ShardCount != 1 || id.LargeThreshold != 250 ||
		!id.Compress || id.OS != "linux" || id.Browser != "DiscordGo" {
		t.Fatalf("%+v", id)
	}
	id, err = decodeIdentify(json.RawMessage(`{"token":"abc","properties":{"os":"win"},"shard":[3,"4"]}`))
	if err != nil || id.OS != "win" || id.ShardID != 3 || id.ShardCount != 4 || id.LargeThreshold != 50 {
		t.Fatalf("%+v %v", id, err)
	}
	for in, want := range map[string]error{
		`{"token":"a","shard":[1,1]}`:  ErrInvalidShard,
		`{"token":"a","shard":[0,0]}`:  ErrInvalidShard,
		`{"token":"a","shard":[-1,2]}`: ErrInvalidShard,
		`{"token":"a","shard":5}`:      ErrDecode,
		`{"token":"a","intents":-1}`:   ErrInvalidIntents,
		`{"token":"a","intents":1.5}`:  ErrInvalidIntents,
		`{"token":7}`:                  ErrDecode,
	} {
		if _, err := decodeIdentify(json.RawMessage(in)); !errors.Is(err, want) {
			t.Errorf("decodeIdentify(%s) = %v, want %v", in, err, want)
		}
	}
}

func TestDecodeResume(t *testing.T) {
	for in, want := range map[string]int64{
		`{"token":"Bot a","session_id":"s","seq":12}`: 12,
		`{"token":"a","session_id":"s","seq":"13"}`:   13,
		`{"token":"a","session_id":"s","seq":null}`:   0,
		`{"token":"a","session_id":"s"}`:              0,
	} {
		r, err := decodeResume(json.RawMessage(in))
		if err != nil || r.Seq != want || r.Token != "a" || r.SessionID != "s" {
			t.Errorf("decodeResume(%s) = %+v, %v", in, r, err)
		}
	}
	for _, in := range []string{`{"token":"a"}`, `{"session_id":"s"}`, `{"token":"a","session_id":"s","seq":-3}`,
		`{"token":"a","session_id":"s","seq":{}}`, `{"token":"a","session_id":"s","seq":9223372036854775807}`} {
		if _, err := decodeResume(json.RawMessage(in)); !errors.Is(err, ErrDecode) {
			t.Errorf("decodeResume(%s) = %v, want ErrDecode", in, err)
		}
	}
}

func TestAppendDispatch(t *testing.T) {
	for _, tc := range []struct {
		t   string
		seq int64
		d   string
	}{{"MESSAGE_CREATE", 1, `{"a":[1,2]}`}, {"READY", 1234567890, `{}`}, {"X", 9, ``}} {
		b := appendDispatch(nil, tc.t, tc.seq, []byte(tc.d))
		if len(b) != dispatchSize(tc.t, tc.seq, []byte(tc.d)) {
			t.Errorf("size %d, dispatchSize %d", len(b), dispatchSize(tc.t, tc.seq, []byte(tc.d)))
		}
		var f wireFrame
		if err := json.Unmarshal(b, &f); err != nil {
			t.Fatalf("%s: %v", b, err)
		}
		wantD := tc.d
		if wantD == "" {
			wantD = "null"
		}
		if f.Op != 0 || *f.T != tc.t || *f.S != tc.seq || string(f.D) != wantD {
			t.Errorf("%s decoded to %+v", b, f)
		}
	}
	if validEventName(`BAD"NAME`) || validEventName("") || !validEventName("GUILD_CREATE") {
		t.Error("validEventName")
	}
}

func TestReplayBuffer(t *testing.T) {
	lim := replayLimits{maxEvents: 4, maxBytes: 1000, maxAge: 100}
	var r replayBuffer
	push := func(seq int64, size int, at int64) { r.push(frame{seq: seq, size: size, at: at}, lim, at) }
	for seq := int64(1); seq <= 6; seq++ {
		push(seq, 10, seq)
	}
	if r.len() != 4 || r.bytes != 40 {
		t.Fatalf("len %d bytes %d, want 4 frames 40 bytes", r.len(), r.bytes)
	}
	if _, ok := r.since(1, 6); ok {
		t.Fatal("seq 2 was dropped but since(1) succeeded")
	}
	got, ok := r.since(2, 6)
	if !ok || len(got) != 4 || got[0].seq != 3 || got[3].seq != 6 {
		t.Fatalf("since(2) = %v %v", got, ok)
	}
	if got, ok := r.since(6, 6); !ok || len(got) != 0 {
		t.Fatalf("since(last) = %v %v", got, ok)
	}
	// Bytes: one big frame pushes out the rest.
	push(7, 995, 7)
	if r.len() != 1 || r.bytes != 995 {
		t.Fatalf("after big frame: len %d bytes %d", r.len(), r.bytes)
	}
	// A frame bigger than the bound is not kept either.
	push(8, 2000, 8)
	if r.len() != 0 || r.bytes != 0 {
		t.Fatalf("after oversize frame: len %d bytes %d", r.len(), r.bytes)
	}
	// Age.
	push(9, 1, 10)
	push(10, 1, 50)
	if d := r.trim(lim, 130); d != -1 || r.len() != 1 {
		t.Fatalf("trim by age: delta %d len %d", d, r.len())
	}
	if d := r.reset(); d != -1 || r.len() != 0 {
		t.Fatalf("reset delta %d", d)
	}
	// Steady state keeps the slice compact.
	for seq := int64(1); seq <= 10000; seq++ {
		push(seq, 1, 200)
	}
	if cap(r.frames) > 4*lim.maxEvents {
		t.Fatalf("backing array grew to %d frames for a bound of %d", cap(r.frames), lim.maxEvents)
	}
	// The age bound reads the oldest frame's stamp from the header: it
	// must follow the head as frames are dropped for any reason.
	r = replayBuffer{}
	for seq := int64(1); seq <= 6; seq++ {
		push(seq, 10, seq) // seqs 1 and 2 dropped by count: seq 3 (at 3) is the oldest
	}
	if d := r.trim(lim, 103); d != 0 || r.len() != 4 {
		t.Fatalf("trim at 103: delta %d len %d, want nothing dropped (the oldest is 100 old)", d, r.len())
	}
	if d := r.trim(lim, 105); d != -20 || r.len() != 2 {
		t.Fatalf("trim at 105: delta %d len %d, want seqs 3 and 4 dropped", d, r.len())
	}
	if got, ok := r.since(4, 6); !ok || len(got) != 2 || got[0].seq != 5 {
		t.Fatalf("since(4) after the age trim = %v %v", got, ok)
	}
}
