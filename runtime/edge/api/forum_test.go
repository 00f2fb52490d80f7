package api

import (
	"encoding/json"
	"fmt"
	"github.com/concord-chat/concord/runtime/edge/api/uploads/uploadstest"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/guild"
	"github.com/concord-chat/concord/runtime/domain/permissions"
	"github.com/concord-chat/concord/runtime/domain/wire"
)

type forumPostT struct {
	threadT
	Message *wire.Message `json:"message"`
}

// TestForumChannels checks forum channels: available_tags, posts (a
// public thread whose starter message has its id), applied_tags with the
// moderated-tag rule, the errors of each, and that a hidden forum says
// nothing, not even that it is a forum.
func TestForumChannels(t *testing.T) {
	e := newEnv(t)
	w := e.world()
	bobS := e.subscribe("bob", w.bob.ID, guild.IntentGuilds|guild.IntentGuildMessages|guild.IntentMessageContent)
	chans := fmt.Sprintf("%s/guilds/%d/channels", v10, w.guildID)
	var forum wire.Channel
	e.ok("POST", chans, w.alice.Token, map[string]any{"name": "help", "type": 15, "available_tags": []map[string]any{
		{"name": "bug", "emoji_name": "🐛"}, {"name": "staff", "moderated": true}}}, &forum)
	if forum.Type != 15 || forum.AvailableTags == nil || len(*forum.AvailableTags) != 2 {
		t.Fatalf("forum = %+v", forum)
	}
	bug, staff := (*forum.AvailableTags)[0], (*forum.AvailableTags)[1]
	if bug.ID == 0 || bug.Name != "bug" || bug.EmojiName == nil || *bug.EmojiName != "🐛" || bug.Moderated || !staff.Moderated || staff.ID == bug.ID {
		t.Fatalf("tags = %+v", *forum.AvailableTags)
	}
	// Bad tags are refused naming the field.
	many := make([]map[string]any, 21)
	for i := range many {
		many[i] = map[string]any{"name": fmt.Sprint("t", i)}
	}
	e.fail("POST", chans, w.alice.Token, map[string]any{"name": "f", "type": 15, "available_tags": many}, 400, 50035)
	e.fail("POST", chans, w.alice.Token, map[string]any{"name": "f", "type": 15, "available_tags": []map[string]any{{"name": strings.Repeat("x", 21)}}}, 400, 50035)
	e.fail("POST", chans, w.alice.Token, map[string]any{"name": "f", "type": 0, "available_tags": []map[string]any{{"name": "x"}}}, 400, 50035)

	posts := fmt.Sprintf("%s/channels/%d/threads", v10, forum.ID)
	var post forumPostT
	r := e.ok("POST", posts, w.bob.Token, map[string]any{"name": "it crashes", "applied_tags": []string{bug.ID.String()},
		"message": map[string]any{"content": "when I click"}}, &post)
	if r.Status != 201 || post.Type != 11 || post.ParentID == nil || *post.ParentID != forum.ID || post.AppliedTags == nil ||
		!slices.Equal(*post.AppliedTags, []snowflake.ID{bug.ID}) || post.Message == nil || post.Message.ID != post.ID ||
		post.Message.ChannelID != post.ID || post.Message.Content != "when I click" || post.Member == nil || post.Member.UserID != w.bob.ID {
		t.Fatalf("post = %d %+v (message %+v)", r.Status, post, post.Message)
	}
	// The post is a thread as Discord writes one: its last message is the
	// starter message, and it has none of a guild channel's own fields.
	checkPostShape := func(what string, raw []byte) {
		t.Helper()
		var fields map[string]json.RawMessage
		if err := json.Unmarshal(raw, &fields); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if string(fields["last_message_id"]) != `"`+post.ID.String()+`"` {
			t.Fatalf("%s last_message_id = %s, want the starter message %d", what, fields["last_message_id"], post.ID)
		}
		for _, k := range []string{"position", "topic", "permission_overwrites", "nsfw"} {
			if _, ok := fields[k]; ok {
				t.Fatalf("%s has the guild channel field %q: %s", what, k, raw)
			}
		}
		for _, k := range []string{"thread_metadata", "owner_id", "parent_id", "flags", "rate_limit_per_user", "message_count", "member_count", "total_message_sent", "applied_tags"} {
			if _, ok := fields[k]; !ok {
				t.Fatalf("%s lacks %q: %s", what, k, raw)
			}
		}
	}
	checkPostShape("post answer", r.Body)
	ev := e.waitEvent(bobS, "THREAD_CREATE", 1)
	var tc wire.Channel
	if json.Unmarshal(ev, &tc) != nil || tc.ID != post.ID || !tc.NewlyCreated || tc.AppliedTags == nil || len(*tc.AppliedTags) != 1 {
		t.Fatalf("THREAD_CREATE = %s", ev)
	}
	checkPostShape("THREAD_CREATE", ev)
	ev = e.waitEvent(bobS, "MESSAGE_CREATE", 1)
	var mc wire.Message
	if json.Unmarshal(ev, &mc) != nil || mc.ID != post.ID || mc.ChannelID != post.ID || mc.Content != "when I click" {
		t.Fatalf("starter MESSAGE_CREATE = %s", ev)
	}
	var got wire.Channel
	checkPostShape("GET post", e.ok("GET", fmt.Sprintf("%s/channels/%d", v10, post.ID), w.alice.Token, nil, &got).Body)
	if got.MessageCount == nil || *got.MessageCount != 0 || got.AppliedTags == nil || (*got.AppliedTags)[0] != bug.ID {
		t.Fatalf("post read back = %+v", got)
	}
	var history []wire.Message
	e.ok("GET", fmt.Sprintf("%s/channels/%d/messages", v10, post.ID), w.alice.Token, nil, &history)
	if len(history) != 1 || history[0].ID != post.ID {
		t.Fatalf("post history = %+v", history)
	}
	// A reply is counted; the forum itself takes no messages.
	e.post(w.alice.Token, post.ID, map[string]any{"content": "which button?"})
	e.fail("POST", fmt.Sprintf("%s/channels/%d/messages", v10, forum.ID), w.bob.Token, map[string]any{"content": "x"}, 400, 50008)
	e.fail("POST", fmt.Sprintf("%s/channels/%d/messages/%d/threads", v10, forum.ID, post.ID), w.bob.Token, map[string]any{"name": "x"}, 404, 10008)

	// Forums have no webhooks (Discord's forum posts by webhook are not
	// offered).
	e.fail("POST", fmt.Sprintf("%s/channels/%d/webhooks", v10, forum.ID), w.alice.Token, map[string]any{"name": "hook"}, 400, 50024)

	// Errors of posting.
	e.fail("POST", posts, w.bob.Token, map[string]any{"name": "no message"}, 400, 50035)
	e.fail("POST", posts, w.bob.Token, map[string]any{"name": "empty", "message": map[string]any{"content": " "}}, 400, 50006)
	e.fail("POST", posts, w.bob.Token, map[string]any{"name": "mod tag", "applied_tags": []string{staff.ID.String()}, "message": map[string]any{"content": "x"}}, 403, 50013)
	e.fail("POST", posts, w.bob.Token, map[string]any{"name": "unknown tag", "applied_tags": []string{"42"}, "message": map[string]any{"content": "x"}}, 400, 50035)
	e.fail("POST", posts, w.bob.Token, map[string]any{"name": "twice", "applied_tags": []string{bug.ID.String(), bug.ID.String()}, "message": map[string]any{"content": "x"}}, 400, 50035)
	// A standalone thread body (no message) is not a forum post, and a
	// post body is not a text channel's thread.
	var text forumPostT
	e.ok("POST", fmt.Sprintf("%s/channels/%d/threads", v10, w.general), w.bob.Token, map[string]any{"name": "plain", "type": 11}, &text)
	if text.AppliedTags != nil {
		t.Fatalf("a text channel's thread has applied_tags: %+v", text)
	}

	// Tags of a post: its creator changes them, moderated ones are for
	// moderators, the owner (MANAGE_THREADS) applies them.
	tp := fmt.Sprintf("%s/channels/%d", v10, post.ID)
	e.ok("PATCH", tp, w.bob.Token, map[string]any{"applied_tags": []string{}}, &got)
	if got.AppliedTags == nil || len(*got.AppliedTags) != 0 {
		t.Fatalf("tags cleared = %+v", got.AppliedTags)
	}
	e.fail("PATCH", tp, w.bob.Token, map[string]any{"applied_tags": []string{staff.ID.String()}}, 403, 50013)
	e.ok("PATCH", tp, w.alice.Token, map[string]any{"applied_tags": []string{staff.ID.String(), bug.ID.String()}}, &got)
	if got.AppliedTags == nil || !slices.Equal(*got.AppliedTags, []snowflake.ID{staff.ID, bug.ID}) {
		t.Fatalf("tags set by a moderator = %+v", got.AppliedTags)
	}
	e.fail("PATCH", fmt.Sprintf("%s/channels/%d", v10, text.ID), w.bob.Token, map[string]any{"applied_tags": []string{}}, 400, 50035)

	// Editing the forum's tags keeps the ids of those it keeps.
	e.ok("PATCH", fmt.Sprintf("%s/channels/%d", v10, forum.ID), w.alice.Token, map[string]any{"available_tags": []map[string]any{
		{"id": bug.ID.String(), "name": "bug report"}, {"name": "question"}}}, &forum)
	if len(*forum.AvailableTags) != 2 || (*forum.AvailableTags)[0].ID != bug.ID || (*forum.AvailableTags)[0].Name != "bug report" ||
		(*forum.AvailableTags)[1].ID == 0 || (*forum.AvailableTags)[1].ID == staff.ID {
		t.Fatalf("edited tags = %+v", *forum.AvailableTags)
	}

	// A forum hidden from bob: 50001 whatever the body, nothing of it in
	// his events.
	var hidden wire.Channel
	e.ok("POST", chans, w.alice.Token, map[string]any{"name": "mods", "type": 15,
		"permission_overwrites": []map[string]any{{"id": w.guildID.String(), "type": 0, "deny": fmt.Sprint(uint64(permissions.ViewChannel))}}}, &hidden)
	e.fail("POST", fmt.Sprintf("%s/channels/%d/threads", v10, hidden.ID), w.bob.Token, map[string]any{"name": "x"}, 403, 50001)
	var secret forumPostT
	e.ok("POST", fmt.Sprintf("%s/channels/%d/threads", v10, hidden.ID), w.alice.Token, map[string]any{"name": "secret post", "message": map[string]any{"content": "secret"}}, &secret)
	barrier := e.post(w.alice.Token, w.general, map[string]any{"content": "barrier"})
	e.waitFor(bobS, "barrier", func(ds []delivery) bool {
		for _, d := range ds {
			if d.Type == "MESSAGE_CREATE" && strings.Contains(string(d.Payload), barrier.ID.String()) {
				return true
			}
		}
		return false
	})
	for _, d := range e.events(bobS) {
		if s := string(d.Payload); strings.Contains(s, hidden.ID.String()) || strings.Contains(s, "secret") {
			t.Fatalf("bob got %s about the hidden forum: %s", d.Type, s)
		}
	}
}

