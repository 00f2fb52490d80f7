package api

import (
	"fmt"
	"testing"

	"github.com/concord-chat/concord/runtime/domain/wire"
)

// TestArchivedThreadFrozen checks that an archived thread's messages do
// not change, whoever asks (Discord answers 400 / 50083 "Thread is
// archived"): no deletes (the author's, a moderator's, bulk), no reaction
// removals (own, someone else's, one emoji, all), no pins or unpins, no
// webhook message edits or deletes; that reading still works; and that a
// send unarchives the thread, after which the same deletes succeed.
func TestArchivedThreadFrozen(t *testing.T) {
	e := newEnv(t)
	w := e.world()
	th := e.thread(w.alice.Token, fmt.Sprintf("%s/channels/%d/threads", v10, w.general), map[string]any{"name": "frozen", "type": 11})
	mine := e.post(w.bob.Token, th.ID, map[string]any{"content": "bob's"})
	other := e.post(w.bob.Token, th.ID, map[string]any{"content": "bob's second"})
	third := e.post(w.bob.Token, th.ID, map[string]any{"content": "bob's third"})
	msgPath := func(id fmt.Stringer) string { return fmt.Sprintf("%s/channels/%d/messages/%s", v10, th.ID, id) }
	const thumbs = "%F0%9F%91%8D"
	e.ok("PUT", msgPath(mine.ID)+"/reactions/"+thumbs+"/@me", w.bob.Token, nil, nil)
	e.ok("PUT", msgPath(mine.ID)+"/reactions/"+thumbs+"/@me", w.alice.Token, nil, nil)
	pins := fmt.Sprintf("%s/channels/%d/messages/pins/", v10, th.ID)
	e.ok("PUT", pins+other.ID.String(), w.alice.Token, nil, nil)
	wh := e.createWebhook(w.alice.Token, w.general, "Hook")
	var hooked wire.Message
	e.ok("POST", fmt.Sprintf("%s?wait=true&thread_id=%d", whPath(wh), th.ID), "", map[string]any{"content": "from the hook"}, &hooked)
	hookMsg := fmt.Sprintf("%s/messages/%d?thread_id=%d", whPath(wh), hooked.ID, th.ID)

	var ch wire.Channel
	e.ok("PATCH", fmt.Sprintf("%s/channels/%d", v10, th.ID), w.alice.Token, map[string]any{"archived": true}, &ch)
	if ch.ThreadMetadata == nil || !ch.ThreadMetadata.Archived {
		t.Fatalf("thread not archived: %+v", ch)
	}
	refused := []struct{ method, path, token string }{
		{"DELETE", msgPath(mine.ID), w.bob.Token},    // the author
		{"DELETE", msgPath(other.ID), w.alice.Token}, // a moderator (owner)
		{"DELETE", msgPath(mine.ID) + "/reactions/" + thumbs + "/@me", w.bob.Token},
		{"DELETE", msgPath(mine.ID) + "/reactions/" + thumbs + "/" + w.bob.ID.String(), w.alice.Token},
		{"DELETE", msgPath(mine.ID) + "/reactions/" + thumbs, w.alice.Token},
		{"DELETE", msgPath(mine.ID) + "/reactions", w.alice.Token},
		{"PUT", pins + third.ID.String(), w.alice.Token},
		{"DELETE", pins + other.ID.String(), w.alice.Token},
		{"DELETE", hookMsg, ""},
	}
	for _, c := range refused {
		e.fail(c.method, c.path, c.token, nil, 400, 50083)
	}
	e.fail("POST", fmt.Sprintf("%s/channels/%d/messages/bulk-delete", v10, th.ID), w.alice.Token,
		map[string]any{"messages": []string{mine.ID.String(), other.ID.String()}}, 400, 50083)
	e.fail("PATCH", hookMsg, "", map[string]any{"content": "edited"}, 400, 50083)
	r := e.call("DELETE", msgPath(mine.ID), w.alice.Token, nil)
	var body struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	}
	r.json(t, &body)
	if body.Message != "Thread is archived" {
		t.Fatalf("50083 body = %s", r.Body)
	}

	// Reading is not a change: everything is still there.
	var history []wire.Message
	e.ok("GET", fmt.Sprintf("%s/channels/%d/messages", v10, th.ID), w.bob.Token, nil, &history)
	if len(history) != 4 {
		t.Fatalf("history after refused deletes = %d messages, want 4", len(history))
	}
	var got wire.Message
	e.ok("GET", msgPath(mine.ID), w.bob.Token, nil, &got)
	if len(got.Reactions) != 1 || got.Reactions[0].Count != 2 {
		t.Fatalf("reactions after refused removals = %+v", got.Reactions)
	}
	var pinned struct {
		Items []struct {
			Message wire.Message `json:"message"`
		} `json:"items"`
	}
	e.ok("GET", fmt.Sprintf("%s/channels/%d/messages/pins", v10, th.ID), w.bob.Token, nil, &pinned)
	if len(pinned.Items) != 1 || pinned.Items[0].Message.ID != other.ID {
		t.Fatalf("pins after refused changes = %+v", pinned.Items)
	}
	var users []wire.User
	e.ok("GET", msgPath(mine.ID)+"/reactions/"+thumbs, w.bob.Token, nil, &users)
	if len(users) != 2 {
		t.Fatalf("reaction users = %+v", users)
	}

	// A send unarchives it; then the author's delete goes through.
	e.post(w.bob.Token, th.ID, map[string]any{"content": "back again"})
	e.ok("GET", fmt.Sprintf("%s/channels/%d", v10, th.ID), w.bob.Token, nil, &ch)
	if ch.ThreadMetadata == nil || ch.ThreadMetadata.Archived {
		t.Fatalf("a send did not unarchive: %+v", ch.ThreadMetadata)
	}
	e.ok("DELETE", msgPath(mine.ID), w.bob.Token, nil, nil)
	e.ok("DELETE", hookMsg, "", nil, nil)
	e.fail("GET", msgPath(mine.ID), w.bob.Token, nil, 404, 10008)
}
