package api

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/guild"
	"github.com/concord-chat/concord/runtime/domain/permissions"
	"github.com/concord-chat/concord/runtime/domain/wire"
)

type threadT struct {
	wire.Channel
	Member *wire.ThreadMember `json:"member"`
}

func (e *env) thread(token string, path string, body map[string]any) threadT {
	e.t.Helper()
	var th threadT
	r := e.ok("POST", path, token, body, &th)
	if r.Status != 201 {
		e.t.Fatalf("create thread: status %d", r.Status)
	}
	return th
}

func TestThreadFromMessage(t *testing.T) {
	e := newEnv(t)
	w := e.world()
	bobS := e.subscribe("bob", w.bob.ID, guild.IntentGuilds|guild.IntentGuildMessages|guild.IntentMessageContent)
	m := e.post(w.alice.Token, w.general, map[string]any{"content": "let's discuss"})
	path := fmt.Sprintf("%s/channels/%d/messages/%d/threads", v10, w.general, m.ID)
	th := e.thread(w.alice.Token, path, map[string]any{"name": "discussion", "auto_archive_duration": 60})
	if th.ID != m.ID || th.Type != 11 || th.ParentID == nil || *th.ParentID != w.general || th.ThreadMetadata == nil ||
		th.ThreadMetadata.AutoArchiveDuration != 60 || th.OwnerID != w.alice.ID || th.Member == nil || th.Member.UserID != w.alice.ID ||
		th.MemberCount == nil || *th.MemberCount != 1 {
		t.Fatalf("thread = %+v", th)
	}
	ev := e.waitEvent(bobS, "THREAD_CREATE", 1)
	var tc wire.Channel
	if json.Unmarshal(ev, &tc) != nil || tc.ID != th.ID || tc.ThreadMetadata == nil || !tc.NewlyCreated {
		t.Fatalf("THREAD_CREATE = %s", ev)
	}
	// The starter message is updated with HAS_THREAD and the thread.
	up := e.waitEvent(bobS, "MESSAGE_UPDATE", 1)
	var starter wire.Message
	if json.Unmarshal(up, &starter) != nil || starter.ID != m.ID || starter.Flags&messageFlagHasThread == 0 ||
		starter.Thread == nil || starter.Thread.ID != th.ID || starter.Thread.ThreadMetadata == nil {
		t.Fatalf("starter MESSAGE_UPDATE = %s", up)
	}
	e.ok("GET", fmt.Sprintf("%s/channels/%d/messages/%d", v10, w.general, m.ID), w.bob.Token, nil, &starter)
	if starter.Flags&messageFlagHasThread == 0 || starter.Thread == nil || starter.Thread.ID != th.ID || *starter.Thread.Name != "discussion" {
		t.Fatalf("starter message read back = %+v", starter)
	}
	// The thread opens with a THREAD_STARTER_MESSAGE (21) referencing the
	// starter message in the parent; it is not counted in message_count.
	ev = e.waitEvent(bobS, "MESSAGE_CREATE", 2)
	var first wire.Message
	if json.Unmarshal(ev, &first) != nil || first.ChannelID != th.ID || first.Type != wire.MessageThreadStarter ||
		first.MessageReference == nil || first.MessageReference.ChannelID != w.general || first.MessageReference.MessageID != m.ID ||
		first.ReferencedMessage == nil || first.ReferencedMessage.ID != m.ID || first.ReferencedMessage.Content != "let's discuss" {
		t.Fatalf("thread starter MESSAGE_CREATE = %s", ev)
	}
	e.fail("PATCH", fmt.Sprintf("%s/channels/%d/messages/%d", v10, th.ID, first.ID), w.alice.Token, map[string]any{"content": "x"}, 400, 50021)
	e.fail("DELETE", fmt.Sprintf("%s/channels/%d/messages/%d", v10, th.ID, first.ID), w.alice.Token, nil, 400, 50021)
	// Editing the starter message's flags keeps HAS_THREAD.
	var edited wire.Message
	e.ok("PATCH", fmt.Sprintf("%s/channels/%d/messages/%d", v10, w.general, m.ID), w.alice.Token, map[string]any{"flags": 4}, &edited)
	if edited.Flags != 4|messageFlagHasThread || edited.Thread == nil {
		t.Fatalf("starter after a flags edit = flags %d thread %v", edited.Flags, edited.Thread)
	}
	e.fail("POST", path, w.alice.Token, map[string]any{"name": "again"}, 400, 160004)
	e.fail("POST", path, w.alice.Token, map[string]any{}, 400, 50035)
	e.fail("POST", fmt.Sprintf("%s/channels/%d/messages/%d/threads", v10, w.general, 42), w.alice.Token, map[string]any{"name": "x"}, 404, 10008)
	e.fail("POST", fmt.Sprintf("%s/channels/%d/messages/%d/threads", v10, w.staff, 42), w.bob.Token, map[string]any{"name": "x"}, 403, 50001)
	m2 := e.post(w.alice.Token, w.general, map[string]any{"content": "x"})
	e.fail("POST", fmt.Sprintf("%s/channels/%d/messages/%d/threads", v10, w.general, m2.ID), w.alice.Token,
		map[string]any{"name": "x", "auto_archive_duration": 61}, 400, 50035)

	// Messages in the thread: bob sends (and so joins), everyone who sees
	// the parent reads it, through the ordinary routes.
	reply := e.post(w.bob.Token, th.ID, map[string]any{"content": "in the thread"})
	if reply.ChannelID != th.ID {
		t.Fatalf("thread message = %+v", reply)
	}
	ev = e.waitEvent(bobS, "MESSAGE_CREATE", 4)
	var mc wire.Message
	if json.Unmarshal(ev, &mc) != nil || mc.ChannelID != th.ID || mc.ID != reply.ID {
		t.Fatalf("thread MESSAGE_CREATE = %s", ev)
	}
	var page []wire.Message
	e.ok("GET", fmt.Sprintf("%s/channels/%d/messages", v10, th.ID), w.alice.Token, nil, &page)
	if len(page) != 2 || page[0].ID != reply.ID || page[1].ID != first.ID || page[1].Type != wire.MessageThreadStarter ||
		page[1].ReferencedMessage == nil || page[1].ReferencedMessage.ID != m.ID {
		t.Fatalf("thread history = %+v", page)
	}
	var tm wire.ThreadMember
	e.ok("GET", fmt.Sprintf("%s/channels/%d/thread-members/%d", v10, th.ID, w.bob.ID), w.alice.Token, nil, &tm)
	if tm.UserID != w.bob.ID || tm.ID != th.ID {
		t.Fatalf("bob joined by sending: %+v", tm)
	}
	var ch wire.Channel
	e.ok("GET", fmt.Sprintf("%s/channels/%d", v10, th.ID), w.bob.Token, nil, &ch)
	if ch.MessageCount == nil || *ch.MessageCount != 1 || *ch.MemberCount != 2 {
		t.Fatalf("thread counts = %+v", ch)
	}

	// The guild's channel list never lists threads; the active list does.
	var chans []wire.Channel
	e.ok("GET", fmt.Sprintf("%s/guilds/%d/channels", v10, w.guildID), w.alice.Token, nil, &chans)
	for _, c := range chans {
		if c.ID == th.ID {
			t.Fatal("thread in the channel list")
		}
	}
	var active struct {
		Threads []wire.Channel      `json:"threads"`
		Members []wire.ThreadMember `json:"members"`
	}
	e.ok("GET", fmt.Sprintf("%s/guilds/%d/threads/active", v10, w.guildID), w.bob.Token, nil, &active)
	if len(active.Threads) != 1 || active.Threads[0].ID != th.ID || len(active.Members) != 1 || active.Members[0].UserID != w.bob.ID {
		t.Fatalf("active = %+v", active)
	}
}

