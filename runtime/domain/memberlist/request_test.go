package memberlist

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/concord-chat/concord/runtime/base/snowflake"
)

func TestParseRequest(t *testing.T) {
	r, err := ParseRequest(json.RawMessage(`{"guild_id":"1000","typing":true,"channels":{"55":[[0,99],[100,199]],"7":[[0,99]]}}`))
	if err != nil {
		t.Fatal(err)
	}
	if r.GuildID != 1000 || !r.Typing || !slices.Equal(r.Channels[55], []Range{{0, 99}, {100, 199}}) ||
		!slices.Equal(r.ChannelIDs(), []snowflake.ID{7, 55}) {
		t.Fatalf("request = %+v", r)
	}
	if r, err := ParseRequest(json.RawMessage(`{"guild_id":1000}`)); err != nil || r.Channels != nil {
		t.Fatalf("numeric guild, no channels: %+v %v", r, err)
	}
	for _, d := range []string{`{"channels":{"5":[[0,9]]}}`, `{"guild_id":"1","channels":{"x":[[0,9]]}}`,
		`{"guild_id":"1","channels":{"5":[[0,9,3]]}}`, `{"guild_id":"1","channels":{"5":"all"}}`, `[`} {
		if _, err := ParseRequest(json.RawMessage(d)); !errors.Is(err, ErrBadRequest) {
			t.Errorf("%s: err = %v", d, err)
		}
	}
}

func candidates(n int) func(func(Candidate) bool) {
	return func(yield func(Candidate) bool) {
		for i := 1; i <= n; i++ {
			name := fmt.Sprintf("user%04d", i)
			if i%2 == 0 {
				name = fmt.Sprintf("Bob%04d", i)
			}
			c := Candidate{UserID: snowflake.ID(i), Names: []string{name},
				Member: json.RawMessage(fmt.Sprintf(`{"user":{"id":"%d","username":%q}}`, i, name))}
			if i%3 == 0 {
				c.Presence = json.RawMessage(fmt.Sprintf(`{"user":{"id":"%d"},"status":"online"}`, i))
			}
			if !yield(c) {
				return
			}
		}
	}
}

type chunk struct {
	GuildID    string            `json:"guild_id"`
	Members    []json.RawMessage `json:"members"`
	ChunkIndex int               `json:"chunk_index"`
	ChunkCount int               `json:"chunk_count"`
	NotFound   []string          `json:"not_found"`
	Presences  []json.RawMessage `json:"presences"`
	Nonce      *string           `json:"nonce"`
}

func decodeChunks(t *testing.T, raw []json.RawMessage) []chunk {
	t.Helper()
	var out []chunk
	for _, r := range raw {
		var c chunk
		if err := json.Unmarshal(r, &c); err != nil {
			t.Fatalf("chunk %s: %v", r, err)
		}
		out = append(out, c)
	}
	return out
}

func TestMembersRequest(t *testing.T) {
	// Query with limit: prefix match, case-insensitive, limit honoured.
	r, err := ParseMembersRequest(json.RawMessage(`{"guild_id":1000,"query":"bob","limit":3,"presences":true,"nonce":"n\u0001x"}`))
	if err != nil {
		t.Fatal(err)
	}
	r, _ = r.Check(IntentGuildMembers | IntentGuildPresences)
	got := decodeChunks(t, Chunks(r, r.Select(candidates(100))))
	if len(got) != 1 || len(got[0].Members) != 3 || got[0].Nonce == nil || *got[0].Nonce != "n\x01x" || got[0].GuildID != "1000" {
		t.Fatalf("query chunks = %+v", got)
	}
	if len(got[0].Presences) != 1 { // of Bob0002, Bob0004, Bob0006 only 6 is online
		t.Fatalf("presences = %s", got[0].Presences)
	}
	// Every member: needs GUILD_MEMBERS; chunks of 1000; no presences
	// without GUILD_PRESENCES.
	r, _ = ParseMembersRequest(json.RawMessage(`{"guild_id":"1000","query":"","limit":0,"presences":true}`))
	if _, err := r.Check(0); !errors.Is(err, ErrMissingIntent) {
		t.Fatalf("all without intent: %v", err)
	}
	r, _ = r.Check(IntentGuildMembers)
	got = decodeChunks(t, Chunks(r, r.Select(candidates(2500))))
	if len(got) != 3 || len(got[0].Members) != 1000 || len(got[2].Members) != 500 || got[2].ChunkIndex != 2 || got[1].ChunkCount != 3 ||
		got[0].Presences != nil || got[0].Nonce != nil {
		t.Fatalf("all chunks: %d chunks", len(got))
	}
	// user_ids: found ones and not_found, even when nothing matches.
	r, _ = ParseMembersRequest(json.RawMessage(`{"guild_id":"1000","user_ids":["5","7","9999"],"nonce":"abc"}`))
	got = decodeChunks(t, Chunks(r, r.Select(candidates(10))))
	if len(got) != 1 || len(got[0].Members) != 2 || !slices.Equal(got[0].NotFound, []string{"9999"}) || *got[0].Nonce != "abc" {
		t.Fatalf("user_ids chunk = %+v", got)
	}
	r, _ = ParseMembersRequest(json.RawMessage(`{"guild_id":"1000","user_ids":"12345"}`))
	got = decodeChunks(t, Chunks(r, r.Select(candidates(10))))
	if len(got) != 1 || got[0].ChunkCount != 1 || len(got[0].Members) != 0 || !slices.Equal(got[0].NotFound, []string{"12345"}) {
		t.Fatalf("single id chunk = %+v", got)
	}
	// A query limit above 100 is capped; long nonces are dropped.
	r, _ = ParseMembersRequest(json.RawMessage(`{"guild_id":"1000","query":"u","limit":500,"nonce":"0123456789012345678901234567890123"}`))
	if r.Nonce != "" || len(r.Select(candidates(1000))) != MaxQueryLimit {
		t.Fatalf("cap: nonce %q", r.Nonce)
	}
	for _, d := range []string{`{"query":""}`, `{"guild_id":"1"}`, `{"guild_id":"1","query":"a","limit":-1}`,
		`{"guild_id":"1","user_ids":[` + ids(101) + `]}`, `{"guild_id":"1","user_ids":{}}`} {
		if _, err := ParseMembersRequest(json.RawMessage(d)); !errors.Is(err, ErrBadRequest) {
			t.Errorf("%s: err = %v", d, err)
		}
	}
}

func ids(n int) string {
	s := ""
	for i := range n {
		if i > 0 {
			s += ","
		}
		s += fmt.Sprint(i + 1)
	}
	return s
}
