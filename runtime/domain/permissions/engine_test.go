package permissions_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/permissions"
)

type P = permissions.Bits

const (
	guild   snowflake.ID = 100
	owner   snowflake.ID = 1
	alice   snowflake.ID = 2
	bob     snowflake.ID = 3
	mods    snowflake.ID = 201 // role
	admins  snowflake.ID = 202 // role
	muted   snowflake.ID = 203 // role
	ghost   snowflake.ID = 299 // role that does not exist
	general snowflake.ID = 301 // channel
)

var (
	now    = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	future = now.Add(time.Hour)
	past   = now.Add(-time.Hour)
	text   = permissions.ViewChannel | permissions.SendMessages | permissions.ReadMessageHistory |
		permissions.MentionEveryone | permissions.SendTTSMessages | permissions.AttachFiles |
		permissions.EmbedLinks | permissions.AddReactions
	voice = permissions.Connect | permissions.Speak | permissions.Stream | permissions.UseVAD
)

type roleDef struct {
	id   snowflake.ID
	bits P
}

func TestChannelEdgeCases(t *testing.T) {
	tests := []struct {
		name    string
		roles   []roleDef // guild id = @everyone
		ows     []permissions.Overwrite
		member  permissions.Member
		want    P
		wantErr bool
	}{{
		name:   "owner has everything despite denies",
		roles:  []roleDef{{guild, 0}},
		ows:    []permissions.Overwrite{{ID: guild, Deny: permissions.All}, {ID: owner, Member: true, Deny: permissions.All}},
		member: permissions.Member{UserID: owner},
		want:   permissions.All,
	}, {
		name:   "owner under timeout keeps everything",
		roles:  []roleDef{{guild, text}},
		member: permissions.Member{UserID: owner, TimeoutUntil: future},
		want:   permissions.All,
	}, {
		name:   "administrator ignores overwrites",
		roles:  []roleDef{{guild, text}, {admins, permissions.Administrator}},
		ows:    []permissions.Overwrite{{ID: guild, Deny: permissions.All}, {ID: admins, Deny: permissions.ViewChannel}, {ID: alice, Member: true, Deny: permissions.All}},
		member: permissions.Member{UserID: alice, Roles: []snowflake.ID{admins}},
		want:   permissions.All,
	}, {
		name:   "administrator under timeout keeps everything",
		roles:  []roleDef{{guild, text}, {admins, permissions.Administrator}},
		member: permissions.Member{UserID: alice, Roles: []snowflake.ID{admins}, TimeoutUntil: future},
		want:   permissions.All,
	}, {
		name:   "ADMINISTRATOR allowed by an overwrite is not administrator",
		roles:  []roleDef{{guild, text}},
		ows:    []permissions.Overwrite{{ID: guild, Allow: permissions.Administrator, Deny: permissions.SendMessages}},
		member: permissions.Member{UserID: alice},
		want:   text&^(permissions.SendMessages|permissions.SendImplied) | permissions.Administrator,
	}, {
		name:   "timeout leaves view and history",
		roles:  []roleDef{{guild, text | voice | permissions.ManageMessages}},
		member: permissions.Member{UserID: alice, TimeoutUntil: future},
		want:   permissions.ViewChannel | permissions.ReadMessageHistory,
	}, {
		name:   "timeout keeps only what the member had",
		roles:  []roleDef{{guild, permissions.ViewChannel | permissions.SendMessages}},
		member: permissions.Member{UserID: alice, TimeoutUntil: future},
		want:   permissions.ViewChannel,
	}, {
		name:   "timeout on a hidden channel is nothing",
		roles:  []roleDef{{guild, text}},
		ows:    []permissions.Overwrite{{ID: guild, Deny: permissions.ViewChannel}},
		member: permissions.Member{UserID: alice, TimeoutUntil: future},
		want:   0,
	}, {
		name:   "expired timeout is no timeout",
		roles:  []roleDef{{guild, text}},
		member: permissions.Member{UserID: alice, TimeoutUntil: past},
		want:   text,
	}, {
		name:   "timeout ending exactly now is over",
		roles:  []roleDef{{guild, text}},
		member: permissions.Member{UserID: alice, TimeoutUntil: now},
		want:   text,
	}, {
		name:   "missing VIEW_CHANNEL clears every channel permission",
		roles:  []roleDef{{guild, text | voice}, {mods, permissions.ManageMessages | permissions.ManageChannels}},
		ows:    []permissions.Overwrite{{ID: guild, Deny: permissions.ViewChannel}},
		member: permissions.Member{UserID: alice, Roles: []snowflake.ID{mods}},
		want:   0,
	}, {
		name:   "deny on @everyone, allow on a role: role member sees",
		roles:  []roleDef{{guild, text}, {mods, 0}},
		ows:    []permissions.Overwrite{{ID: guild, Deny: permissions.ViewChannel | permissions.SendMessages}, {ID: mods, Allow: permissions.ViewChannel}},
		member: permissions.Member{UserID: alice, Roles: []snowflake.ID{mods}},
		want:   text &^ (permissions.SendMessages | permissions.SendImplied),
	}, {
		name:   "deny on @everyone, allow on a role: others do not",
		roles:  []roleDef{{guild, text}, {mods, 0}},
		ows:    []permissions.Overwrite{{ID: guild, Deny: permissions.ViewChannel}, {ID: mods, Allow: permissions.ViewChannel}},
		member: permissions.Member{UserID: bob},
		want:   0,
	}, {
		name:   "role allow beats another role's deny",
		roles:  []roleDef{{guild, text}, {mods, 0}, {muted, 0}},
		ows:    []permissions.Overwrite{{ID: muted, Deny: permissions.SendMessages}, {ID: mods, Allow: permissions.SendMessages}},
		member: permissions.Member{UserID: alice, Roles: []snowflake.ID{muted, mods}},
		want:   text,
	}, {
		name:   "member overwrite deny beats role overwrite allow",
		roles:  []roleDef{{guild, text &^ permissions.SendMessages}, {mods, 0}},
		ows:    []permissions.Overwrite{{ID: mods, Allow: permissions.SendMessages}, {ID: alice, Member: true, Deny: permissions.SendMessages}},
		member: permissions.Member{UserID: alice, Roles: []snowflake.ID{mods}},
		want:   text &^ (permissions.SendMessages | permissions.SendImplied),
	}, {
		name:   "member overwrite allow beats role overwrite deny",
		roles:  []roleDef{{guild, text}, {muted, 0}},
		ows:    []permissions.Overwrite{{ID: muted, Deny: permissions.SendMessages | permissions.ViewChannel}, {ID: alice, Member: true, Allow: permissions.ViewChannel | permissions.SendMessages}},
		member: permissions.Member{UserID: alice, Roles: []snowflake.ID{muted}},
		want:   text,
	}, {
		name:   "no SEND_MESSAGES clears mention, TTS, files and embeds",
		roles:  []roleDef{{guild, text}},
		ows:    []permissions.Overwrite{{ID: guild, Deny: permissions.SendMessages}},
		member: permissions.Member{UserID: alice},
		want:   permissions.ViewChannel | permissions.ReadMessageHistory | permissions.AddReactions,
	}, {
		name:   "no CONNECT clears voice permissions",
		roles:  []roleDef{{guild, permissions.ViewChannel | voice | permissions.MoveMembers | permissions.PrioritySpeaker}},
		ows:    []permissions.Overwrite{{ID: guild, Deny: permissions.Connect}},
		member: permissions.Member{UserID: alice},
		want:   permissions.ViewChannel,
	}, {
		name:   "a listed role that does not exist is ignored, with its overwrite",
		roles:  []roleDef{{guild, text}},
		ows:    []permissions.Overwrite{{ID: ghost, Deny: permissions.ViewChannel}},
		member: permissions.Member{UserID: alice, Roles: []snowflake.ID{ghost, ghost, guild}},
		want:   text,
	}, {
		name:   "the last overwrite for a target wins",
		roles:  []roleDef{{guild, text}},
		ows:    []permissions.Overwrite{{ID: guild, Deny: permissions.ViewChannel}, {ID: guild, Deny: permissions.SendMessages}},
		member: permissions.Member{UserID: alice},
		want:   text &^ (permissions.SendMessages | permissions.SendImplied),
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := permissions.NewEngine(guild, owner)
			for _, r := range tc.roles {
				e.SetRole(r.id, r.bits)
			}
			e.SetOverwrites(general, tc.ows)
			e.SetMember(tc.member)
			for _, got := range []P{
				e.ChannelUncached(tc.member.UserID, general, now),
				e.Channel(tc.member.UserID, general, now), // miss
				e.Channel(tc.member.UserID, general, now), // hit
			} {
				if got != tc.want {
					t.Fatalf("got %#x, want %#x (extra %#x, missing %#x)", uint64(got), uint64(tc.want), uint64(got&^tc.want), uint64(tc.want&^got))
				}
			}
			if s := e.Stats(); s.Hits < 1 && tc.member.UserID != owner {
				t.Errorf("stats %+v: second lookup was not a hit", s)
			}
		})
	}
}