func TestThreadArchiveLock(t *testing.T) {
	e := newEnv(t)
	w := e.world()
	bobS := e.subscribe("bob", w.bob.ID, guild.IntentGuilds)
	th := e.thread(w.bob.Token, fmt.Sprintf("%s/channels/%d/threads", v10, w.general), map[string]any{"name": "bob's", "type": 11})
	tp := fmt.Sprintf("%s/channels/%d", v10, th.ID)
	// The creator archives; archived threads refuse edits but a send
	// unarchives them.
	var ch wire.Channel
	e.ok("PATCH", tp, w.bob.Token, map[string]any{"archived": true}, &ch)
	if !ch.ThreadMetadata.Archived {
		t.Fatalf("archived = %+v", ch.ThreadMetadata)
	}
	ev := e.waitEvent(bobS, "THREAD_UPDATE", 1)
	var tu wire.Channel
	if json.Unmarshal(ev, &tu) != nil || !tu.ThreadMetadata.Archived {
		t.Fatalf("THREAD_UPDATE = %s", ev)
	}
	e.fail("PATCH", tp, w.bob.Token, map[string]any{"name": "renamed"}, 400, 50083)
	e.fail("PUT", tp+"/thread-members/@me", w.alice.Token, nil, 400, 50083)
	var archived struct {
		Threads []wire.Channel `json:"threads"`
		HasMore bool           `json:"has_more"`
	}
	e.ok("GET", fmt.Sprintf("%s/channels/%d/threads/archived/public", v10, w.general), w.bob.Token, nil, &archived)
	if len(archived.Threads) != 1 || archived.Threads[0].ID != th.ID || archived.HasMore {
		t.Fatalf("archived = %+v", archived)
	}
	e.post(w.bob.Token, th.ID, map[string]any{"content": "wake up"})
	e.ok("GET", tp, w.bob.Token, nil, &ch)
	if ch.ThreadMetadata.Archived {
		t.Fatal("a send did not unarchive the thread")
	}
	// Locking is for MANAGE_THREADS; a locked thread takes messages only
	// from moderators, and a locked archived one is 50083.
	e.fail("PATCH", tp, w.bob.Token, map[string]any{"locked": true}, 403, 50013)
	e.ok("PATCH", tp, w.alice.Token, map[string]any{"locked": true, "archived": true}, &ch)
	if !ch.ThreadMetadata.Locked || !ch.ThreadMetadata.Archived {
		t.Fatalf("locked = %+v", ch.ThreadMetadata)
	}
	e.fail("POST", fmt.Sprintf("%s/channels/%d/messages", v10, th.ID), w.bob.Token, map[string]any{"content": "x"}, 400, 50083)
	e.fail("PATCH", tp, w.bob.Token, map[string]any{"archived": false}, 403, 50013)
	e.ok("PATCH", tp, w.alice.Token, map[string]any{"archived": false}, &ch)
	e.fail("POST", fmt.Sprintf("%s/channels/%d/messages", v10, th.ID), w.bob.Token, map[string]any{"content": "x"}, 400, 160005)
	e.post(w.alice.Token, th.ID, map[string]any{"content": "moderator"})
	e.fail("PATCH", tp, w.alice.Token, map[string]any{"auto_archive_duration": 5}, 400, 50035)
	// Somebody else's thread: only MANAGE_THREADS edits it.
	other := e.thread(w.alice.Token, fmt.Sprintf("%s/channels/%d/threads", v10, w.general), map[string]any{"name": "alice's", "type": 11})
	e.fail("PATCH", fmt.Sprintf("%s/channels/%d", v10, other.ID), w.bob.Token, map[string]any{"name": "mine"}, 403, 50013)
	// Delete needs MANAGE_THREADS.
	e.fail("DELETE", tp, w.bob.Token, nil, 403, 50013)
	e.ok("DELETE", tp, w.alice.Token, nil, &ch)
	e.waitEvent(bobS, "THREAD_DELETE", 1)
	e.fail("GET", tp, w.alice.Token, nil, 404, 10003)
}

