package guild

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/concord-chat/concord/runtime/adapters/store"
	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/event"
	"github.com/concord-chat/concord/runtime/domain/permissions"
	"github.com/concord-chat/concord/runtime/domain/wire"
)

var bg = context.Background()

// send runs the API's send path: CreateMessage checks, mints, writes and
// publishes in one step of the actor.
func (f *fixture) send(u store.User, channelID snowflake.ID, content string, mentions ...snowflake.ID) wire.Message {
	f.t.Helper()
	w, err := f.svc.Messages.Create(bg, MessageWrite{Check: CheckSend, UserID: u.ID,
		Message: store.Message{ChannelID: channelID, AuthorID: u.ID, Content: content}, Mentions: &Mentions{Users: mentions},
		Render: func(_ context.Context, w Written) (wire.Message, error) {
			var mentioned []wire.User
			for _, id := range w.Message.Mentions {
				mentioned = append(mentioned, must[wire.User](f.t)(f.svc.User(bg, id)))
			}
			return wire.MessageFrom(w.Message, wire.UserFrom(u), w.Member, mentioned, nil), nil
		}})
	if err != nil {
		f.t.Fatalf("send by %s in %d: %v", u.Username, channelID, err)
	}
	return w.Wire
}

// publish writes and publishes a message the caller authorised (g), in
// two steps: tests that place a message between a grant and its fan-out.
func (f *fixture) publish(u store.User, g SendGrant, content string) wire.Message {
	f.t.Helper()
	id, err := f.ids.Next()
	if err != nil {
		f.t.Fatal(err)
	}
	m := store.Message{ID: id, ChannelID: g.Channel.ID, GuildID: g.GuildID, AuthorID: u.ID, Content: content, Mentions: g.Users, MentionRoles: g.Roles}
	if err := f.store.PutMessage(bg, m); err != nil {
		f.t.Fatal(err)
	}
	var mentioned []wire.User
	for _, id := range g.Users {
		mentioned = append(mentioned, must[wire.User](f.t)(f.svc.User(bg, id)))
	}
	wm := wire.MessageFrom(m, wire.UserFrom(u), g.Member, mentioned, nil)
	if err := f.svc.Messages.Publish(bg, "MESSAGE_CREATE", wm); err != nil {
		f.t.Fatal(err)
	}
	return wm
}

// messages returns the MESSAGE_CREATE payloads a session got.
func messages(t *testing.T, ds []delivered) []wire.Message {
	t.Helper()
	var out []wire.Message
	for _, d := range ds {
		if d.Type == "MESSAGE_CREATE" {
			var m wire.Message
			if err := json.Unmarshal(d.Payload, &m); err != nil {
				t.Fatal(err)
			}
			out = append(out, m)
		}
	}
	return out
}

func channelIDOf(t *testing.T, d delivered) snowflake.ID {
	t.Helper()
	var c struct {
		ID snowflake.ID `json:"id"`
	}
	if err := json.Unmarshal(d.Payload, &c); err != nil {
		t.Fatal(err)
	}
	return c.ID
}

// secretGuild builds: owner, member with role "vip", channel "secret"
// visible only to vip (@everyone deny VIEW_CHANNEL, vip allow).
type secretGuild struct {
	owner, member store.User
	guild         GuildInfo
	general       store.Channel
	secret        store.Channel
	vip           store.Role
}

func (f *fixture) secretGuild() secretGuild {
	f.t.Helper()
	var g secretGuild
	g.owner = f.user("owner", false)
	g.member = f.user("member", false)
	g.guild = must[GuildInfo](f.t)(f.svc.CreateGuild(bg, g.owner.ID, "test guild"))
	gid := g.guild.Guild.ID
	chans := must[[]store.Channel](f.t)(f.svc.Channels.List(bg, g.owner.ID, gid))
	g.general = chans[0]
	name := "vip"
	g.vip = must[store.Role](f.t)(f.svc.Roles.Create(bg, g.owner.ID, gid, RoleSpec{Name: &name}))
	g.secret = must[store.Channel](f.t)(f.svc.Channels.Create(bg, g.owner.ID, gid, ChannelSpec{
		Name: "secret", Type: store.ChannelText,
		Overwrites: []store.Overwrite{
			{ID: gid, Type: store.OverwriteRole, Deny: uint64(permissions.ViewChannel)},
			{ID: g.vip.ID, Type: store.OverwriteRole, Allow: uint64(permissions.ViewChannel)},
		},
	}))
	if _, _, err := f.svc.Members.Add(bg, gid, g.member.ID); err != nil {
		f.t.Fatal(err)
	}
	return g
}

