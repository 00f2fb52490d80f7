package wire

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/bwmarrin/discordgo"

	"github.com/concord-chat/concord/runtime/adapters/store"
	"github.com/concord-chat/concord/runtime/base/snowflake"
)

var tsRE = regexp.MustCompile(`"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}\+00:00"`)

func fixtures() (store.User, store.Member, store.Role, store.Channel, store.Message) {
	joined := time.Date(2024, 5, 1, 12, 0, 0, 123456000, time.UTC)
	u := store.User{ID: 175928847299117063, Username: "alice", GlobalName: "Alice"}
	m := store.Member{GuildID: 41771983423143937, UserID: u.ID, Roles: []snowflake.ID{41771983423143937, 41771983423143938}, JoinedAt: joined}
	r := store.Role{ID: 41771983423143938, GuildID: m.GuildID, Name: "mods", Permissions: 1 << 40, Position: 1}
	c := store.Channel{ID: 41771983423143939, GuildID: m.GuildID, Type: store.ChannelText, Name: "general",
		Overwrites: []store.Overwrite{{ID: r.ID, Type: store.OverwriteRole, Allow: 1024, Deny: 1 << 52}}, RateLimitPerUser: 5}
	msg := store.Message{ID: snowflake.FromTime(joined) | 7, ChannelID: c.ID, GuildID: c.GuildID, AuthorID: u.ID,
		Content: "hello", Mentions: []snowflake.ID{u.ID}, Nonce: "#42"}
	return u, m, r, c, msg
}

func TestMessageDecodesInDiscordgo(t *testing.T) {
	u, m, r, c, sm := fixtures()
	author := UserFrom(u)
	member := MemberFrom(m, nil, time.Now())
	ref := MessageFrom(sm, author, nil, nil, nil)
	sm2 := sm
	sm2.ID++
	sm2.ReferenceID = sm.ID
	sm2.Type = MessageReply
	sm2.EditedAt = time.Date(2024, 5, 2, 0, 0, 0, 0, time.UTC)
	msg := MessageFrom(sm2, author, &member, []User{author}, &ref)
	raw, err := json.Marshal(msg)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"id":"`, `"nonce":42`, `"embeds":[]`, `"components":[]`, `"attachments":[]`, `"mention_roles":[]`, `"public_flags":0`, `"discriminator":"0"`, `"avatar":null`} {
		if !strings.Contains(string(raw), want) {
			t.Errorf("message JSON lacks %s: %s", want, raw)
		}
	}
	if n := len(tsRE.FindAll(raw, -1)); n < 4 {
		t.Errorf("%d timestamps in Discord's format, want ≥ 4: %s", n, raw)
	}
	var dm discordgo.Message
	if err := json.Unmarshal(raw, &dm); err != nil {
		t.Fatalf("discordgo cannot decode the message: %v", err)
	}
	if dm.ID != sm2.ID.String() || dm.Author.ID != u.ID.String() || dm.Content != "hello" || dm.Type != discordgo.MessageTypeReply ||
		dm.MessageReference.MessageID != sm.ID.String() || dm.ReferencedMessage.ID != sm.ID.String() || dm.EditedTimestamp == nil ||
		!dm.Timestamp.Equal(sm2.ID.Time()) || len(dm.Mentions) != 1 || dm.Member == nil || len(dm.Member.Roles) != 1 {
		t.Fatalf("discordgo message = %+v", dm)
	}
	_ = r
	_ = c
}

func TestGuildCreateDecodesInDiscordgo(t *testing.T) {
	u, m, r, c, _ := fixtures()
	everyone := store.Role{ID: m.GuildID, GuildID: m.GuildID, Name: "@everyone", Permissions: 104324673}
	g := store.Guild{ID: m.GuildID, Name: "HQ", OwnerID: u.ID}
	user := UserFrom(u)
	gc := GuildCreate{
		Guild: GuildFrom(g, []store.Role{everyone, r}), JoinedAt: Timestamp(m.JoinedAt), MemberCount: 1,
		Members: []Member{MemberFrom(m, &user, time.Now())}, Channels: []Channel{ChannelFrom(c, nil)},
		VoiceStates: []any{}, Threads: []any{}, Presences: []any{}, StageInstances: []any{}, GuildScheduledEvents: []any{}, SoundboardSounds: []any{},
	}
	raw, err := json.Marshal(gc)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(raw), "null,\"members\"") || !strings.Contains(string(raw), `"permissions":"1099511627776"`) || !strings.Contains(string(raw), `"deny":"4503599627370496"`) {
		t.Fatalf("guild JSON: %s", raw)
	}
	var dg discordgo.Guild
	if err := json.Unmarshal(raw, &dg); err != nil {
		t.Fatalf("discordgo cannot decode GUILD_CREATE: %v", err)
	}
	if dg.ID != g.ID.String() || len(dg.Roles) != 2 || dg.Roles[0].ID != g.ID.String() || dg.Roles[1].Permissions != 1<<40 ||
		len(dg.Channels) != 1 || dg.Channels[0].PermissionOverwrites[0].Allow != 1024 || dg.Channels[0].RateLimitPerUser != 5 ||
		len(dg.Members) != 1 || dg.Members[0].User.ID != u.ID.String() || dg.OwnerID != u.ID.String() {
		t.Fatalf("discordgo guild = %+v", dg)
	}
}