func TestPrivateThreadVisibility(t *testing.T) {
	e := newEnv(t)
	w := e.world()
	carol := e.register("carol", false)
	e.ok("POST", v10+"/invites/"+w.inviteCode, carol.Token, map[string]any{}, nil)
	bobS := e.subscribe("bob", w.bob.ID, guild.IntentGuilds)
	carolS := e.subscribe("carol", carol.ID, guild.IntentGuilds)

	th := e.thread(w.bob.Token, fmt.Sprintf("%s/channels/%d/threads", v10, w.general), map[string]any{"name": "ticket", "invitable": false})
	if th.Type != 12 || th.ThreadMetadata.Invitable == nil || *th.ThreadMetadata.Invitable {
		t.Fatalf("private thread = %+v", th)
	}
	e.waitEvent(bobS, "THREAD_CREATE", 1)
	tp := fmt.Sprintf("%s/channels/%d", v10, th.ID)
	// Carol is not a member: the thread does not exist for her anywhere.
	e.fail("GET", tp, carol.Token, nil, 403, 50001)
	e.fail("GET", tp+"/messages", carol.Token, nil, 403, 50001)
	e.fail("POST", tp+"/messages", carol.Token, map[string]any{"content": "x"}, 403, 50001)
	e.fail("PUT", tp+"/thread-members/@me", carol.Token, nil, 403, 50001)
	var active struct {
		Threads []wire.Channel `json:"threads"`
	}
	e.ok("GET", fmt.Sprintf("%s/guilds/%d/threads/active", v10, w.guildID), carol.Token, nil, &active)
	if len(active.Threads) != 0 {
		t.Fatalf("carol sees %+v", active.Threads)
	}
	// The owner (MANAGE_THREADS) sees it.
	e.ok("GET", tp, w.alice.Token, nil, nil)
	// Not invitable: bob cannot add carol; a moderator can.
	e.fail("PUT", fmt.Sprintf("%s/thread-members/%d", tp, carol.ID), w.bob.Token, nil, 403, 50013)
	e.ok("PUT", fmt.Sprintf("%s/thread-members/%d", tp, carol.ID), w.alice.Token, nil, nil)
	ev := e.waitEvent(carolS, "THREAD_CREATE", 1)
	var tc wire.Channel
	if json.Unmarshal(ev, &tc) != nil || tc.ID != th.ID || tc.NewlyCreated {
		t.Fatalf("carol's THREAD_CREATE = %s", ev)
	}
	mu := e.waitEvent(carolS, "THREAD_MEMBERS_UPDATE", 1)
	var mup wire.ThreadMembersUpdate
	if json.Unmarshal(mu, &mup) != nil || mup.ID != th.ID || mup.MemberCount != 2 || len(mup.AddedMembers) != 1 || mup.AddedMembers[0].UserID != carol.ID {
		t.Fatalf("THREAD_MEMBERS_UPDATE = %s", mu)
	}
	e.post(carol.Token, th.ID, map[string]any{"content": "hello"})
	var members []wire.ThreadMember
	e.ok("GET", tp+"/thread-members", w.bob.Token, nil, &members)
	if len(members) != 2 {
		t.Fatalf("members = %+v", members)
	}
	// Carol leaves and loses the thread.
	e.ok("DELETE", tp+"/thread-members/@me", carol.Token, nil, nil)
	e.waitEvent(carolS, "THREAD_DELETE", 1)
	e.fail("GET", tp, carol.Token, nil, 403, 50001)
	e.fail("GET", fmt.Sprintf("%s/thread-members/%d", tp, carol.ID), w.bob.Token, nil, 404, 10007)
	e.fail("DELETE", fmt.Sprintf("%s/thread-members/%d", tp, carol.ID), w.bob.Token, nil, 404, 10007)

	// Private archived lists: MANAGE_THREADS, or the caller's own.
	e.ok("PATCH", tp, w.bob.Token, map[string]any{"archived": true}, nil)
	var list struct {
		Threads []wire.Channel `json:"threads"`
	}
	e.fail("GET", fmt.Sprintf("%s/channels/%d/threads/archived/private", v10, w.general), w.bob.Token, nil, 403, 50013)
	e.ok("GET", fmt.Sprintf("%s/channels/%d/threads/archived/private", v10, w.general), w.alice.Token, nil, &list)
	if len(list.Threads) != 1 {
		t.Fatalf("private archived = %+v", list)
	}
	e.ok("GET", fmt.Sprintf("%s/channels/%d/users/@me/threads/archived/private", v10, w.general), w.bob.Token, nil, &list)
	if len(list.Threads) != 1 {
		t.Fatalf("joined private archived = %+v", list)
	}
	e.ok("GET", fmt.Sprintf("%s/channels/%d/users/@me/threads/archived/private", v10, w.general), carol.Token, nil, &list)
	if len(list.Threads) != 0 {
		t.Fatalf("carol's joined private archived = %+v", list)
	}
}

