package model

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"testing"

	"github.com/concord-chat/concord/runtime/base/snowflake"
)

const (
	permReact   = 1 << 6
	permView    = 1 << 10
	permSend    = 1 << 11
	permManMsg  = 1 << 13
	permHistory = 1 << 16
	permRoles   = 1 << 28
	permPin     = 1 << 51
)

type idObj struct {
	ID snowflake.ID `json:"id"`
}

type msgObj struct {
	ID        snowflake.ID `json:"id"`
	ChannelID snowflake.ID `json:"channel_id"`
	Content   string       `json:"content"`
	Ref       *msgObj      `json:"referenced_message"`
}

// guildWith makes owner's guild with its general channel and an invite.
func guildWith(t *testing.T, s *server, owner account) (g, general snowflake.ID, invite string) {
	t.Helper()
	var gg idObj
	s.must(t, "POST", "/guilds", owner.Token, map[string]any{"name": "model guild"}, &gg)
	var chans []idObj
	s.must(t, "GET", fmt.Sprintf("/guilds/%d/channels", gg.ID), owner.Token, nil, &chans)
	var inv struct {
		Code string `json:"code"`
	}
	s.must(t, "POST", fmt.Sprintf("/channels/%d/invites", chans[0].ID), owner.Token, map[string]any{}, &inv)
	return gg.ID, chans[0].ID, inv.Code
}

func noFrameContains(t *testing.T, who string, fs []dispatch, secret string) {
	t.Helper()
	for _, f := range fs {
		if bytes.Contains(f.D, []byte(secret)) {
			t.Fatalf("%s received %s carrying %q: %s", who, f.T, secret, f.D)
		}
	}
}

// TestNonceReplayDoesNotLeak is a visibility finding, step by step: a
// nonce used in a channel Bob has since lost must not hand him that
// channel's messages (or their later edits) through a send elsewhere, and
// the same nonce in the lost channel is 403.
func TestNonceReplayDoesNotLeak(t *testing.T) {
	s := startServer(t)
	alice := s.register(t, "alice", false)
	bob := s.register(t, "bob", false)
	g, general, code := guildWith(t, s, alice)
	var role idObj
	s.must(t, "POST", fmt.Sprintf("/guilds/%d/roles", g), alice.Token, map[string]any{"name": "insiders"}, &role)
	var secret idObj
	s.must(t, "POST", fmt.Sprintf("/guilds/%d/channels", g), alice.Token, map[string]any{
		"name": "secret", "type": 0, "permission_overwrites": []map[string]any{
			{"id": g.String(), "type": 0, "deny": strconv.Itoa(permView)},
			{"id": role.ID.String(), "type": 0, "allow": strconv.Itoa(permView)},
		}}, &secret)
	s.must(t, "POST", "/invites/"+code, bob.Token, map[string]any{}, nil)
	s.must(t, "PUT", fmt.Sprintf("/guilds/%d/members/%d/roles/%d", g, bob.ID, role.ID), alice.Token, nil, nil)
	bobGW := s.dial(t, bob, nil)
	defer bobGW.closeNormally()
	bobGW.waitFor(t, "bob's GUILD_CREATE", hasType("GUILD_CREATE"))

	var orig, reply msgObj
	s.must(t, "POST", fmt.Sprintf("/channels/%d/messages", secret.ID), alice.Token, map[string]any{"content": "plan v1"}, &orig)
	s.must(t, "POST", fmt.Sprintf("/channels/%d/messages", secret.ID), bob.Token, map[string]any{
		"content": "ok", "nonce": "n1", "enforce_nonce": true,
		"message_reference": map[string]any{"message_id": orig.ID.String()},
	}, &reply)
	if reply.Ref == nil || reply.Ref.Content != "plan v1" {
		t.Fatalf("reply while visible = %+v", reply)
	}

	// Bob loses the role; the message he replied to is edited.
	s.must(t, "DELETE", fmt.Sprintf("/guilds/%d/members/%d/roles/%d", g, bob.ID, role.ID), alice.Token, nil, nil)
	s.must(t, "PATCH", fmt.Sprintf("/channels/%d/messages/%d", secret.ID, orig.ID), alice.Token, map[string]any{"content": "plan v2 TOP SECRET"}, nil)
	if r := s.call(t, "GET", fmt.Sprintf("/channels/%d/messages", secret.ID), bob.Token, nil); r.Status != 403 || r.code() != 50001 {
		t.Fatalf("history of the lost channel: %s", r)
	}

	// The same nonce in a channel he can see is a new message there.
	r := s.call(t, "POST", fmt.Sprintf("/channels/%d/messages", general), bob.Token, map[string]any{"content": "x", "nonce": "n1", "enforce_nonce": true})
	if !r.ok() {
		t.Fatalf("send in general: %s", r)
	}
	var got msgObj
	if err := json.Unmarshal(r.Body, &got); err != nil {
		t.Fatal(err)
	}
	if got.ChannelID != general || got.ID == reply.ID || got.Content != "x" || got.Ref != nil {
		t.Fatalf("nonce reused in general answered %s", r.Body)
	}
	for _, leak := range []string{"plan v", secret.ID.String(), reply.ID.String()} {
		if bytes.Contains(r.Body, []byte(leak)) {
			t.Fatalf("general's answer leaks %q: %s", leak, r.Body)
		}
	}
	// The same nonce in the lost channel is refused like any access.
	r = s.call(t, "POST", fmt.Sprintf("/channels/%d/messages", secret.ID), bob.Token, map[string]any{"content": "ok", "nonce": "n1", "enforce_nonce": true})
	if r.Status != 403 || r.code() != 50001 || bytes.Contains(r.Body, []byte("plan")) {
		t.Fatalf("nonce replay into the lost channel: %s", r)
	}

	// Nothing of the edit reached Bob's gateway: Alice's next message in
	// general is ordered after the edit's fan-out.
	s.must(t, "POST", fmt.Sprintf("/channels/%d/messages", general), alice.Token, map[string]any{"content": "barrier-1"}, nil)
	fs := bobGW.waitFor(t, "barrier", func(fs []dispatch) bool { return containsContent(fs, "barrier-1") })
	noFrameContains(t, "bob", fs, "plan v2")
}