func TestUnknownAndNonMembers(t *testing.T) {
	e := permissions.NewEngine(guild, owner)
	e.SetRole(guild, permissions.DefaultEveryone)
	e.SetOverwrites(general, nil)
	e.SetMember(permissions.Member{UserID: alice})
	for name, got := range map[string]P{
		"non-member channel":      e.Channel(bob, general, now),
		"non-member base":         e.Base(bob, now),
		"owner not yet a member":  e.Channel(owner, general, now),
		"unknown channel":         e.Channel(alice, 999, now),
		"unknown channel uncache": e.ChannelUncached(alice, 999, now),
	} {
		if got != 0 {
			t.Errorf("%s: got %#x, want 0", name, uint64(got))
		}
	}
	if got := e.Channel(alice, general, now); got != permissions.DefaultEveryone {
		t.Errorf("member with default @everyone: got %#x", uint64(got))
	}
}

func TestBase(t *testing.T) {
	e := permissions.NewEngine(guild, owner)
	e.SetRole(guild, permissions.ViewChannel)
	e.SetRole(mods, permissions.KickMembers)
	e.SetRole(admins, permissions.Administrator)
	e.SetMember(permissions.Member{UserID: owner})
	e.SetMember(permissions.Member{UserID: alice, Roles: []snowflake.ID{mods, ghost}})
	e.SetMember(permissions.Member{UserID: bob, Roles: []snowflake.ID{admins}, TimeoutUntil: future})
	if got := e.Base(owner, now); got != permissions.All {
		t.Errorf("owner: %#x", uint64(got))
	}
	if got := e.Base(alice, now); got != permissions.ViewChannel|permissions.KickMembers {
		t.Errorf("alice: %#x", uint64(got))
	}
	if got := e.Base(bob, now); got != permissions.All {
		t.Errorf("admin under timeout: %#x", uint64(got))
	}
	e.SetMember(permissions.Member{UserID: alice, Roles: []snowflake.ID{mods}, TimeoutUntil: future})
	if got := e.Base(alice, now); got != permissions.ViewChannel {
		t.Errorf("alice timed out: %#x", uint64(got))
	}
	e.DeleteRole(admins)
	if got := e.Base(bob, now); got != permissions.ViewChannel {
		t.Errorf("bob after admin role deleted, timed out: %#x", uint64(got))
	}
	e.SetOwner(alice)
	if got := e.Base(alice, now); got != permissions.All {
		t.Errorf("new owner: %#x", uint64(got))
	}
}