func TestThreadPermissions(t *testing.T) {
	e := newEnv(t)
	w := e.world()
	// Threads inherit the parent's overwrites: nobody but the owner sees
	// staff, so nobody else sees its threads either.
	th := e.thread(w.alice.Token, fmt.Sprintf("%s/channels/%d/threads", v10, w.staff), map[string]any{"name": "secret", "type": 11})
	e.fail("GET", fmt.Sprintf("%s/channels/%d", v10, th.ID), w.bob.Token, nil, 403, 50001)
	e.fail("POST", fmt.Sprintf("%s/channels/%d/threads", v10, w.staff), w.bob.Token, map[string]any{"name": "x", "type": 11}, 403, 50001)
	// Denying SEND_MESSAGES_IN_THREADS in the parent stops sends in its
	// threads, not in the parent; denying CREATE_*_THREADS stops creating.
	pub := e.thread(w.bob.Token, fmt.Sprintf("%s/channels/%d/threads", v10, w.general), map[string]any{"name": "open", "type": 11})
	deny := permissions.SendMessagesInThreads | permissions.CreatePublicThreads | permissions.CreatePrivateThreads
	e.ok("PUT", fmt.Sprintf("%s/channels/%d/permissions/%d", v10, w.general, w.guildID), w.alice.Token,
		map[string]any{"type": 0, "deny": strconv.FormatUint(uint64(deny), 10)}, nil)
	e.fail("POST", fmt.Sprintf("%s/channels/%d/messages", v10, pub.ID), w.bob.Token, map[string]any{"content": "x"}, 403, 50013)
	e.post(w.bob.Token, w.general, map[string]any{"content": "the parent still works"})
	e.fail("POST", fmt.Sprintf("%s/channels/%d/threads", v10, w.general), w.bob.Token, map[string]any{"name": "x", "type": 11}, 403, 50013)
	e.fail("POST", fmt.Sprintf("%s/channels/%d/threads", v10, w.general), w.bob.Token, map[string]any{"name": "x"}, 403, 50013)
	e.fail("POST", fmt.Sprintf("%s/channels/%d/threads", v10, w.general), w.alice.Token, map[string]any{"name": "x", "type": 3}, 400, 50035)
	var dm wire.Channel
	e.ok("POST", v10+"/users/@me/channels", w.alice.Token, map[string]any{"recipient_id": w.bob.ID.String()}, &dm)
	e.fail("POST", fmt.Sprintf("%s/channels/%d/threads", v10, dm.ID), w.alice.Token, map[string]any{"name": "x"}, 403, 50013)
	// Deleting the parent deletes its threads.
	e.ok("DELETE", fmt.Sprintf("%s/channels/%d", v10, w.general), w.alice.Token, nil, nil)
	e.fail("GET", fmt.Sprintf("%s/channels/%d", v10, pub.ID), w.alice.Token, nil, 404, 10003)
}

