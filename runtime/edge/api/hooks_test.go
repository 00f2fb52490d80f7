package api

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/wire"
)

// withDeps returns an env serving a second API handler (another process)
// over e's store and guild service, with deps changed by edit.
func (e *env) withDeps(edit func(*Deps)) *env {
	e.t.Helper()
	e.inProcess("it serves a second handler over the same store with other Deps")
	d := Deps{Store: e.store, Guilds: e.guilds, Auth: e.auth, IDs: e.ids}
	edit(&d)
	srv := httptest.NewServer(New(Config{}, d))
	e.t.Cleanup(srv.Close)
	e2 := *e
	e2.srv, e2.url = srv, srv.URL
	return &e2
}

type priorCall struct {
	channel, author snowflake.ID
	nonce           string
	path            string
}

// TestPriorSendAnswersWithTheEarlierMessage: a send with enforce_nonce
// whose nonce this process has not seen asks Deps.PriorSend (with the
// stored nonce and the request), and a message found there is the answer:
// nothing new is written. Once answered, the nonce is this process's own;
// sends without enforce_nonce never ask.
func TestPriorSendAnswersWithTheEarlierMessage(t *testing.T) {
	e := newEnv(t)
	w := e.world()
	first := e.post(w.bob.Token, w.general, map[string]any{"content": "first", "nonce": 7, "enforce_nonce": true})

	var mu sync.Mutex
	var calls []priorCall
	e2 := e.withDeps(func(d *Deps) {
		d.PriorSend = func(r *http.Request, channel, author snowflake.ID, nonce string) (snowflake.ID, bool) {
			mu.Lock()
			defer mu.Unlock()
			calls = append(calls, priorCall{channel, author, nonce, r.URL.Path})
			if nonce == "#7" && author == w.bob.ID && channel == w.general {
				return first.ID, true
			}
			return 0, false
		}
	})
	var again wire.Message
	e2.ok("POST", fmt.Sprintf("%s/channels/%d/messages", v10, w.general), w.bob.Token,
		map[string]any{"content": "first", "nonce": 7, "enforce_nonce": true}, &again)
	if again.ID != first.ID || again.Content != "first" {
		t.Fatalf("retried send answered %d %q, want the earlier message %d", again.ID, again.Content, first.ID)
	}
	if len(calls) != 1 || calls[0] != (priorCall{w.general, w.bob.ID, "#7", fmt.Sprintf("%s/channels/%d/messages", v10, w.general)}) {
		t.Fatalf("PriorSend calls = %+v", calls)
	}
	// The same nonce again is answered from this process's nonce cache.
	if m := e2.post(w.bob.Token, w.general, map[string]any{"content": "first", "nonce": 7, "enforce_nonce": true}); m.ID != first.ID {
		t.Fatalf("third attempt wrote %d", m.ID)
	}
	// No enforce_nonce: no question, a new message.
	if m := e2.post(w.bob.Token, w.general, map[string]any{"content": "echo", "nonce": 7}); m.ID == first.ID {
		t.Fatal("a send without enforce_nonce was deduplicated")
	}
	// Nothing found: the send is written.
	fresh := e2.post(w.bob.Token, w.general, map[string]any{"content": "new", "nonce": "n-2", "enforce_nonce": true})
	if fresh.ID == 0 || fresh.ID == first.ID || fresh.Content != "new" {
		t.Fatalf("unfound nonce answered %+v", fresh)
	}
	mu.Lock()
	if len(calls) != 2 || calls[1].nonce != "n-2" {
		t.Fatalf("PriorSend calls = %+v, want the first and n-2", calls)
	}
	mu.Unlock()
	var page []wire.Message
	e.ok("GET", fmt.Sprintf("%s/channels/%d/messages", v10, w.general), w.bob.Token, nil, &page)
	if len(page) != 3 {
		t.Fatalf("history has %d messages, want 3 (first, echo, new)", len(page))
	}
}

// TestMemberRemovedRunsAfterARemoval: a kick and a leave each run
// Deps.MemberRemoved with the guild and the member before the 204; a
// refused removal does not.
func TestMemberRemovedRunsAfterARemoval(t *testing.T) {
	e := newEnv(t)
	w := e.world()
	type removal struct{ guild, user snowflake.ID }
	var mu sync.Mutex
	var got []removal
	e2 := e.withDeps(func(d *Deps) {
		d.MemberRemoved = func(ctx context.Context, g, u snowflake.ID) {
			mu.Lock()
			defer mu.Unlock()
			got = append(got, removal{g, u})
		}
	})
	e2.fail("DELETE", fmt.Sprintf("%s/guilds/%d/members/%d", v10, w.guildID, w.alice.ID), w.bob.Token, nil, 403, 50013)
	e2.ok("DELETE", fmt.Sprintf("%s/guilds/%d/members/%d", v10, w.guildID, w.bob.ID), w.alice.Token, nil, nil)
	mu.Lock()
	if len(got) != 1 || got[0] != (removal{w.guildID, w.bob.ID}) {
		t.Fatalf("after the kick: %+v", got)
	}
	mu.Unlock()
	carol := e.register("carol", false)
	e2.ok("POST", v10+"/invites/"+w.inviteCode, carol.Token, map[string]any{}, nil)
	e2.ok("DELETE", fmt.Sprintf("%s/users/@me/guilds/%d", v10, w.guildID), carol.Token, nil, nil)
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 2 || got[1] != (removal{w.guildID, carol.ID}) {
		t.Fatalf("after the leave: %+v", got)
	}
}
