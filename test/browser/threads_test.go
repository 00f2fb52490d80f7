//go:build integration

package browser

import (
	"fmt"
	"testing"
	"time"
)

// threadWorld is the small guild of TestWebThreads: alice's guild with
// #general, and bob, a member who joined through an invite (all over REST).
type threadWorld struct {
	srv                   *server
	alice, bob            string // tokens
	guild, general, bobID string
}

func setupThreads(t *testing.T, srv *server) *threadWorld {
	w := &threadWorld{srv: srv}
	var reg struct{ Token string }
	srv.call(t, "POST", "/auth/register", "", map[string]any{"username": "alice", "password": "alice password"}, &reg)
	w.alice = reg.Token
	srv.call(t, "POST", "/auth/register", "", map[string]any{"username": "bob", "password": "bob password"}, &reg)
	w.bob = reg.Token
	var me struct{ ID string }
	srv.call(t, "GET", "/users/@me", w.bob, nil, &me)
	w.bobID = me.ID
	var g struct{ ID string }
	srv.call(t, "POST", "/guilds", w.alice, map[string]any{"name": "Thread Test"}, &g)
	w.guild = g.ID
	var chans []struct{ ID, Name string }
	srv.call(t, "GET", "/guilds/"+g.ID+"/channels", w.alice, nil, &chans)
	for _, c := range chans {
		if c.Name == "general" {
			w.general = c.ID
		}
	}
	if w.general == "" {
		t.Fatalf("the new guild has no #general: %v", chans)
	}
	var inv struct{ Code string }
	srv.call(t, "POST", "/channels/"+w.general+"/invites", w.alice, map[string]any{}, &inv)
	srv.call(t, "POST", "/invites/"+inv.Code, w.bob, map[string]any{}, nil)
	return w
}

// openAs loads the app in p already logged in with token, at path.
func openAs(p *page, base, token, path string) {
	p.t.Helper()
	p.do(navigate(base + "/"))
	eval[bool](p, fmt.Sprintf(`(localStorage.setItem('concord.token', %q), true)`, token))
	p.do(navigate(base + path))
}