// Gaining a channel brings its active threads in one THREAD_LIST_SYNC,
// after the channel's CHANNEL_CREATE; losing it takes them away.
func TestThreadListSync(t *testing.T) {
	e := newEnv(t)
	w := e.world()
	bobS := e.subscribe("bob", w.bob.ID, guild.IntentGuilds)
	th := e.thread(w.alice.Token, fmt.Sprintf("%s/channels/%d/threads", v10, w.staff), map[string]any{"name": "staff talk", "type": 11})
	old := e.thread(w.alice.Token, fmt.Sprintf("%s/channels/%d/threads", v10, w.staff), map[string]any{"name": "old", "type": 11})
	e.ok("PATCH", fmt.Sprintf("%s/channels/%d", v10, old.ID), w.alice.Token, map[string]any{"archived": true}, nil)
	e.ok("PUT", fmt.Sprintf("%s/channels/%d/permissions/%d", v10, w.staff, w.bob.ID), w.alice.Token,
		map[string]any{"type": 1, "allow": strconv.FormatUint(uint64(permissions.ViewChannel), 10)}, nil)
	ev := e.waitEvent(bobS, "THREAD_LIST_SYNC", 1)
	var sync wire.ThreadListSync
	if json.Unmarshal(ev, &sync) != nil || len(sync.Threads) != 1 || sync.Threads[0].ID != th.ID ||
		len(sync.ChannelIDs) != 1 || sync.ChannelIDs[0] != w.staff || sync.GuildID != w.guildID {
		t.Fatalf("THREAD_LIST_SYNC = %s", ev)
	}
	ds := e.events(bobS)
	order := []string{}
	for _, d := range ds {
		if d.Type == "CHANNEL_CREATE" || d.Type == "THREAD_LIST_SYNC" || d.Type == "THREAD_CREATE" {
			order = append(order, d.Type)
		}
	}
	if len(order) != 2 || order[0] != "CHANNEL_CREATE" || order[1] != "THREAD_LIST_SYNC" {
		t.Fatalf("events = %v", order)
	}
	e.ok("DELETE", fmt.Sprintf("%s/channels/%d/permissions/%d", v10, w.staff, w.bob.ID), w.alice.Token, nil, nil)
	e.waitEvent(bobS, "THREAD_DELETE", 1)
	e.fail("GET", fmt.Sprintf("%s/channels/%d", v10, th.ID), w.bob.Token, nil, 403, 50001)
}

