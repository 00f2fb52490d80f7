//go:build integration

package browser

import (
	"fmt"
	"sync"
	"testing"
	"time"
)

// TestWebPassive checks the web client in a guild above its
// large_threshold (52 members, default threshold 50), where the server
// sends it messages only for the channel on screen (the client's op 14)
// and those that mention it, and PASSIVE_UPDATE_V1 for the rest: the open
// channel shows messages live, other channels get their unread and
// mention badges, and opening one shows the messages it was not sent.
func TestWebPassive(t *testing.T) {
	srv := startDev(t)
	var alice struct{ Token string }
	srv.call(t, "POST", "/auth/register", "", map[string]any{"username": "alice", "password": "alice password"}, &alice)
	var g struct{ ID string }
	srv.call(t, "POST", "/guilds", alice.Token, map[string]any{"name": "Big Server"}, &g)
	var chans []struct{ ID, Name string }
	srv.call(t, "GET", "/guilds/"+g.ID+"/channels", alice.Token, nil, &chans)
	var general string
	for _, c := range chans {
		if c.Name == "general" {
			general = c.ID
		}
	}
	var random struct{ ID string }
	srv.call(t, "POST", "/guilds/"+g.ID+"/channels", alice.Token, map[string]any{"name": "random", "type": 0}, &random)
	var inv struct{ Code string }
	srv.call(t, "POST", "/channels/"+general+"/invites", alice.Token, map[string]any{}, &inv)
	var bob struct {
		Token  string `json:"token"`
		UserID string `json:"user_id"`
	}
	srv.call(t, "POST", "/auth/register", "", map[string]any{"username": "bob", "password": "bob password"}, &bob)
	srv.call(t, "POST", "/invites/"+inv.Code, bob.Token, map[string]any{}, nil)
	// 50 more: 52 members, above the client's large_threshold.
	var wg sync.WaitGroup
	for i := range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var r struct{ Token string }
			srv.call(t, "POST", "/auth/register", "", map[string]any{"username": fmt.Sprintf("member%02d", i), "password": "member password"}, &r)
			srv.call(t, "POST", "/invites/"+inv.Code, r.Token, map[string]any{}, nil)
		}()
	}
	wg.Wait()
	send := func(channel, content string) {
		srv.call(t, "POST", "/channels/"+channel+"/messages", alice.Token, map[string]any{"content": content}, nil)
	}

	b := newBrowser(t)
	p := b.page("bob")
	pages := []*page{p}
	logIn(p, srv.base, "bob", "bob password", "Log In")
	p.click("link", "Big Server")
	p.waitFor("list", "Messages in #general", 10*time.Second)

	in(t, "the open channel is live, another gets its badge", pages, func(t *testing.T) {
		send(random.ID, "passive one")
		// Not sent to bob: the badge comes from PASSIVE_UPDATE_V1,
		// within the contract's 5 s.
		p.waitFor("link", "random (unread)", 6*time.Second)
		send(general, "live in general")
		p.waitJS(messagesContain("general", "alice", "live in general"), 5*time.Second)
	})

	in(t, "a mention in another channel counts at once", pages, func(t *testing.T) {
		send(random.ID, "hey <@"+bob.UserID+">")
		p.waitFor("link", "random (unread), 1 mentions", 5*time.Second)
		p.screenshot("passive-badges")
	})

	in(t, "opening the channel shows what was not sent, then it is live", pages, func(t *testing.T) {
		p.click("link", "random (unread), 1 mentions")
		p.waitJS(messagesContain("random", "alice", "passive one"), 5*time.Second)
		p.waitJS(messagesContain("random", "alice", "hey"), 5*time.Second)
		send(random.ID, "live in random")
		p.waitJS(messagesContain("random", "alice", "live in random"), 5*time.Second)
		// general is now passive: its new message is a badge.
		send(general, "while away")
		p.waitFor("link", "general (unread)", 6*time.Second)
		p.click("link", "general (unread)")
		p.waitJS(messagesContain("general", "alice", "while away"), 5*time.Second)
	})
}