// TestWebThreads: a person starts a thread from a message in the browser
// and writes in it; a second person's browser learns of the thread from
// the gateway (THREAD_CREATE: the sidebar and the message's thread link),
// reads the message and answers in the thread, and the first sees the
// answer; a bot over REST reads both from the thread. Bob joins it
// (THREAD_MEMBERS_UPDATE). Closing the thread
// (THREAD_UPDATE, archived) and deleting it (THREAD_DELETE) take it off
// the other screen.
func TestWebThreads(t *testing.T) {
	srv := startDev(t)
	w := setupThreads(t, srv)
	const starter = "shall we plan the launch?"
	var msg struct{ ID string }
	srv.call(t, "POST", "/channels/"+w.general+"/messages", w.alice, map[string]any{"content": starter}, &msg)

	b := newBrowser(t)
	alice, bob := b.page("alice"), b.page("bob")
	pages := []*page{alice, bob}
	general := "/channels/" + w.guild + "/" + w.general
	openAs(alice, srv.base, w.alice, general)
	openAs(bob, srv.base, w.bob, general)
	const wait = 20 * time.Second // a bound on a loaded machine, not an expectation
	alice.waitJS(messagesContain("general", "alice", starter), wait)
	bob.waitJS(messagesContain("general", "alice", starter), wait)
	// Each gateway session is subscribed to the guild once its member
	// list is on screen (READY, GUILD_CREATE, then op 14 answered).
	alice.waitJS(listJS("Members")+`?.textContent.includes('bob')`, wait)
	bob.waitJS(listJS("Members")+`?.textContent.includes('alice')`, wait)

	var thread string
	in(t, "alice starts a thread from the message and writes in it", pages, func(t *testing.T) {
		ok := eval[bool](alice, fmt.Sprintf(`(() => {
  const li = [...%s.children].find(li => li.textContent.includes(%q));
  const b = li && [...li.querySelectorAll('button')].find(b => b.textContent === 'Create Thread');
  if (b) b.click();
  return !!b;
})()`, listJS("Messages in #general"), starter))
		if !ok {
			t.Fatal("no Create Thread button on alice's message")
		}
		alice.fill("Thread Name", "Launch plan")
		alice.click("button", "Start Thread")
		// The app opens the thread: its message list, its composer, and
		// the starter message quoted at its top.
		alice.waitFor("list", "Messages in #Launch plan", wait)
		alice.waitJS(messagesContain("Launch plan", "alice", starter), wait)
		thread = eval[string](alice, `location.pathname.split('/')[3]`)
		if thread != msg.ID {
			t.Errorf("the thread opened at %q, want the message's id %s (a thread started from a message has its id)", thread, msg.ID)
		}
		alice.waitFor("list", "Threads in #general", wait)
		alice.fill("Message #Launch plan", "first draft in the thread")
		alice.enter()
		alice.waitJS(messagesContain("Launch plan", "alice", "first draft in the thread")+
			` && !document.querySelector('li.msg.pending')`, wait)
	})
	if thread == "" {
		t.FailNow()
	}

	in(t, "bob sees the thread, reads and answers in it", pages, func(t *testing.T) {
		// THREAD_CREATE puts it under #general in bob's sidebar; the
		// MESSAGE_UPDATE of the starter links it from the message.
		bob.waitJS(threadEntryJS("Launch plan"), wait)
		bob.waitFor("link", "Open thread Launch plan", wait)
		bob.click("link", "Open thread Launch plan")
		bob.waitFor("list", "Messages in #Launch plan", wait)
		bob.waitJS(messagesContain("Launch plan", "alice", "first draft in the thread"), wait)
		// Bob joins it: THREAD_MEMBERS_UPDATE brings his membership back
		// and the button goes.
		bob.click("button", "Join Thread")
		bob.waitGone("button", "Join Thread", wait)
		if got := eval[int](bob, fmt.Sprintf(`(async () => (await (await fetch('/api/v10/channels/%s/thread-members', {headers: {Authorization: localStorage.getItem('concord.token')}})).json()).length)()`, thread)); got != 2 {
			t.Errorf("the thread has %d members over REST after bob joined, want 2", got)
		}
		bob.fill("Message #Launch plan", "looks good to me")
		bob.enter()
		alice.waitJS(messagesContain("Launch plan", "bob", "looks good to me"), wait)
		alice.screenshot("thread")
		// The messages went to the thread, not to #general.
		var msgs []struct {
			Content string
			Author  struct{ Username string }
		}
		srv.call(t, "GET", "/channels/"+thread+"/messages?limit=50", w.alice, nil, &msgs)
		got := map[string]string{}
		for _, m := range msgs {
			got[m.Content] = m.Author.Username
		}
		if got["first draft in the thread"] != "alice" || got["looks good to me"] != "bob" {
			t.Errorf("the thread over REST holds %v, want alice's and bob's messages", got)
		}
		srv.call(t, "GET", "/channels/"+w.general+"/messages?limit=50", w.alice, nil, &msgs)
		for _, m := range msgs {
			if m.Content == "looks good to me" || m.Content == "first draft in the thread" {
				t.Errorf("a thread message %q is in #general", m.Content)
			}
		}
	})

	in(t, "a channel's thread list and a reload find the thread", pages, func(t *testing.T) {
		// A fresh load learns of existing threads from GUILD_CREATE's
		// threads, not from a THREAD_CREATE.
		bob.do(navigate(srv.base + general))
		bob.waitJS(messagesContain("general", "alice", starter), wait)
		// Its new gateway session is subscribed once the member list is back.
		bob.waitJS(listJS("Members")+`?.textContent.includes('alice')`, wait)
		bob.click("button", "Threads")
		bob.waitJS(listJS("Active threads in #general")+`?.textContent.includes('Launch plan')`, wait)
		bob.waitFor("list", "Threads in #general", wait)
	})

	in(t, "closing and deleting the thread reach the other screen", pages, func(t *testing.T) {
		// Alice closes it from the thread's header: THREAD_UPDATE
		// (archived) takes it out of bob's sidebar.
		alice.click("button", "Close Thread")
		alice.waitFor("button", "Reopen Thread", wait)
		bob.waitGone("list", "Threads in #general", wait)
		alice.click("button", "Reopen Thread")
		bob.waitFor("list", "Threads in #general", wait)
		// Deleted over REST (a moderator's bot): THREAD_DELETE.
		srv.call(t, "DELETE", "/channels/"+thread, w.alice, nil, nil)
		bob.waitGone("list", "Threads in #general", wait)
		bob.waitGone("link", "Open thread Launch plan", wait)
		// Alice, who had it open, is taken back to its channel.
		alice.waitFor("list", "Messages in #general", wait)
	})
}