// TestNonceReplayRendersNow checks the replay still works where it should:
// same channel, still visible, answered with the stored message as it is
// now (the referenced message's later edit included).
func TestNonceReplayRendersNow(t *testing.T) {
	s := startServer(t)
	alice := s.register(t, "alice", false)
	bob := s.register(t, "bob", false)
	_, general, code := guildWith(t, s, alice)
	s.must(t, "POST", "/invites/"+code, bob.Token, map[string]any{}, nil)
	var orig, first, again msgObj
	s.must(t, "POST", fmt.Sprintf("/channels/%d/messages", general), alice.Token, map[string]any{"content": "v1"}, &orig)
	body := map[string]any{"content": "re", "nonce": "n2", "enforce_nonce": true, "message_reference": map[string]any{"message_id": orig.ID.String()}}
	s.must(t, "POST", fmt.Sprintf("/channels/%d/messages", general), bob.Token, body, &first)
	s.must(t, "PATCH", fmt.Sprintf("/channels/%d/messages/%d", general, orig.ID), alice.Token, map[string]any{"content": "v2"}, nil)
	s.must(t, "POST", fmt.Sprintf("/channels/%d/messages", general), bob.Token, body, &again)
	if again.ID != first.ID || again.Ref == nil || again.Ref.Content != "v2" {
		t.Fatalf("replay = %+v, first = %+v", again, first)
	}
	var page []msgObj
	s.must(t, "GET", fmt.Sprintf("/channels/%d/messages", general), bob.Token, nil, &page)
	if len(page) != 2 {
		t.Fatalf("replay created a message: %+v", page)
	}
}

func containsContent(fs []dispatch, content string) bool {
	for _, f := range fs {
		if f.T != "MESSAGE_CREATE" {
			continue
		}
		var m msgObj
		if json.Unmarshal(f.D, &m) == nil && m.Content == content {
			return true
		}
	}
	return false
}

