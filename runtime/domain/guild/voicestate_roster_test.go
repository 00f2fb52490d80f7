package guild

import (
	"context"
	"encoding/json"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/concord-chat/concord/runtime/base/snowflake"
)

// rosterServer is oneServer with a roster: what the fleet reports of the
// guild's calls.
type rosterServer struct {
	*oneServer
	mu     sync.Mutex
	roster []VoiceParticipant
	asked  []snowflake.ID
}

func (r *rosterServer) Roster(_ context.Context, guildID snowflake.ID) ([]VoiceParticipant, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.asked = append(r.asked, guildID)
	return slices.Clone(r.roster), nil
}

func (r *rosterServer) disconnects() []snowflake.ID {
	r.oneServer.mu.Lock()
	defer r.oneServer.mu.Unlock()
	return slices.Clone(r.disconnected)
}

// TestVoiceRebuildFromRoster: a guild service that loads a guild (it moved
// here) rebuilds the voice states from the fleet's roster: GUILD_CREATE
// lists the members in calls with their server mute and self deafen; a
// participant who is no longer a member is disconnected and listed
// nowhere; a call split over two servers is kept on the one holding most
// of it and the other's user is sent there once its session attached; a
// rebuilt state whose session never attaches ends after the grace.
func TestVoiceRebuildFromRoster(t *testing.T) {
	f := newVoiceFixture(t)
	stranger := f.user("stranger", false)
	if err := f.svc.Unload(bg, f.gid); err != nil {
		t.Fatal(err)
	}
	sfu1 := VoiceServer{ID: "sfu-1", Endpoint: "127.0.0.1:4443", Region: "local"}
	sfu2 := VoiceServer{ID: "sfu-2", Endpoint: "127.0.0.2:4443", Region: "local"}
	alloc := &rosterServer{oneServer: &oneServer{}, roster: []VoiceParticipant{
		{Server: sfu1, ChannelID: f.open.ID, UserID: f.owner.ID, SessionID: string(f.ownerS.ID)},
		{Server: sfu1, ChannelID: f.open.ID, UserID: f.alice.ID, SessionID: string(f.aliceS.ID), Mute: true},
		{Server: sfu2, ChannelID: f.open.ID, UserID: f.bob.ID, SessionID: string(f.bobS.ID), SelfDeaf: true},
		{Server: sfu1, ChannelID: f.open.ID, UserID: stranger.ID, SessionID: "gone"},
	}}
	b := f.newService(Config{})
	if err := b.Voice.Enable(VoiceConfig{Allocator: alloc, Key: f.key, FailoverInterval: 20 * time.Millisecond,
		AdoptGrace: 300 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	n := count(f.sink.of(f.ownerS.ID), "GUILD_CREATE")
	if err := b.AttachSession(bg, f.gid, f.ownerS); err != nil {
		t.Fatal(err)
	}
	ds := f.sink.waitFor(t, f.ownerS.ID, "GUILD_CREATE on the new owner", func(ds []delivered) bool { return count(ds, "GUILD_CREATE") > n })
	var gc struct {
		VoiceStates []struct {
			UserID    snowflake.ID `json:"user_id"`
			ChannelID snowflake.ID `json:"channel_id"`
			Mute      bool         `json:"mute"`
			SelfDeaf  bool         `json:"self_deaf"`
		} `json:"voice_states"`
	}
	var last delivered
	for _, d := range ds {
		if d.Type == "GUILD_CREATE" {
			last = d
		}
	}
	if err := json.Unmarshal(last.Payload, &gc); err != nil {
		t.Fatal(err)
	}
	got := map[snowflake.ID]bool{}
	for _, vs := range gc.VoiceStates {
		got[vs.UserID] = true
		if vs.ChannelID != f.open.ID {
			t.Errorf("voice state %+v not in the open channel", vs)
		}
		if vs.UserID == f.alice.ID && !vs.Mute {
			t.Error("alice lost her server mute")
		}
		if vs.UserID == f.bob.ID && !vs.SelfDeaf {
			t.Error("bob lost his self deafen")
		}
	}
	if len(got) != 3 || !got[f.owner.ID] || !got[f.alice.ID] || !got[f.bob.ID] {
		t.Fatalf("GUILD_CREATE voice states %+v, want owner, alice and bob", gc.VoiceStates)
	}
	if !slices.Contains(alloc.disconnects(), stranger.ID) {
		t.Fatalf("the non-member was not disconnected: %v", alloc.disconnects())
	}

	// bob attaches: his part of the split call is sent to sfu-1.
	nb := len(f.serverUpdates(f.bobS))
	if err := b.AttachSession(bg, f.gid, f.bobS); err != nil {
		t.Fatal(err)
	}
	f.sink.waitFor(t, f.bobS.ID, "bob's VOICE_SERVER_UPDATE for the call's server", func(ds []delivered) bool {
		return len(f.serverUpdates(f.bobS)) > nb
	})
	if su := f.serverUpdates(f.bobS); su[len(su)-1].Endpoint != sfu1.Endpoint {
		t.Fatalf("bob was sent %+v, want sfu-1's endpoint", su[len(su)-1])
	}

	// alice never attaches: after the grace she leaves, and her server
	// connection is ended.
	f.sink.waitFor(t, f.ownerS.ID, "alice's leave", func(ds []delivered) bool {
		for _, d := range ds {
			var v vsu
			if d.Type == "VOICE_STATE_UPDATE" && json.Unmarshal(d.Payload, &v) == nil && v.UserID == f.alice.ID && v.ChannelID == nil {
				return true
			}
		}
		return false
	})
	if !slices.Contains(alloc.disconnects(), f.alice.ID) {
		t.Fatalf("alice's connection was not ended at the SFU: %v", alloc.disconnects())
	}
	if slices.Contains(alloc.disconnects(), f.bob.ID) || slices.Contains(alloc.disconnects(), f.owner.ID) {
		t.Fatalf("attached users were disconnected: %v", alloc.disconnects())
	}
}