func TestCreateGuildDefaults(t *testing.T) {
	f := newFixture(t)
	g := f.secretGuild()
	gid := g.guild.Guild.ID
	roles := must[[]store.Role](t)(f.svc.Roles.List(bg, g.owner.ID, gid))
	if roles[0].ID != gid || roles[0].Name != "@everyone" || roles[0].Permissions != uint64(permissions.DefaultEveryone) {
		t.Fatalf("@everyone role = %+v", roles[0])
	}
	if g.general.Name != "general" || g.general.Type != store.ChannelText {
		t.Fatalf("default channel = %+v", g.general)
	}
	if g.guild.Guild.OwnerID != g.owner.ID {
		t.Fatalf("owner = %d", g.guild.Guild.OwnerID)
	}
	// The member without vip does not see the secret channel.
	chans := must[[]store.Channel](t)(f.svc.Channels.List(bg, g.member.ID, gid))
	if len(chans) != 1 || chans[0].ID != g.general.ID {
		t.Fatalf("member sees %v", chans)
	}
	if _, err := f.svc.Authorize(bg, g.member.ID, g.secret.ID, 0); !errors.Is(err, ErrMissingAccess) {
		t.Fatalf("hidden channel authorize: %v", err)
	}
	if _, err := f.svc.Messages.AuthorizeSend(bg, SendRequest{UserID: g.member.ID, ChannelID: g.secret.ID}); !errors.Is(err, ErrMissingAccess) {
		t.Fatalf("hidden channel send: %v", err)
	}
}

func TestRoleRemovalDeletesChannelBeforeNextMessage(t *testing.T) {
	f := newFixture(t)
	g := f.secretGuild()
	gid := g.guild.Guild.ID
	if err := f.svc.Members.AddRole(bg, g.owner.ID, gid, g.member.ID, g.vip.ID); err != nil {
		t.Fatal(err)
	}
	s := f.session(g.member, "a1", 0, 1)
	// GUILD_CREATE lists the secret channel now.
	var gc wire.GuildCreate
	if err := json.Unmarshal(f.sink.of(s.ID)[0].Payload, &gc); err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(gc.Channels, func(c wire.Channel) bool { return c.ID == g.secret.ID }) {
		t.Fatalf("GUILD_CREATE channels %v lack secret", gc.Channels)
	}
	m1 := f.send(g.owner, g.secret.ID, "before")
	if err := f.svc.Members.RemoveRole(bg, g.owner.ID, gid, g.member.ID, g.vip.ID); err != nil {
		t.Fatal(err)
	}
	m2 := f.send(g.owner, g.secret.ID, "after, hidden")
	m3 := f.send(g.owner, g.general.ID, "after, visible")
	ds := f.sink.waitFor(t, s.ID, "third message", func(ds []delivered) bool {
		return slices.ContainsFunc(messages(t, ds), func(m wire.Message) bool { return m.ID == m3.ID })
	})
	var order []string
	for _, d := range ds {
		switch d.Type {
		case "MESSAGE_CREATE":
			order = append(order, "msg:"+messages(t, []delivered{d})[0].Content)
		case "CHANNEL_DELETE":
			order = append(order, fmt.Sprintf("delete:%v", channelIDOf(t, d) == g.secret.ID))
		}
	}
	want := []string{"msg:before", "delete:true", "msg:after, visible"}
	if !reflect.DeepEqual(order, want) {
		t.Fatalf("order = %v, want %v", order, want)
	}
	_ = m1
	_ = m2
}

func TestRoleGrantCreatesChannel(t *testing.T) {
	f := newFixture(t)
	g := f.secretGuild()
	s := f.session(g.member, "b1", 0, 1)
	if err := f.svc.Members.AddRole(bg, g.owner.ID, g.guild.Guild.ID, g.member.ID, g.vip.ID); err != nil {
		t.Fatal(err)
	}
	f.send(g.owner, g.secret.ID, "now visible")
	ds := f.sink.waitFor(t, s.ID, "message", func(ds []delivered) bool { return count(ds, "MESSAGE_CREATE") == 1 })
	ci := slices.IndexFunc(ds, func(d delivered) bool { return d.Type == "CHANNEL_CREATE" && channelIDOf(t, d) == g.secret.ID })
	mi := slices.IndexFunc(ds, func(d delivered) bool { return d.Type == "MESSAGE_CREATE" })
	if ci < 0 || ci > mi {
		t.Fatalf("CHANNEL_CREATE at %d, message at %d: %v", ci, mi, types(ds))
	}
}