// TestThreadCreatedMessage checks the THREAD_CREATED (18) system message a
// public thread started without a message leaves in its parent, that a
// private thread leaves none, that a thread in a hidden channel tells
// nothing to someone who cannot see it, and that an archived thread's
// messages cannot be edited or reacted to.
func TestThreadCreatedMessage(t *testing.T) {
	e := newEnv(t)
	w := e.world()
	bobS := e.subscribe("bob", w.bob.ID, guild.IntentGuilds|guild.IntentGuildMessages|guild.IntentMessageContent)
	// Alice (the owner) opens a thread in staff, which bob cannot see,
	// then a private and a public one in general.
	hidden := e.thread(w.alice.Token, fmt.Sprintf("%s/channels/%d/threads", v10, w.staff), map[string]any{"name": "secret plans", "type": 11})
	priv := e.thread(w.alice.Token, fmt.Sprintf("%s/channels/%d/threads", v10, w.general), map[string]any{"name": "private"})
	pub := e.thread(w.alice.Token, fmt.Sprintf("%s/channels/%d/threads", v10, w.general), map[string]any{"name": "public talk", "type": 11})
	ev := e.waitEvent(bobS, "MESSAGE_CREATE", 1)
	var sys wire.Message
	if json.Unmarshal(ev, &sys) != nil || sys.Type != wire.MessageThreadCreated || sys.ChannelID != w.general ||
		sys.Content != "public talk" || sys.Author.ID != w.alice.ID || sys.MessageReference == nil ||
		sys.MessageReference.ChannelID != pub.ID || sys.MessageReference.GuildID != w.guildID {
		t.Fatalf("THREAD_CREATED MESSAGE_CREATE = %s", ev)
	}
	var ref map[string]json.RawMessage
	if json.Unmarshal(ev, &struct {
		R *map[string]json.RawMessage `json:"message_reference"`
	}{&ref}) != nil || ref["message_id"] != nil {
		t.Fatalf("THREAD_CREATED names a message: %s", ev)
	}
	// Everything bob got so far: the public thread only, nothing of the
	// hidden or private one (the MESSAGE_CREATE above was the public
	// thread's, so the earlier threads' events were all fanned out).
	for _, d := range e.events(bobS) {
		s := string(d.Payload)
		if strings.Contains(s, hidden.ID.String()) || strings.Contains(s, "secret plans") || strings.Contains(s, priv.ID.String()) {
			t.Fatalf("bob got %s about a thread he cannot see: %s", d.Type, s)
		}
	}
	var history []wire.Message
	e.ok("GET", fmt.Sprintf("%s/channels/%d/messages", v10, w.general), w.alice.Token, nil, &history)
	if len(history) != 1 || history[0].ID != sys.ID || history[0].MessageReference == nil || history[0].MessageReference.ChannelID != pub.ID {
		t.Fatalf("general history = %+v (one THREAD_CREATED message expected, none for the private thread)", history)
	}
	e.ok("GET", fmt.Sprintf("%s/channels/%d/messages", v10, w.staff), w.alice.Token, nil, &history)
	if len(history) != 1 || history[0].Type != wire.MessageThreadCreated || history[0].Content != "secret plans" {
		t.Fatalf("staff history = %+v", history)
	}
	e.fail("GET", fmt.Sprintf("%s/channels/%d/messages", v10, w.staff), w.bob.Token, nil, 403, 50001)
	// The system message is not the author's to edit.
	e.fail("PATCH", fmt.Sprintf("%s/channels/%d/messages/%d", v10, w.general, sys.ID), w.alice.Token, map[string]any{"content": "x"}, 400, 50021)

	// An archived thread: its messages cannot be edited or reacted to.
	msg := e.post(w.bob.Token, pub.ID, map[string]any{"content": "before archiving"})
	var ch wire.Channel
	e.ok("PATCH", fmt.Sprintf("%s/channels/%d", v10, pub.ID), w.alice.Token, map[string]any{"archived": true}, &ch)
	e.fail("PATCH", fmt.Sprintf("%s/channels/%d/messages/%d", v10, pub.ID, msg.ID), w.bob.Token, map[string]any{"content": "after"}, 400, 50083)
	e.fail("PUT", fmt.Sprintf("%s/channels/%d/messages/%d/reactions/%%F0%%9F%%91%%8D/@me", v10, pub.ID, msg.ID), w.bob.Token, nil, 400, 50083)
	var got wire.Message
	e.ok("GET", fmt.Sprintf("%s/channels/%d/messages/%d", v10, pub.ID, msg.ID), w.bob.Token, nil, &got)
	if got.Content != "before archiving" || len(got.Reactions) != 0 {
		t.Fatalf("archived message changed: %+v", got)
	}
	// Locked and active: only MANAGE_THREADS sends (160005 otherwise).
	e.ok("PATCH", fmt.Sprintf("%s/channels/%d", v10, pub.ID), w.alice.Token, map[string]any{"archived": false, "locked": true}, &ch)
	e.fail("POST", fmt.Sprintf("%s/channels/%d/messages", v10, pub.ID), w.bob.Token, map[string]any{"content": "x"}, 400, 160005)
	e.post(w.alice.Token, pub.ID, map[string]any{"content": "moderator"})
}