// threadEntryJS is JS true when the sidebar lists a thread of #general
// whose entry's name starts with name (" (unread)" may follow).
func threadEntryJS(name string) string {
	return fmt.Sprintf(`(() => { const l = %s; return !!l && [...l.querySelectorAll('a')].some(a => (a.getAttribute('aria-label') || '').startsWith(%q)); })()`,
		listJS("Threads in #general"), name)
}

// TestWebPrivateAndArchivedThreads: alice starts a private thread from a
// channel's thread list; bob, who is not in it, is refused it over REST
// and does not have it in his sidebar until alice adds him (THREAD_CREATE
// reaches him then); a thread archived before either page loaded is
// found in the channel's archived threads.
func TestWebPrivateAndArchivedThreads(t *testing.T) {
	srv := startDev(t)
	w := setupThreads(t, srv)
	var old struct{ ID string }
	srv.call(t, "POST", "/channels/"+w.general+"/threads", w.alice, map[string]any{"name": "Old news", "type": 11}, &old)
	srv.call(t, "PATCH", "/channels/"+old.ID, w.alice, map[string]any{"archived": true}, nil)

	b := newBrowser(t)
	alice, bob := b.page("alice"), b.page("bob")
	pages := []*page{alice, bob}
	general := "/channels/" + w.guild + "/" + w.general
	openAs(alice, srv.base, w.alice, general)
	openAs(bob, srv.base, w.bob, general)
	const wait = 20 * time.Second // a bound on a loaded machine, not an expectation
	alice.waitJS(listJS("Members")+`?.textContent.includes('bob')`, wait)
	bob.waitJS(listJS("Members")+`?.textContent.includes('alice')`, wait)
	// The online header counts both once both are online (its count
	// comes from the update's groups, not from the header item sent when
	// the list was first synced).
	alice.waitJS(listJS("Members")+`?.textContent.includes('Online — 2')`, wait)

	var secret string
	in(t, "alice starts a private thread and adds bob", pages, func(t *testing.T) {
		alice.click("button", "Threads")
		alice.fill("New thread name", "Secret plan")
		alice.click("checkbox", "Private thread")
		alice.click("button", "New Thread")
		alice.waitFor("list", "Messages in #Secret plan", wait)
		secret = eval[string](alice, `location.pathname.split('/')[3]`)
		alice.fill("Message #Secret plan", "only for us")
		alice.enter()
		alice.waitJS(messagesContain("Secret plan", "alice", "only for us")+` && !document.querySelector('li.msg.pending')`, wait)
		// Bob is not in it: the server refuses it, and his sidebar (which
		// has seen alice's session through the member list) lists no thread.
		if got := eval[int](bob, fmt.Sprintf(`(async () => (await fetch('/api/v10/channels/%s', {headers: {Authorization: localStorage.getItem('concord.token')}})).status)()`, secret)); got != 403 {
			t.Fatalf("bob's GET of the private thread answered %d, want 403", got)
		}
		if eval[bool](bob, `!!`+listJS("Threads in #general")) {
			t.Fatal("bob's sidebar lists a private thread he is not in")
		}
		alice.click("button", "Add Member")
		alice.callOn(alice.waitFor("combobox", "Member", wait), `function(v){ this.value = v; this.dispatchEvent(new Event('change', {bubbles: true})); }`, w.bobID)
		alice.click("button", "Add")
		bob.waitJS(threadEntryJS("Secret plan"), wait)
		bob.click("link", "Secret plan (unread)")
		bob.waitJS(messagesContain("Secret plan", "alice", "only for us"), wait)
	})

	in(t, "bob finds the archived thread", pages, func(t *testing.T) {
		bob.do(navigate(srv.base + general))
		bob.waitFor("list", "Messages in #general", wait)
		bob.click("button", "Threads")
		bob.click("button", "Archived Threads")
		bob.waitJS(listJS("Archived threads in #general")+`?.textContent.includes('Old news')`, wait)
		if eval[bool](bob, listJS("Archived threads in #general")+`.textContent.includes('Secret plan')`) {
			t.Error("the open private thread is listed as archived")
		}
		bob.click("link", "🧵 Old news")
		bob.waitFor("list", "Messages in #Old news", wait)
	})
}