func TestMessageContentIntentAndIntents(t *testing.T) {
	f := newFixture(t)
	g := f.secretGuild()
	gid := g.guild.Guild.ID
	plain := f.user("plainbot", true)
	content := f.user("contentbot", true)
	mentioned := f.user("mentionedbot", true)
	deaf := f.user("deafbot", true)
	for _, b := range []store.User{plain, content, mentioned, deaf} {
		if _, _, err := f.svc.Members.Add(bg, gid, b.ID); err != nil {
			t.Fatal(err)
		}
	}
	sPlain := f.session(plain, "p1", IntentGuilds|IntentGuildMessages, 1)
	sContent := f.session(content, "c1", IntentGuilds|IntentGuildMessages|IntentMessageContent, 1)
	sMentioned := f.session(mentioned, "m1", IntentGuilds|IntentGuildMessages, 1)
	sDeaf := f.session(deaf, "d1", IntentGuilds, 1)
	sUser := f.session(g.member, "u1", 0, 1) // a user account: intents do not apply

	f.send(g.owner, g.general.ID, "hello <@bot>", mentioned.ID)
	// The plain bot's own message keeps its content.
	own, err := f.svc.Messages.AuthorizeSend(bg, SendRequest{UserID: plain.ID, ChannelID: g.general.ID})
	if err != nil {
		t.Fatal(err)
	}
	f.publish(plain, own, "my own words")
	// A marker message tells us every earlier delivery happened.
	f.send(g.owner, g.general.ID, "marker")

	wantContent := map[event.SessionID][]string{
		sPlain.ID:     {"", "my own words", ""},
		sContent.ID:   {"hello <@bot>", "my own words", "marker"},
		sMentioned.ID: {"hello <@bot>", "", ""},
		sUser.ID:      {"hello <@bot>", "my own words", "marker"},
	}
	for id, want := range wantContent {
		ds := f.sink.waitFor(t, id, "three messages", func(ds []delivered) bool { return count(ds, "MESSAGE_CREATE") == 3 })
		var got []string
		for _, m := range messages(t, ds) {
			got = append(got, m.Content)
			if m.Embeds == nil || m.Attachments == nil || m.Components == nil || m.Mentions == nil {
				t.Fatalf("null arrays in %+v", m)
			}
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("session %s contents = %q, want %q", id, got, want)
		}
	}
	// The bot without GUILD_MESSAGES got none (the marker reached everyone else).
	if n := count(f.sink.of(sDeaf.ID), "MESSAGE_CREATE"); n != 0 {
		t.Fatalf("bot without GUILD_MESSAGES got %d messages", n)
	}
	// Variants are serialised once per batch: one batch per node, at most two payloads.
	f.sink.mu.Lock()
	defer f.sink.mu.Unlock()
	for _, b := range f.sink.batches {
		if b.Type == "MESSAGE_CREATE" && len(b.Payloads) > 2 {
			t.Fatalf("batch with %d payloads", len(b.Payloads))
		}
	}
}

func TestHiddenChannelNeverDelivered(t *testing.T) {
	f := newFixture(t)
	g := f.secretGuild()
	s := f.session(g.member, "h1", 0, 1)
	var gc wire.GuildCreate
	if err := json.Unmarshal(f.sink.of(s.ID)[0].Payload, &gc); err != nil {
		t.Fatal(err)
	}
	if len(gc.Channels) != 1 || gc.Channels[0].ID != g.general.ID {
		t.Fatalf("GUILD_CREATE channels = %+v", gc.Channels)
	}
	if gc.MemberCount != 2 || len(gc.Members) != 2 || gc.Large {
		t.Fatalf("GUILD_CREATE members: count %d, %d listed, large %v", gc.MemberCount, len(gc.Members), gc.Large)
	}
	f.send(g.owner, g.secret.ID, "secret stuff")
	if err := f.svc.Messages.Typing(bg, g.owner.ID, g.secret.ID); err != nil {
		t.Fatal(err)
	}
	// A mention of the member in the hidden channel does not make it a
	// mention: the member cannot see it.
	grant, err := f.svc.Messages.AuthorizeSend(bg, SendRequest{UserID: g.owner.ID, ChannelID: g.secret.ID, Users: []snowflake.ID{g.member.ID}})
	if err != nil {
		t.Fatal(err)
	}
	if len(grant.Users) != 0 {
		t.Fatalf("mention of a user who cannot see the channel kept: %v", grant.Users)
	}
	f.send(g.owner, g.general.ID, "marker")
	ds := f.sink.waitFor(t, s.ID, "marker", func(ds []delivered) bool { return count(ds, "MESSAGE_CREATE") >= 1 })
	for _, d := range ds {
		if strings.Contains(string(d.Payload), "secret stuff") || d.Type == "TYPING_START" {
			t.Fatalf("hidden channel leaked: %s %s", d.Type, d.Payload)
		}
	}
}

