package memberlist

import (
	"encoding/json"
	"testing"

	"github.com/concord-chat/concord/runtime/adapters/store"
	"github.com/concord-chat/concord/runtime/domain/permissions"
)

func TestWithPresence(t *testing.T) {
	p := json.RawMessage(`{"user":{"id":"1"},"status":"idle"}`)
	for _, m := range []string{`{"user":{"id":"1"},"roles":[]}`, `{}`, "{ }\n", `{"a":1} `} {
		var got map[string]json.RawMessage
		if err := json.Unmarshal(WithPresence(json.RawMessage(m), p), &got); err != nil {
			t.Fatalf("%q: %v", m, err)
		}
		if string(got["presence"]) != string(p) {
			t.Fatalf("%q: presence = %s", m, got["presence"])
		}
	}
}

func TestViewOverwrites(t *testing.T) {
	ows := []store.Overwrite{
		{ID: 1, Type: store.OverwriteRole, Deny: uint64(permissions.ViewChannel)},
		{ID: 2, Type: store.OverwriteMember, Allow: uint64(permissions.ViewChannel | permissions.SendMessages)},
		{ID: 3, Type: store.OverwriteRole, Allow: uint64(permissions.SendMessages)},
	}
	got := ViewOverwrites(ows)
	want := []ViewOverwrite{{ID: 1, Deny: true}, {ID: 2, Member: true, Allow: true}, {ID: 3}}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("ViewOverwrites[%d] = %+v, want %+v", i, got[i], want[i])
		}
	}
	// Overwrites that leave VIEW_CHANNEL alone share the everyone list.
	if GroupKey(ViewOverwrites(ows[2:])) != EveryoneList {
		t.Fatalf("send-only overwrite changed the list")
	}
	if DisplayName("", "Glob", "user") != "Glob" || DisplayName("nick", "Glob", "user") != "nick" || DisplayName("", "", "user") != "user" {
		t.Fatal("DisplayName")
	}
}
