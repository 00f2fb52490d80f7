package api

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/concord-chat/concord/runtime/adapters/eventlog"
	"github.com/concord-chat/concord/runtime/adapters/store"
	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/wire"
)

// TestEveryMessageWriteCommitsItsEvent: besides the plain send, edit and
// delete, every path that writes a message — webhook execute, edit and
// delete, a thread's starter flag, a thread's system message, a forum
// post — commits its event in the same store write; none goes through the
// separate enqueue a crash can cut off.
func TestEveryMessageWriteCommitsItsEvent(t *testing.T) {
	n, _ := startNode(t, t.TempDir(), true)
	e := n.env
	w := e.world()

	wh := e.createWebhook(w.alice.Token, w.general, "Logger")
	var hooked wire.Message
	e.ok("POST", whPath(wh)+"?wait=true", "", map[string]any{"content": "from the hook"}, &hooked)
	e.ok("PATCH", fmt.Sprintf("%s/messages/%d", whPath(wh), hooked.ID), "", map[string]any{"content": "edited"}, nil)
	if r := e.call("DELETE", fmt.Sprintf("%s/messages/%d", whPath(wh), hooked.ID), "", nil); r.Status != 204 {
		t.Fatalf("webhook message delete: status %d", r.Status)
	}

	starter := e.post(w.alice.Token, w.general, map[string]any{"content": "thread here"})
	th := e.thread(w.alice.Token, fmt.Sprintf("%s/channels/%d/messages/%d/threads", v10, w.general, starter.ID), map[string]any{"name": "t"})
	// A standalone public thread posts a THREAD_CREATED system message
	// (type 18) in its parent.
	alone := e.thread(w.alice.Token, fmt.Sprintf("%s/channels/%d/threads", v10, w.general), map[string]any{"name": "standalone", "type": 11})

	var forum wire.Channel
	e.ok("POST", fmt.Sprintf("%s/guilds/%d/channels", v10, w.guildID), w.alice.Token, map[string]any{"name": "help", "type": 15}, &forum)
	var post forumPostT
	e.ok("POST", fmt.Sprintf("%s/channels/%d/threads", v10, forum.ID), w.alice.Token,
		map[string]any{"name": "q", "message": map[string]any{"content": "how?"}}, &post)

	select {
	case ev := <-n.pub.published:
		t.Fatalf("%s of message %d went through the separate enqueue, not the store write", ev.Type, ev.MessageID)
	default:
	}
	want := map[snowflake.ID][]string{
		hooked.ID:  {eventlog.MessageCreate, eventlog.MessageUpdate, eventlog.MessageDelete},
		starter.ID: {eventlog.MessageCreate, eventlog.MessageUpdate}, // the HAS_THREAD flag
		post.ID:    {eventlog.MessageCreate},                         // the starter message has the thread's id
	}
	got := map[snowflake.ID][]string{}
	systemInThread := false
	for _, ch := range []snowflake.ID{w.general, th.ID, alone.ID, post.ID} {
		entries, err := n.st.ListOutbox(context.Background(), store.OutboxShard(ch), 1000, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, en := range entries {
			ev, err := eventlog.DecodeMessageEvent(en.Event.Value)
			if err != nil {
				t.Fatal(err)
			}
			if ev.ChannelID != ch {
				continue // another channel in the same shard
			}
			got[ev.MessageID] = append(got[ev.MessageID], ev.Type)
			if ch == w.general && ev.MessageID != hooked.ID && ev.MessageID != starter.ID && ev.Type == eventlog.MessageCreate {
				systemInThread = true // the THREAD_CREATED system message in the parent
			}
		}
	}
	for id, types := range want {
		if !slices.Equal(got[id], types) {
			t.Errorf("outbox events of message %d = %v, want %v", id, got[id], types)
		}
	}
	if !systemInThread {
		t.Errorf("the thread's system message has no event in the outbox: %v", got)
	}
}