// TestInvalidation checks each mutation changes exactly what it should
// through the cached path.
func TestInvalidation(t *testing.T) {
	const other snowflake.ID = 302
	e := permissions.NewEngine(guild, owner)
	e.SetRole(guild, text)
	e.SetRole(mods, 0)
	e.SetOverwrites(general, []permissions.Overwrite{{ID: guild, Deny: permissions.ViewChannel}, {ID: mods, Allow: permissions.ViewChannel}})
	e.SetOverwrites(other, nil)
	e.SetMember(permissions.Member{UserID: alice, Roles: []snowflake.ID{mods}})
	e.SetMember(permissions.Member{UserID: bob})
	check := func(step string, user, ch snowflake.ID, want P) {
		t.Helper()
		if got := e.Channel(user, ch, now); got != want {
			t.Fatalf("%s: Channel(%d, %d) = %#x, want %#x", step, user, ch, uint64(got), uint64(want))
		}
	}
	check("start", alice, general, text)
	check("start", bob, general, 0)
	check("start", bob, other, text)

	e.SetRole(mods, permissions.ManageMessages)
	check("role bits", alice, general, text|permissions.ManageMessages)
	check("role bits", bob, other, text)

	e.SetRole(guild, text&^permissions.SendMessages)
	check("@everyone bits", bob, other, text&^(permissions.SendMessages|permissions.SendImplied))

	e.SetOverwrites(general, nil)
	check("overwrites", bob, general, text&^(permissions.SendMessages|permissions.SendImplied))

	e.SetMember(permissions.Member{UserID: bob, Roles: []snowflake.ID{mods}})
	check("member roles", bob, general, text&^(permissions.SendMessages|permissions.SendImplied)|permissions.ManageMessages)

	e.DeleteRole(mods)
	check("role deleted", bob, general, text&^(permissions.SendMessages|permissions.SendImplied))

	e.SetOverwrites(general, []permissions.Overwrite{{ID: bob, Member: true, Allow: permissions.SendMessages}})
	check("member overwrite", bob, general, text)
	check("member overwrite, other member", alice, general, text&^(permissions.SendMessages|permissions.SendImplied))
	e.DeleteMember(bob)
	check("member deleted", bob, general, 0)
	e.SetMember(permissions.Member{UserID: bob})
	check("member back, overwrite still there", bob, general, text)

	e.DeleteChannel(general)
	check("channel deleted", alice, general, 0)
	e.SetOverwrites(general, nil)
	check("channel back without overwrites", bob, general, text&^(permissions.SendMessages|permissions.SendImplied))
	if s := e.Stats(); s.Hits == 0 || s.Misses == 0 || s.Entries == 0 {
		t.Errorf("stats %+v", s)
	}
}

