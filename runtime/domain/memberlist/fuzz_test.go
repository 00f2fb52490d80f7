package memberlist

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/event"
)

// FuzzRequest: any op 14 payload either fails with ErrBadRequest or, once
// applied to a guild, leaves the session within the limits and never
// subscribed to the hidden channel's list.
func FuzzRequest(f *testing.F) {
	f.Add([]byte(`{"guild_id":"1000","typing":true,"channels":{"1":[[0,99],[100,199]],"2":[[0,99]]}}`))
	f.Add([]byte(`{"guild_id":1000,"channels":{"2":[[-5,1000000],[7,3],[0,99],[0,99]]}}`))
	f.Add([]byte(`{"guild_id":"1000","channels":{"3":[[0,99]],"1":[[0,1],[2,3],[4,5],[6,7],[8,9],[10,11]]}}`))
	f.Fuzz(func(t *testing.T, d []byte) {
		r, err := ParseRequest(json.RawMessage(d))
		if err != nil {
			if !errors.Is(err, ErrBadRequest) {
				t.Fatalf("error %v is not ErrBadRequest", err)
			}
			return
		}
		v := &fakeViewer{hidden: map[[2]snowflake.ID]bool{{5, 3}: true}}
		g := NewGuild(guildID, v, nil, GuildConfig{})
		g.SetChannel(1, EveryoneList)
		g.SetChannel(2, EveryoneList)
		g.SetChannel(3, "secret")
		for i := range 30 {
			g.Upsert(member(snowflake.ID(i+1), fmt.Sprint("m", i), StatusOnline))
		}
		s := event.Session{ID: "s", UserID: 5, Node: "n"}
		disp, _ := g.Subscribe(s, r.Channels)
		for _, vr := range disp.Variants {
			if payloadListID(t, vr) == "secret" {
				t.Fatalf("hidden list sent: %s", vr.Payload)
			}
		}
		if g.List(3).Subscribers() != 0 {
			t.Fatalf("subscribed to a hidden channel")
		}
		for _, ch := range []snowflake.ID{1, 2} {
			rs := g.List(ch).Ranges("s")
			if len(rs) > 5 {
				t.Fatalf("%d ranges kept", len(rs))
			}
			for _, rg := range rs {
				if rg[0] < 0 || rg[1] < rg[0] || rg[1]-rg[0] >= 100 {
					t.Fatalf("range %v kept", rg)
				}
			}
		}
	})
}

// FuzzMembersRequest: any op 8 payload either fails with ErrBadRequest or
// yields chunks that decode, echo a short nonce, and hold at most the
// allowed number of members.
func FuzzMembersRequest(f *testing.F) {
	f.Add([]byte(`{"guild_id":1000,"query":"bob","limit":3,"presences":true,"nonce":"x"}`))
	f.Add([]byte(`{"guild_id":"1000","user_ids":["5","7","9999"],"nonce":"abc"}`))
	f.Add([]byte(`{"guild_id":"1000","query":"","limit":0}`))
	f.Fuzz(func(t *testing.T, d []byte) {
		r, err := ParseMembersRequest(json.RawMessage(d))
		if err != nil {
			if !errors.Is(err, ErrBadRequest) {
				t.Fatalf("error %v is not ErrBadRequest", err)
			}
			return
		}
		r, err = r.Check(IntentGuildMembers | IntentGuildPresences)
		if err != nil {
			t.Fatal(err)
		}
		matched := r.Select(candidates(50))
		if !r.All() && len(r.UserIDs) == 0 && len(matched) > MaxQueryLimit {
			t.Fatalf("%d members for a query", len(matched))
		}
		for _, c := range decodeChunks(t, Chunks(r, matched)) {
			if (c.Nonce == nil) != (r.Nonce == "") || (c.Nonce != nil && *c.Nonce != r.Nonce) || len(r.Nonce) > MaxNonce {
				t.Fatalf("nonce %v for %q", c.Nonce, r.Nonce)
			}
		}
	})
}