// TestForumPostFiles checks a forum post sent as multipart/form-data
// (payload_json with the thread and its message, files[n] beside it, as
// discord.js and discord.py send one): the starter message carries the
// files, stored under the post and served signed; a file alone is a
// post; a bad attachments array or a poster without ATTACH_FILES is
// refused before any post exists.
func TestForumPostFiles(t *testing.T) {
	e := newEnv(t)
	w := e.world()
	bobS := e.subscribe("bob", w.bob.ID, guild.IntentGuilds|guild.IntentGuildMessages|guild.IntentMessageContent)
	var forum wire.Channel
	e.ok("POST", fmt.Sprintf("%s/guilds/%d/channels", v10, w.guildID), w.alice.Token, map[string]any{"name": "gallery", "type": 15}, &forum)
	posts := fmt.Sprintf("%s/channels/%d/threads", v10, forum.ID)
	status, raw := e.upload("POST", posts+"?use_nested_fields=1", w.bob.Token, map[string]any{"name": "screenshot", "auto_archive_duration": 1440,
		"message": map[string]any{"content": "see attached", "attachments": []map[string]any{{"id": 0, "filename": "shot.png"}}}},
		uploadstest.File("files[0]", "upload.bin", "application/octet-stream", uploadstest.PNG()))
	if status != 201 {
		t.Fatalf("multipart post: %d %s", status, raw)
	}
	var post forumPostT
	if err := json.Unmarshal(raw, &post); err != nil {
		t.Fatal(err)
	}
	if post.Message == nil || post.Message.ID != post.ID || post.Message.Content != "see attached" || len(post.Message.Attachments) != 1 {
		t.Fatalf("post = %s", raw)
	}
	att := post.Message.Attachments[0]
	if att.Filename != "shot.png" || att.ContentType != "image/png" || att.Size != len(uploadstest.PNG()) ||
		!strings.Contains(att.URL, "/attachments/"+post.ID.String()+"/"+att.ID.String()+"/shot.png?ex=") {
		t.Fatalf("starter attachment = %+v", att)
	}
	if res, body := fetch(t, att.URL); res.StatusCode != 200 || string(body) != string(uploadstest.PNG()) {
		t.Fatalf("fetch the starter's file: %d %q", res.StatusCode, body)
	}
	e.waitEvent(bobS, "THREAD_CREATE", 1)
	var mc wire.Message
	if ev := e.waitEvent(bobS, "MESSAGE_CREATE", 1); json.Unmarshal(ev, &mc) != nil || mc.ID != post.ID || len(mc.Attachments) != 1 || mc.Attachments[0].ID != att.ID {
		t.Fatalf("starter MESSAGE_CREATE = %s", ev)
	}
	var read wire.Message
	e.ok("GET", fmt.Sprintf("%s/channels/%d/messages/%d", v10, post.ID, post.ID), w.alice.Token, nil, &read)
	if len(read.Attachments) != 1 || read.Attachments[0].Filename != "shot.png" {
		t.Fatalf("starter read back = %+v", read.Attachments)
	}
	// A file is a message by itself (discord.py sends no attachments
	// array when asked to: the files are taken by their order).
	status, raw = e.upload("POST", posts, w.bob.Token, map[string]any{"name": "just a file", "message": map[string]any{}},
		uploadstest.File("files[0]", "notes.txt", "text/plain", []byte("plain notes")))
	if status != 201 || !strings.Contains(string(raw), `"filename":"notes.txt"`) {
		t.Fatalf("file-only post: %d %s", status, raw)
	}

	active := func() int {
		var l struct {
			Threads []wire.Channel `json:"threads"`
		}
		e.ok("GET", fmt.Sprintf("%s/guilds/%d/threads/active", v10, w.guildID), w.alice.Token, nil, &l)
		return len(l.Threads)
	}
	before := active()
	status, raw = e.upload("POST", posts, w.bob.Token, map[string]any{"name": "dangling",
		"message": map[string]any{"content": "x", "attachments": []map[string]any{{"id": 3}}}},
		uploadstest.File("files[0]", "a.png", "image/png", uploadstest.PNG()))
	if status != 400 || !strings.Contains(string(raw), "ATTACHMENT_NOT_FOUND") {
		t.Fatalf("dangling attachment: %d %s", status, raw)
	}
	e.ok("PUT", fmt.Sprintf("%s/channels/%d/permissions/%d", v10, forum.ID, w.guildID), w.alice.Token,
		map[string]any{"type": 0, "deny": strconv.FormatUint(uint64(permissions.AttachFiles), 10)}, nil)
	status, raw = e.upload("POST", posts, w.bob.Token, map[string]any{"name": "no files for bob", "message": map[string]any{"content": "x"}},
		uploadstest.File("files[0]", "a.png", "image/png", uploadstest.PNG()))
	if status != 403 || !strings.Contains(string(raw), "50013") {
		t.Fatalf("without ATTACH_FILES: %d %s", status, raw)
	}
	if n := active(); n != before {
		t.Fatalf("refused posts left %d threads behind", n-before)
	}
	// Without files the post needs no ATTACH_FILES.
	e.ok("POST", posts, w.bob.Token, map[string]any{"name": "words only", "message": map[string]any{"content": "x"}}, nil)
}