func TestBitsJSON(t *testing.T) {
	b, err := json.Marshal(struct {
		P P `json:"p"`
	}{permissions.All})
	if err != nil || string(b) != `{"p":"`+permissions.All.String()+`"}` {
		t.Fatalf("marshal: %s %v", b, err)
	}
	for in, want := range map[string]P{`"8"`: 8, `8`: 8, `"0"`: 0, `null`: 0, `"18446744073709551615"`: ^P(0)} {
		var got P
		if err := json.Unmarshal([]byte(in), &got); err != nil || got != want {
			t.Errorf("unmarshal %s: %d %v", in, got, err)
		}
	}
	for _, in := range []string{`""`, `"-1"`, `-1`, `"0x8"`, `"18446744073709551616"`, `1.5`, `"8 "`, `true`} {
		var got P
		if err := json.Unmarshal([]byte(in), &got); err == nil {
			t.Errorf("unmarshal %s: want error, got %d", in, got)
		}
	}
}

func TestConstants(t *testing.T) {
	if permissions.All != 0x1F7DFFFFFFFFFF || permissions.All.Has(1<<41) || permissions.All.Has(1<<47) {
		t.Errorf("All = %#x", uint64(permissions.All))
	}
	if permissions.All.String() != "8864262743130111" {
		t.Errorf("All = %s", permissions.All)
	}
	if !permissions.DefaultEveryone.Has(permissions.ViewChannel|permissions.SendMessages|permissions.ReadMessageHistory|permissions.Connect|permissions.Speak) ||
		permissions.DefaultEveryone&(permissions.Administrator|permissions.ManageMessages|permissions.KickMembers|permissions.BanMembers|permissions.ModerateMembers) != 0 {
		t.Errorf("DefaultEveryone = %#x", uint64(permissions.DefaultEveryone))
	}
	if !P(0b11).Has(0b01) || P(0b01).Has(0b11) || !P(5).Has(0) {
		t.Error("Has")
	}
}