func TestPrivateChannelShape(t *testing.T) {
	c := store.Channel{ID: 5, Type: store.ChannelDM, Recipients: []snowflake.ID{1, 2}}
	raw, _ := json.Marshal(ChannelFrom(c, nil))
	if strings.Contains(string(raw), "guild_id") || !strings.Contains(string(raw), `"recipients":[]`) {
		t.Fatalf("DM JSON: %s", raw)
	}
	var dc discordgo.Channel
	if err := json.Unmarshal(raw, &dc); err != nil || dc.Type != discordgo.ChannelTypeDM {
		t.Fatalf("discordgo DM: %+v %v", dc, err)
	}
}

func TestStripContent(t *testing.T) {
	_, _, _, _, sm := fixtures()
	sm.Attachments = []store.Attachment{{ID: 9, Filename: "a.png"}}
	m := MessageFrom(sm, User{ID: 1}, nil, nil, nil)
	s := StripContent(m)
	if s.Content != "" || len(s.Attachments) != 0 || s.Attachments == nil || s.Embeds == nil || m.Content != "hello" || len(m.Attachments) != 1 {
		t.Fatalf("stripped %+v from %+v", s, m)
	}
}

func TestTimestampRoundTrip(t *testing.T) {
	ts := Timestamp(time.Date(2024, 5, 1, 12, 0, 0, 0, time.FixedZone("x", 3600)))
	raw, _ := json.Marshal(ts)
	if string(raw) != `"2024-05-01T11:00:00.000000+00:00"` {
		t.Fatalf("timestamp = %s", raw)
	}
	var back Timestamp
	if err := json.Unmarshal(raw, &back); err != nil || !back.Time().Equal(ts.Time()) {
		t.Fatalf("round trip: %v %v", back, err)
	}
}

// TestThreadShape checks that a thread is written as Discord writes one:
// the thread fields, none of a guild channel's own, and that discordgo
// decodes it as a thread; a text channel keeps every guild field.
func TestThreadShape(t *testing.T) {
	_, _, _, parent, _ := fixtures()
	parent.Topic = "the parent's topic"
	created := time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)
	th := store.Channel{ID: 41771983423143940, GuildID: parent.GuildID, Type: store.ChannelPublicThread, Name: "a post",
		ParentID: parent.ID, OwnerID: 175928847299117063, LastMessageID: 41771983423143940, RateLimitPerUser: 3, NSFW: true,
		Position: 4, Overwrites: []store.Overwrite{},
		Thread: &store.ThreadMeta{AutoArchiveDuration: 1440, ArchiveTimestamp: created, CreatedAt: created, MessageCount: 2, MemberCount: 1,
			AppliedTags: []snowflake.ID{7}}}
	c := ChannelFrom(th, nil)
	tm := ThreadMember{ID: th.ID, UserID: th.OwnerID, JoinTimestamp: Timestamp(created)}
	c.Member = &tm
	raw, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]json.RawMessage
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"position", "topic", "permission_overwrites", "nsfw", "user_limit", "bitrate", "rtc_region", "available_tags"} {
		if _, ok := got[k]; ok {
			t.Errorf("thread JSON has the guild channel field %q: %s", k, raw)
		}
	}
	want := map[string]string{
		"id": `"41771983423143940"`, "type": "11", "guild_id": `"41771983423143937"`, "name": `"a post"`,
		"parent_id": `"41771983423143939"`, "owner_id": `"175928847299117063"`, "last_message_id": `"41771983423143940"`,
		"rate_limit_per_user": "3", "flags": "0", "message_count": "2", "total_message_sent": "2", "member_count": "1",
		"applied_tags": `["7"]`,
	}
	for k, v := range want {
		if string(got[k]) != v {
			t.Errorf("thread %s = %s, want %s", k, got[k], v)
		}
	}
	if !strings.Contains(string(got["thread_metadata"]), `"archived":false`) || !strings.Contains(string(got["member"]), `"user_id":"175928847299117063"`) {
		t.Errorf("thread_metadata / member: %s", raw)
	}
	var dc discordgo.Channel
	if err := json.Unmarshal(raw, &dc); err != nil || !dc.IsThread() || dc.ParentID != parent.ID.String() || dc.ThreadMetadata == nil || dc.MemberCount != 1 {
		t.Fatalf("discordgo thread: %+v %v", dc, err)
	}
	// A text channel is unchanged: every guild field is there.
	raw, _ = json.Marshal(ChannelFrom(parent, nil))
	for _, k := range []string{`"position":0`, `"topic":"the parent's topic"`, `"permission_overwrites":[{`, `"nsfw":false`} {
		if !strings.Contains(string(raw), k) {
			t.Errorf("text channel JSON lacks %s: %s", k, raw)
		}
	}
	if strings.Contains(string(raw), "thread_metadata") {
		t.Errorf("text channel JSON has thread fields: %s", raw)
	}
}