func TestSlowmodeAndMentionEveryone(t *testing.T) {
	f := newFixture(t)
	g := f.secretGuild()
	gid := g.guild.Guild.ID
	// Discord's default @everyone may mention everyone; take it away.
	everyone := uint64(permissions.DefaultEveryone &^ permissions.MentionEveryone)
	if _, err := f.svc.Roles.Modify(bg, g.owner.ID, gid, gid, RoleSpec{Permissions: &everyone}); err != nil {
		t.Fatal(err)
	}
	rate := 10
	if _, err := f.svc.Channels.Modify(bg, g.owner.ID, g.general.ID, ChannelPatch{RateLimitPerUser: &rate}); err != nil {
		t.Fatal(err)
	}
	req := SendRequest{UserID: g.member.ID, ChannelID: g.general.ID, MentionsEveryone: true}
	grant, err := f.svc.Messages.AuthorizeSend(bg, req)
	if err != nil {
		t.Fatal(err)
	}
	if grant.MentionEveryone {
		t.Fatal("@everyone granted without MENTION_EVERYONE")
	}
	f.clock.Advance(4 * time.Second)
	_, err = f.svc.Messages.AuthorizeSend(bg, req)
	var se *SlowmodeError
	if !errors.As(err, &se) || !errors.Is(err, ErrSlowmode) || se.RetryAfter != 6*time.Second {
		t.Fatalf("second send: %v", err)
	}
	f.clock.Advance(6 * time.Second)
	if _, err := f.svc.Messages.AuthorizeSend(bg, req); err != nil {
		t.Fatalf("send after slowmode: %v", err)
	}
	// The owner bypasses slowmode and may mention everyone.
	own := SendRequest{UserID: g.owner.ID, ChannelID: g.general.ID, MentionsEveryone: true}
	for i := 0; i < 3; i++ {
		grant, err := f.svc.Messages.AuthorizeSend(bg, own)
		if err != nil || !grant.MentionEveryone {
			t.Fatalf("owner send %d: %+v %v", i, grant, err)
		}
	}
	// BYPASS_SLOWMODE on a role lets the member through too.
	bits := uint64(permissions.BypassSlowmode)
	if _, err := f.svc.Roles.Modify(bg, g.owner.ID, gid, g.vip.ID, RoleSpec{Permissions: &bits}); err != nil {
		t.Fatal(err)
	}
	if err := f.svc.Members.AddRole(bg, g.owner.ID, gid, g.member.ID, g.vip.ID); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		if _, err := f.svc.Messages.AuthorizeSend(bg, req); err != nil {
			t.Fatalf("bypass send %d: %v", i, err)
		}
	}
}

func TestHierarchyAndKick(t *testing.T) {
	f := newFixture(t)
	g := f.secretGuild()
	gid := g.guild.Guild.ID
	mod := f.user("mod", false)
	if _, _, err := f.svc.Members.Add(bg, gid, mod.ID); err != nil {
		t.Fatal(err)
	}
	name := "mods"
	bits := uint64(permissions.ManageRoles | permissions.KickMembers | permissions.ViewChannel | permissions.SendMessages)
	mods := must[store.Role](t)(f.svc.Roles.Create(bg, g.owner.ID, gid, RoleSpec{Name: &name, Permissions: &bits}))
	if err := f.svc.Members.AddRole(bg, g.owner.ID, gid, mod.ID, mods.ID); err != nil {
		t.Fatal(err)
	}
	// mods was created after vip, so it sits at position 1 and vip at 2.
	if err := f.svc.Members.AddRole(bg, mod.ID, gid, g.member.ID, g.vip.ID); !errors.Is(err, ErrMissingPermissions) {
		t.Fatalf("assigning a higher role: %v", err)
	}
	if err := f.svc.Members.Remove(bg, mod.ID, gid, g.owner.ID); !errors.Is(err, ErrMissingPermissions) {
		t.Fatalf("kicking the owner: %v", err)
	}
	if err := f.svc.Members.Remove(bg, g.member.ID, gid, mod.ID); !errors.Is(err, ErrMissingPermissions) {
		t.Fatalf("kick without KICK_MEMBERS: %v", err)
	}
	s := f.session(g.member, "k1", 0, 1)
	if err := f.svc.Members.Remove(bg, mod.ID, gid, g.member.ID); err != nil {
		t.Fatal(err)
	}
	f.send(g.owner, g.general.ID, "after kick")
	ds := f.sink.waitFor(t, s.ID, "GUILD_DELETE", func(ds []delivered) bool { return count(ds, "GUILD_DELETE") == 1 })
	if ds[len(ds)-1].Type != "GUILD_DELETE" {
		t.Fatalf("events after GUILD_DELETE: %v", types(ds))
	}
	// The owner's session saw nothing yet; after another message the kicked one still gets nothing.
	so := f.session(g.owner, "o1", 0, 1)
	f.send(g.owner, g.general.ID, "marker")
	f.sink.waitFor(t, so.ID, "marker", func(ds []delivered) bool { return count(ds, "MESSAGE_CREATE") == 1 })
	if got := f.sink.of(s.ID); got[len(got)-1].Type != "GUILD_DELETE" {
		t.Fatalf("kicked session got %v", types(got))
	}
	if _, err := f.svc.Members.Get(bg, g.owner.ID, gid, g.member.ID); !errors.Is(err, ErrUnknownMember) {
		t.Fatalf("kicked member still there: %v", err)
	}
}