// TestGuildCreateCarriesThreadMembers checks that GUILD_CREATE's threads
// carry the subscriber's own thread member for each thread it joined, and
// none for a thread it did not, so a client needs no thread list request
// to know which threads it is in.
func TestGuildCreateCarriesThreadMembers(t *testing.T) {
	e := newEnv(t)
	w := e.world()
	th := e.thread(w.alice.Token, fmt.Sprintf("%s/channels/%d/threads", v10, w.general), map[string]any{"name": "joined", "type": 11})
	for _, c := range []struct {
		name   string
		user   snowflake.ID
		member bool
	}{{"alice", w.alice.ID, true}, {"bob", w.bob.ID, false}} {
		sess := e.subscribe(c.name+"-gc", c.user, guild.IntentGuilds)
		var gc struct {
			Threads []threadT `json:"threads"`
		}
		if err := json.Unmarshal(e.waitEvent(sess, "GUILD_CREATE", 1), &gc); err != nil {
			t.Fatal(err)
		}
		var got *threadT
		for i := range gc.Threads {
			if gc.Threads[i].ID == th.ID {
				got = &gc.Threads[i]
			}
		}
		switch {
		case got == nil:
			t.Fatalf("%s: GUILD_CREATE threads lack the thread: %+v", c.name, gc.Threads)
		case c.member && (got.Member == nil || got.Member.UserID != c.user || got.Member.ID != th.ID):
			t.Fatalf("%s: joined thread's member = %+v", c.name, got.Member)
		case !c.member && got.Member != nil:
			t.Fatalf("%s: a thread it never joined carries a member: %+v", c.name, got.Member)
		}
	}
}