// TestDMsNeedASharedGuild is a visibility finding: a user who shares no
// guild with Bob cannot open a DM or a group DM with him (50007), and Bob
// receives nothing; users who share a guild can, and a DM stays readable
// but not writable once they no longer do.
func TestDMsNeedASharedGuild(t *testing.T) {
	s := startServer(t)
	alice := s.register(t, "alice", false)
	bob := s.register(t, "bob", false)
	carol := s.register(t, "carol", false)
	mallory := s.register(t, "mallory", false)
	g, _, code := guildWith(t, s, alice)
	s.must(t, "POST", "/invites/"+code, bob.Token, map[string]any{}, nil)
	bobGW := s.dial(t, bob, nil)
	defer bobGW.closeNormally()
	bobGW.waitFor(t, "bob's READY", hasType("READY"))

	for _, body := range []map[string]any{
		{"recipient_id": bob.ID.String()},
		{"recipients": []string{bob.ID.String()}},
		{"recipients": []string{bob.ID.String(), carol.ID.String()}},
	} {
		if r := s.call(t, "POST", "/users/@me/channels", mallory.Token, body); r.Status != 403 || r.code() != 50007 {
			t.Fatalf("stranger's DM %v: %s", body, r)
		}
	}
	// Alice shares the guild with Bob: her DM reaches him, and it is
	// ordered after anything Mallory's attempts could have sent (private
	// channel events go through one ordered router).
	var dm idObj
	s.must(t, "POST", "/users/@me/channels", alice.Token, map[string]any{"recipient_id": bob.ID.String()}, &dm)
	s.must(t, "POST", fmt.Sprintf("/channels/%d/messages", dm.ID), alice.Token, map[string]any{"content": "hi bob"}, nil)
	fs := bobGW.waitFor(t, "alice's dm", func(fs []dispatch) bool { return containsContent(fs, "hi bob") })
	for _, f := range fs {
		if bytes.Contains(f.D, []byte(mallory.ID.String())) {
			t.Fatalf("bob received %s naming mallory: %s", f.T, f.D)
		}
	}
	// A group DM with a stranger among the recipients is refused too.
	if r := s.call(t, "POST", "/users/@me/channels", alice.Token, map[string]any{"recipients": []string{bob.ID.String(), mallory.ID.String()}}); r.Status != 403 || r.code() != 50007 {
		t.Fatalf("group dm with a stranger: %s", r)
	}
	// Bob leaves: the DM stays readable, sending in it is 50007.
	s.must(t, "DELETE", fmt.Sprintf("/users/@me/guilds/%d", g), bob.Token, nil, nil)
	if r := s.call(t, "POST", fmt.Sprintf("/channels/%d/messages", dm.ID), alice.Token, map[string]any{"content": "still there?"}); r.Status != 403 || r.code() != 50007 {
		t.Fatalf("dm after parting: %s", r)
	}
	var page []msgObj
	s.must(t, "GET", fmt.Sprintf("/channels/%d/messages", dm.ID), bob.Token, nil, &page)
	if len(page) != 1 || page[0].Content != "hi bob" {
		t.Fatalf("dm history after parting = %+v", page)
	}
	// Mallory joins a guild Bob is in: now she may.
	s.must(t, "POST", "/invites/"+code, bob.Token, map[string]any{}, nil)
	s.must(t, "POST", "/invites/"+code, mallory.Token, map[string]any{}, nil)
	s.must(t, "POST", "/users/@me/channels", mallory.Token, map[string]any{"recipient_id": bob.ID.String()}, nil)
}

// TestBulkDeleteNamesOnlyItsChannel: a bulk delete in one channel that
// names a message of another channel neither deletes it nor shows its id
// to the first channel's viewers (found by TestModel).
func TestBulkDeleteNamesOnlyItsChannel(t *testing.T) {
	s := startServer(t)
	alice := s.register(t, "alice", false)
	bob := s.register(t, "bob", false)
	g, general, code := guildWith(t, s, alice)
	var secret idObj
	s.must(t, "POST", fmt.Sprintf("/guilds/%d/channels", g), alice.Token, map[string]any{
		"name": "secret", "type": 0, "permission_overwrites": []map[string]any{{"id": g.String(), "type": 0, "deny": strconv.Itoa(permView)}}}, &secret)
	s.must(t, "POST", "/invites/"+code, bob.Token, map[string]any{}, nil)
	bobGW := s.dial(t, bob, nil)
	defer bobGW.closeNormally()
	bobGW.waitFor(t, "bob's GUILD_CREATE", hasType("GUILD_CREATE"))
	var hidden, a, b msgObj
	s.must(t, "POST", fmt.Sprintf("/channels/%d/messages", secret.ID), alice.Token, map[string]any{"content": "hidden"}, &hidden)
	s.must(t, "POST", fmt.Sprintf("/channels/%d/messages", general), alice.Token, map[string]any{"content": "a"}, &a)
	s.must(t, "POST", fmt.Sprintf("/channels/%d/messages", general), alice.Token, map[string]any{"content": "b"}, &b)
	s.must(t, "POST", fmt.Sprintf("/channels/%d/messages/bulk-delete", general), alice.Token,
		map[string]any{"messages": []string{a.ID.String(), b.ID.String(), hidden.ID.String()}}, nil)
	s.must(t, "POST", fmt.Sprintf("/channels/%d/messages", general), alice.Token, map[string]any{"content": "barrier"}, nil)
	fs := bobGW.waitFor(t, "barrier", func(fs []dispatch) bool { return containsContent(fs, "barrier") })
	bulk := false
	for _, f := range fs {
		bulk = bulk || f.T == "MESSAGE_DELETE_BULK"
	}
	if !bulk {
		t.Fatal("bob got no MESSAGE_DELETE_BULK")
	}
	noFrameContains(t, "bob", fs, hidden.ID.String())
	var still msgObj
	s.must(t, "GET", fmt.Sprintf("/channels/%d/messages/%d", secret.ID, hidden.ID), alice.Token, nil, &still)
	if still.Content != "hidden" {
		t.Fatalf("the other channel's message = %+v", still)
	}
}