// snapshot captures an actor's state in the actor goroutine.
type snapshot struct {
	Guild    store.Guild
	Channels map[snowflake.ID]store.Channel
	Roles    map[snowflake.ID]store.Role
	Members  map[snowflake.ID]store.Member
}

func takeSnapshot(t *testing.T, svc *Service, gid snowflake.ID) snapshot {
	t.Helper()
	var s snapshot
	err := svc.do(bg, gid, func(a *Actor) error {
		s.Guild = a.guild
		s.Channels = map[snowflake.ID]store.Channel{}
		for id, c := range a.channels {
			cc := cloneChannel(*c)
			if len(cc.Overwrites) == 0 {
				cc.Overwrites = nil
			}
			if len(cc.Recipients) == 0 {
				cc.Recipients = nil
			}
			s.Channels[id] = cc
		}
		s.Roles = map[snowflake.ID]store.Role{}
		for id, r := range a.roles {
			s.Roles[id] = *r
		}
		s.Members = map[snowflake.ID]store.Member{}
		for id, m := range a.members {
			mm := *m
			if len(mm.Roles) == 0 {
				mm.Roles = nil
			}
			mm.JoinedAt = mm.JoinedAt.Round(time.Millisecond).UTC()
			mm.CommunicationDisabledUntil = mm.CommunicationDisabledUntil.Round(time.Millisecond).UTC()
			s.Members[id] = mm
		}
		s.Guild.CreatedAt = s.Guild.CreatedAt.Round(time.Millisecond).UTC()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestWriteThroughReloadEqualsMemory(t *testing.T) {
	f := newFixture(t)
	g := f.secretGuild()
	gid := g.guild.Guild.ID
	if err := f.svc.Members.AddRole(bg, g.owner.ID, gid, g.member.ID, g.vip.ID); err != nil {
		t.Fatal(err)
	}
	until := f.clock.Now().Add(time.Hour)
	nick := "nicky"
	if _, err := f.svc.Members.Modify(bg, g.owner.ID, gid, g.member.ID, MemberPatch{Nick: &nick, CommunicationDisabledUntil: &until}); err != nil {
		t.Fatal(err)
	}
	topic := "a topic"
	if _, err := f.svc.Channels.Modify(bg, g.owner.ID, g.general.ID, ChannelPatch{Topic: &topic}); err != nil {
		t.Fatal(err)
	}
	if err := f.svc.Channels.PutOverwrite(bg, g.owner.ID, g.general.ID, store.Overwrite{ID: g.member.ID, Type: store.OverwriteMember, Deny: uint64(permissions.AddReactions)}); err != nil {
		t.Fatal(err)
	}
	cat := must[store.Channel](t)(f.svc.Channels.Create(bg, g.owner.ID, gid, ChannelSpec{Name: "cat", Type: store.ChannelCategory}))
	must[store.Channel](t)(f.svc.Channels.Create(bg, g.owner.ID, gid, ChannelSpec{Name: "voice", Type: store.ChannelVoice, ParentID: cat.ID}))
	desc := "described"
	if _, err := f.svc.ModifyGuild(bg, g.owner.ID, gid, GuildPatch{Description: &desc}); err != nil {
		t.Fatal(err)
	}
	last := f.send(g.owner, g.general.ID, "last message")
	name := "temp"
	temp := must[store.Role](t)(f.svc.Roles.Create(bg, g.owner.ID, gid, RoleSpec{Name: &name}))
	if err := f.svc.Roles.Delete(bg, g.owner.ID, gid, temp.ID); err != nil {
		t.Fatal(err)
	}

	before := takeSnapshot(t, f.svc, gid)
	if before.Channels[g.general.ID].LastMessageID != last.ID {
		t.Fatalf("last_message_id = %d, want %d", before.Channels[g.general.ID].LastMessageID, last.ID)
	}
	f.svc.Close()
	fresh := f.newService(Config{})
	after := takeSnapshot(t, fresh, gid)
	if !reflect.DeepEqual(before, after) {
		t.Fatalf("reloaded state differs:\nmemory: %+v\nstore:  %+v", before, after)
	}
}

func TestEventOrderUnderConcurrentSenders(t *testing.T) {
	f := newFixture(t)
	g := f.secretGuild()
	gid := g.guild.Guild.ID
	const senders, each = 4, 25
	users := make([]store.User, senders)
	for i := range users {
		users[i] = f.user(fmt.Sprintf("sender%d", i), false)
		if _, _, err := f.svc.Members.Add(bg, gid, users[i].ID); err != nil {
			t.Fatal(err)
		}
	}
	s1 := f.session(g.owner, "x1", 0, 1)
	s2 := f.session(g.member, "y2", 0, 1)
	var wg sync.WaitGroup
	for i, u := range users {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < each; j++ {
				grant, err := f.svc.Messages.AuthorizeSend(bg, SendRequest{UserID: u.ID, ChannelID: g.general.ID})
				if err != nil {
					t.Error(err)
					return
				}
				f.publish(u, grant, fmt.Sprintf("%d:%d", i, j))
			}
		}()
	}
	// A concurrent permission change rides the same stream.
	if err := f.svc.Members.AddRole(bg, g.owner.ID, gid, g.member.ID, g.vip.ID); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	all := func(ds []delivered) bool { return count(ds, "MESSAGE_CREATE") == senders*each }
	d1 := f.sink.waitFor(t, s1.ID, "all messages", all)
	d2 := f.sink.waitFor(t, s2.ID, "all messages", all)
	c1, c2 := contents(t, d1), contents(t, d2)
	if !reflect.DeepEqual(c1, c2) {
		t.Fatal("two sessions saw different orders")
	}
	next := make([]int, senders)
	for _, c := range c1 {
		var i, j int
		fmt.Sscanf(c, "%d:%d", &i, &j)
		if j != next[i] {
			t.Fatalf("sender %d: got %d, want %d", i, j, next[i])
		}
		next[i]++
	}
}

func contents(t *testing.T, ds []delivered) []string {
	var out []string
	for _, m := range messages(t, ds) {
		out = append(out, m.Content)
	}
	return out
}

func TestIdleActorUnloadsAndReloads(t *testing.T) {
	f := newFixture(t)
	f.svc.Close()
	f.svc = f.newService(Config{IdleTimeout: 20 * time.Millisecond})
	g := f.secretGuild()
	gid := g.guild.Guild.ID
	deadline := time.Now().Add(5 * time.Second)
	for slices.Contains(f.svc.LoadedGuilds(), gid) {
		if time.Now().After(deadline) {
			t.Fatal("idle actor was not unloaded")
		}
		time.Sleep(5 * time.Millisecond)
	}
	// The next call reloads it from the store.
	chans := must[[]store.Channel](t)(f.svc.Channels.List(bg, g.owner.ID, gid))
	if len(chans) != 2 {
		t.Fatalf("after reload: %d channels", len(chans))
	}
	// A guild with a session stays loaded.
	f.session(g.member, "z1", 0, 1)
	time.Sleep(100 * time.Millisecond)
	if !slices.Contains(f.svc.LoadedGuilds(), gid) {
		t.Fatal("actor with a session was unloaded")
	}
}

func TestPrivateChannelRouting(t *testing.T) {
	f := newFixture(t)
	a := f.user("alice", false)
	b := f.user("bob", false)
	bot := f.user("dmbot", true)
	deafBot := f.user("deafbot", true)
	// DMs need a shared guild (50007 otherwise).
	shared := must[GuildInfo](t)(f.svc.CreateGuild(bg, a.ID, "shared"))
	for _, u := range []store.User{b, bot, deafBot} {
		if _, _, err := f.svc.Members.Add(bg, shared.Guild.ID, u.ID); err != nil {
			t.Fatal(err)
		}
	}
	sa := f.session(a, "a9", 0, 0)
	sb := f.session(b, "b9", 0, 0)
	sBot := f.session(bot, "c9", IntentDirectMessages, 0)
	sDeaf := f.session(deafBot, "d9", IntentGuildMessages, 0)
	dm := must[store.Channel](t)(f.svc.Private.CreateDM(bg, a.ID, b.ID))
	again := must[store.Channel](t)(f.svc.Private.CreateDM(bg, b.ID, a.ID))
	if again.ID != dm.ID {
		t.Fatalf("second CreateDM made a new channel %d != %d", again.ID, dm.ID)
	}
	f.sink.waitFor(t, sb.ID, "CHANNEL_CREATE", func(ds []delivered) bool { return count(ds, "CHANNEL_CREATE") == 1 })
	f.send(a, dm.ID, "hi bob")
	for _, s := range []event.Session{sa, sb} {
		ds := f.sink.waitFor(t, s.ID, "dm", func(ds []delivered) bool { return count(ds, "MESSAGE_CREATE") == 1 })
		if m := messages(t, ds)[0]; m.Content != "hi bob" || m.GuildID != 0 {
			t.Fatalf("dm = %+v", m)
		}
	}
	// A third user is no recipient.
	if _, err := f.svc.Messages.AuthorizeSend(bg, SendRequest{UserID: bot.ID, ChannelID: dm.ID}); !errors.Is(err, ErrMissingAccess) {
		t.Fatalf("non-recipient send: %v", err)
	}
	bdm := must[store.Channel](t)(f.svc.Private.CreateDM(bg, a.ID, bot.ID))
	ddm := must[store.Channel](t)(f.svc.Private.CreateDM(bg, a.ID, deafBot.ID))
	f.send(a, bdm.ID, "hi bot")
	f.send(a, ddm.ID, "hi deaf bot")
	ds := f.sink.waitFor(t, sBot.ID, "dm to bot", func(ds []delivered) bool { return count(ds, "MESSAGE_CREATE") == 1 })
	if m := messages(t, ds)[0]; m.Content != "hi bot" {
		t.Fatalf("bot dm content stripped or wrong: %q", m.Content)
	}
	f.sink.waitFor(t, sa.ID, "all dms", func(ds []delivered) bool { return count(ds, "MESSAGE_CREATE") == 3 })
	if n := count(f.sink.of(sDeaf.ID), "MESSAGE_CREATE") + count(f.sink.of(sDeaf.ID), "CHANNEL_CREATE"); n != 0 {
		t.Fatalf("bot without DIRECT_MESSAGES got %d dm events", n)
	}
}

func TestIdentify(t *testing.T) {
	f := newFixture(t)
	g := f.secretGuild()
	token := f.auth.Mint(g.member)
	r, err := f.svc.Identify(bg, token, event.Session{ID: "i1", Intents: IntentGuilds | IntentMessageContent})
	if err != nil {
		t.Fatal(err)
	}
	if r.UserID != g.member.ID || len(r.Guilds) != 1 || r.Guilds[0] != g.guild.Guild.ID || string(r.PrivateChannels) != "[]" {
		t.Fatalf("ready = %+v", r)
	}
	if _, err := f.svc.Identify(bg, token+"x", event.Session{ID: "i2"}); !errors.Is(err, ErrAuthenticationFailed) {
		t.Fatalf("bad token: %v", err)
	}
	if _, err := f.svc.Identify(bg, token, event.Session{ID: "i3", Intents: 1 << 30}); !errors.Is(err, ErrInvalidIntents) {
		t.Fatalf("bad intents: %v", err)
	}
	if _, err := f.svc.Identify(bg, token, event.Session{ID: "i4", ShardID: 2, ShardCount: 2}); !errors.Is(err, ErrInvalidShard) {
		t.Fatalf("bad shard: %v", err)
	}
	if err := f.auth.Revoke(bg, g.member.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.Identify(bg, token, event.Session{ID: "i5"}); !errors.Is(err, ErrAuthenticationFailed) {
		t.Fatalf("revoked token: %v", err)
	}
}

func TestJoinSubscribesNewMemberAndTellsOthers(t *testing.T) {
	f := newFixture(t)
	g := f.secretGuild()
	gid := g.guild.Guild.ID
	carol := f.user("carol", false)
	// carol is online before she joins: her session has no guild yet.
	sc := f.session(carol, "c7", 0, 0)
	watcher := f.user("watchbot", true)
	if _, _, err := f.svc.Members.Add(bg, gid, watcher.ID); err != nil {
		t.Fatal(err)
	}
	withMembers := f.session(watcher, "w7", IntentGuilds|IntentGuildMembers, 1)
	without := f.session(g.member, "v7", 0, 1)
	if _, added, err := f.svc.Members.Add(bg, gid, carol.ID); err != nil || !added {
		t.Fatalf("add carol: %v %v", added, err)
	}
	if _, added, _ := f.svc.Members.Add(bg, gid, carol.ID); added {
		t.Fatal("second join reported as new")
	}
	f.sink.waitFor(t, sc.ID, "GUILD_CREATE after joining", func(ds []delivered) bool { return count(ds, "GUILD_CREATE") == 1 })
	f.sink.waitFor(t, withMembers.ID, "GUILD_MEMBER_ADD", func(ds []delivered) bool { return count(ds, "GUILD_MEMBER_ADD") == 1 })
	// A user session gets member events whatever its intents.
	ds := f.sink.waitFor(t, without.ID, "GUILD_MEMBER_ADD", func(ds []delivered) bool { return count(ds, "GUILD_MEMBER_ADD") == 1 })
	var add wire.MemberEvent
	for _, d := range ds {
		if d.Type == "GUILD_MEMBER_ADD" {
			if err := json.Unmarshal(d.Payload, &add); err != nil {
				t.Fatal(err)
			}
		}
	}
	if add.GuildID != gid || add.User == nil || add.User.ID != carol.ID {
		t.Fatalf("GUILD_MEMBER_ADD = %+v", add)
	}
	// A bot without GUILD_MEMBERS gets none.
	bot2 := f.user("nomembers", true)
	f.svc.Members.Add(bg, gid, bot2.ID)
	s2 := f.session(bot2, "n7", IntentGuilds|IntentGuildMessages, 1)
	dave := f.user("dave", false)
	f.svc.Members.Add(bg, gid, dave.ID)
	f.send(g.owner, g.general.ID, "marker")
	ds = f.sink.waitFor(t, s2.ID, "marker", func(ds []delivered) bool { return count(ds, "MESSAGE_CREATE") == 1 })
	if n := count(ds, "GUILD_MEMBER_ADD"); n != 0 {
		t.Fatalf("bot without GUILD_MEMBERS got %d GUILD_MEMBER_ADD", n)
	}
}

func TestMailboxFullIsUnavailable(t *testing.T) {
	f := newFixture(t)
	f.svc.Close()
	f.svc = f.newService(Config{MailboxSize: 1})
	g := f.secretGuild()
	gid := g.guild.Guild.ID
	block := make(chan struct{})
	started := make(chan struct{})
	if err := f.svc.post(bg, gid, func(*Actor) { close(started); <-block }); err != nil {
		t.Fatal(err)
	}
	<-started
	if err := f.svc.post(bg, gid, func(*Actor) {}); err != nil {
		t.Fatal(err) // fills the one slot
	}
	ctx, cancel := context.WithTimeout(bg, 50*time.Millisecond)
	defer cancel()
	_, err := f.svc.Channels.List(ctx, g.owner.ID, gid)
	close(block)
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("full mailbox: %v", err)
	}
	// The actor recovers.
	if _, err := f.svc.Channels.List(bg, g.owner.ID, gid); err != nil {
		t.Fatal(err)
	}
}

func TestDeleteGuild(t *testing.T) {
	f := newFixture(t)
	g := f.secretGuild()
	gid := g.guild.Guild.ID
	s := f.session(g.member, "q1", 0, 1)
	if err := f.svc.DeleteGuild(bg, g.member.ID, gid); !errors.Is(err, ErrMissingPermissions) {
		t.Fatalf("non-owner delete: %v", err)
	}
	if err := f.svc.DeleteGuild(bg, g.owner.ID, gid); err != nil {
		t.Fatal(err)
	}
	f.sink.waitFor(t, s.ID, "GUILD_DELETE", func(ds []delivered) bool { return count(ds, "GUILD_DELETE") == 1 })
	if _, err := f.svc.GuildInfo(bg, g.owner.ID, gid); !errors.Is(err, ErrUnknownGuild) {
		t.Fatalf("deleted guild: %v", err)
	}
	if _, err := f.svc.Messages.AuthorizeSend(bg, SendRequest{UserID: g.owner.ID, ChannelID: g.general.ID}); !errors.Is(err, ErrUnknownChannel) {
		t.Fatalf("channel of deleted guild: %v", err)
	}
}
