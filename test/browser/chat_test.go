//go:build integration

package browser

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

type world struct {
	srv                              *server
	aliceToken                       string
	guild, general, random, history  string
	secret, roadmap, invite, project string
}

const historySize = 120

// setup makes, over REST, alice's guild with #general, #random, #history
// (120 messages by 24 posters, 5 each, inside the rate limit), a hidden
// #secret and a category "Projects" holding #roadmap, and an invite.
func setup(t testing.TB, srv *server) *world {
	w := &world{srv: srv}
	var reg struct {
		Token string `json:"token"`
	}
	srv.call(t, "POST", "/auth/register", "", map[string]any{"username": "alice", "password": "alice password"}, &reg)
	w.aliceToken = reg.Token
	var g struct{ ID string }
	srv.call(t, "POST", "/guilds", w.aliceToken, map[string]any{"name": "Concord Test"}, &g)
	w.guild = g.ID
	var chans []struct{ ID, Name string }
	srv.call(t, "GET", "/guilds/"+g.ID+"/channels", w.aliceToken, nil, &chans)
	for _, c := range chans {
		if c.Name == "general" {
			w.general = c.ID
		}
	}
	mk := func(body map[string]any) string {
		var c struct{ ID string }
		srv.call(t, "POST", "/guilds/"+g.ID+"/channels", w.aliceToken, body, &c)
		return c.ID
	}
	w.random = mk(map[string]any{"name": "random", "type": 0})
	w.history = mk(map[string]any{"name": "history", "type": 0})
	w.secret = mk(map[string]any{"name": "secret", "type": 0, "permission_overwrites": []map[string]any{
		{"id": g.ID, "type": 0, "allow": "0", "deny": fmt.Sprint(1 << 10)}}})
	w.project = mk(map[string]any{"name": "Projects", "type": 4})
	time.Sleep(2 * time.Second) // channel creation is limited to 5 per 10 s
	w.roadmap = mk(map[string]any{"name": "roadmap", "type": 0, "parent_id": w.project})
	var inv struct{ Code string }
	srv.call(t, "POST", "/channels/"+w.general+"/invites", w.aliceToken, map[string]any{}, &inv)
	w.invite = inv.Code

	const posters = historySize / 5
	tokens := make([]string, posters)
	var wg sync.WaitGroup
	for i := range posters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var r struct{ Token string }
			srv.call(t, "POST", "/auth/register", "", map[string]any{"username": fmt.Sprintf("poster%02d", i), "password": "poster password"}, &r)
			srv.call(t, "POST", "/invites/"+w.invite, r.Token, map[string]any{}, nil)
			tokens[i] = r.Token
		}()
	}
	wg.Wait()
	for n := range historySize {
		srv.call(t, "POST", "/channels/"+w.history+"/messages", tokens[n%posters],
			map[string]any{"content": fmt.Sprintf("history %03d", n)}, nil)
	}
	return w
}

func (w *world) send(t *testing.T, channel, content string) {
	w.srv.call(t, "POST", "/channels/"+channel+"/messages", w.aliceToken, map[string]any{"content": content}, nil)
}

// logIn fills the login form and presses the button (Log In or Register).
func logIn(p *page, base, user, password, button string) {
	p.t.Helper()
	p.do(navigate(base + "/"))
	p.fill("Username", user)
	p.fill("Password", password)
	p.click("button", button)
	p.waitFor("navigation", "Servers", 10*time.Second)
}

// messagesContain is JS true when the message list of the channel has an
// item whose text contains both author and content.
func messagesContain(channel, author, content string) string {
	if !strings.HasPrefix(channel, "@") {
		channel = "#" + channel
	}
	return fmt.Sprintf(`(() => { const l = %s; return l && [...l.children].some(li => li.textContent.includes(%q) && li.textContent.includes(%q)); })()`,
		listJS("Messages in "+channel), author, content)
}

func TestWebChat(t *testing.T) {
	srv := startDev(t)
	start := time.Now()
	w := setup(t, srv)
	t.Logf("setup over REST: %v", time.Since(start))
	b := newBrowser(t)
	t.Logf("browser started: %v", time.Since(start))
	alice, bob, bob2 := b.page("alice"), b.page("bob"), b.page("bob-2")
	pages := []*page{alice, bob, bob2}

	// Log in and register through the form.
	alice.do(navigate(srv.base + "/"))
	alice.waitFor("textbox", "Username", 10*time.Second)
	alice.waitFor("button", "Register", time.Second)
	alice.screenshot("login")
	logIn(alice, srv.base, "alice", "alice password", "Log In")
	logIn(bob, srv.base, "bob", "bob password", "Register")

	// Bob follows the invite link.
	bob.do(navigate(srv.base + "/invite/" + w.invite))
	bob.waitFor("heading", "You're invited to join Concord Test", 10*time.Second)
	bob.click("button", "Accept Invite")
	bob.waitFor("link", "Concord Test", 10*time.Second)
	alice.click("link", "Concord Test")
	alice.waitFor("link", "general", 10*time.Second)
	bob.waitFor("list", "Messages in #general", 10*time.Second)
	alice.waitFor("list", "Messages in #general", 10*time.Second)

	in(t, "chat appears on the other screen within 1s", pages, func(t *testing.T) {
		alice.fill("Message #general", "hello bob")
		alice.enter()
		took := bob.waitJS(messagesContain("general", "alice", "hello bob"), time.Second)
		t.Logf("alice → bob: %v", took)
		alice.waitJS(messagesContain("general", "alice", "hello bob"), time.Second)
		if v := eval[string](alice, `document.querySelector('[aria-label="Message #general"]').value`); v != "" {
			t.Errorf("composer not cleared after send: %q", v)
		}
		bob.fill("Message #general", "hi alice")
		// Typing reaches alice before the message does.
		alice.waitJS(`document.querySelector('.typing').textContent.includes('bob is typing')`, 5*time.Second)
		bob.enter()
		took = alice.waitJS(messagesContain("general", "bob", "hi alice"), time.Second)
		t.Logf("bob → alice: %v", took)
		// Exactly one copy: the optimistic one was replaced, not duplicated.
		n := eval[int](bob, fmt.Sprintf(`[...%s.children].filter(li => li.textContent.includes('hi alice')).length`, listJS("Messages in #general")))
		if n != 1 {
			t.Errorf("bob sees %d copies of his message, want 1", n)
		}
		alice.waitJS(listJS("Members")+`.textContent.includes('bob')`, 5*time.Second)
		alice.screenshot("chat")
	})

	in(t, "reactions show at once and on the other screen", pages, func(t *testing.T) {
		// Alice reacts to bob's message through its actions (shown on hover).
		clickInMessage := func(p *page, text, button string) {
			t.Helper()
			ok := eval[bool](p, fmt.Sprintf(`(() => {
  const li = [...%s.children].find(li => li.textContent.includes(%q));
  const b = li && [...li.querySelectorAll('button')].find(b => b.textContent === %q || b.getAttribute('aria-label') === %q);
  if (b) b.click();
  return !!b;
})()`, listJS("Messages in #general"), text, button, button))
			if !ok {
				p.fatalf("no button %q in the message %q", button, text)
			}
		}
		clickInMessage(alice, "hi alice", "Add Reaction")
		clickInMessage(alice, "hi alice", "React with 👍")
		alice.waitFor("button", "👍, 1 reaction", time.Second)
		bob.waitFor("button", "👍, 1 reaction", 5*time.Second)
		if pressed := eval[string](alice, `document.querySelector('.reaction').getAttribute('aria-pressed')`); pressed != "true" {
			t.Errorf("alice's own reaction is not pressed: %q", pressed)
		}
		// Bob adds his: two on both screens; he takes it back: one again.
		bob.click("button", "👍, 1 reaction")
		bob.waitFor("button", "👍, 2 reactions", time.Second)
		alice.waitFor("button", "👍, 2 reactions", 5*time.Second)
		bob.click("button", "👍, 2 reactions")
		alice.waitFor("button", "👍, 1 reaction", 5*time.Second)
		bob.waitFor("button", "👍, 1 reaction", 5*time.Second)
		if pressed := eval[string](bob, `document.querySelector('.reaction').getAttribute('aria-pressed')`); pressed != "false" {
			t.Errorf("bob's reaction still pressed after he took it back: %q", pressed)
		}
		alice.screenshot("reactions")
	})

	in(t, "channels grouped and hidden channel never appears", pages, func(t *testing.T) {
		alice.waitFor("link", "secret", 5*time.Second)
		w.send(t, w.secret, "top secret words")
		w.send(t, w.general, "after the secret")
		bob.waitJS(messagesContain("general", "alice", "after the secret"), 5*time.Second)
		if ns := bob.query("link", "secret"); len(ns) != 0 {
			t.Fatalf("bob sees a link named secret")
		}
		if eval[bool](bob, `document.body.textContent.includes('secret words') || `+listJS("Channels")+`.textContent.includes('secret')`) {
			t.Fatal("hidden channel or its message leaked into bob's page")
		}
		// #roadmap is inside the "Projects" group.
		if !eval[bool](bob, `[...document.querySelectorAll('ul[aria-labelledby]')].some(u => u.previousElementSibling.textContent === 'Projects' && u.textContent.includes('roadmap'))`) {
			t.Error("#roadmap is not listed under its category Projects")
		}
	})

	in(t, "ack on one screen clears the badge on the other", pages, func(t *testing.T) {
		logIn(bob2, srv.base, "bob", "bob password", "Log In")
		for _, p := range []*page{bob, bob2} {
			p.do(navigate(srv.base + "/channels/" + w.guild + "/" + w.random))
			p.waitFor("list", "Messages in #random", 10*time.Second)
			p.waitFor("link", "general", 10*time.Second)
		}
		var me struct{ ID string }
		srv.call(t, "GET", "/users/@me", bobToken(t, bob), nil, &me)
		w.send(t, w.general, "ping <@"+me.ID+">")
		bob.waitFor("link", "general (unread), 1 mentions", 5*time.Second)
		bob2.waitFor("link", "general (unread), 1 mentions", 5*time.Second)
		bob2.screenshot("unread")
		bob.click("link", "general (unread), 1 mentions")
		bob.waitJS(messagesContain("general", "alice", "ping"), 5*time.Second)
		start := time.Now()
		bob2.waitFor("link", "general", 5*time.Second)
		t.Logf("badge cleared on the other screen %v after the click's page showed the message", time.Since(start))
		// The server agrees: a fresh load shows no badge either.
		bob2.do(navigate(srv.base + "/channels/" + w.guild + "/" + w.random))
		bob2.waitFor("link", "general", 10*time.Second)
	})

	in(t, "scroll-back loads older pages into a virtualised list that keeps the view", pages, func(t *testing.T) {
		bob.click("link", "history (unread)")
		bob.waitFor("list", "Messages in #history", 10*time.Second)
		bob.waitJS(messagesContain("history", "poster", fmt.Sprintf("history %03d", historySize-1)), 5*time.Second)
		// Hold the next older page, so the view is seen before and after
		// the page lands above it.
		held := hold(bob, "*/channels/"+w.history+"/messages?*before=*")
		req := held.next(`(document.querySelector('.scroller').scrollTop = 0, true)`, 20*time.Second)
		before := eval[rowPos](bob, firstInViewJS)
		held.release(req)
		held.stop()
		bob.waitJS(`!document.querySelector('.scroller .loading') && document.querySelector('.scroller').scrollTop > 0`, 10*time.Second)
		after := eval[rowPos](bob, fmt.Sprintf(rowPosJS, before.ID))
		if after.ID == "" || after.Top < before.Top-2 || after.Top > before.Top+2 {
			t.Fatalf("the view jumped when the older page arrived: %s was %.1f px from the top, now %+v", before.Text, before.Top, after)
		}
		t.Logf("%q stayed %.1f px from the top while 50 older messages landed above it", before.Text, after.Top)

		// Scroll to the beginning of the channel.
		bob.waitJS(`(document.querySelector('.scroller').scrollTop = 0, document.querySelector('.start') &&
			`+listJS("Messages in #history")+`.firstElementChild.querySelector('.text').textContent === 'history 000')`, 30*time.Second)
		// Walk down to the end: every message is rendered on the way, in
		// order, with its author, while the DOM holds only the rows near the
		// viewport.
		walk := eval[walked](bob, walkJS(listJS("Messages in #history")))
		if len(walk.Texts) != historySize {
			t.Fatalf("walking the list saw %d messages, want %d: %q", len(walk.Texts), historySize, walk.Texts)
		}
		for i, s := range walk.Texts {
			if want := fmt.Sprintf("history %03d", i); s != want || !strings.HasPrefix(walk.Authors[i], "poster") {
				t.Fatalf("message %d is %q by %q, want %q by a poster", i+1, s, walk.Authors[i], want)
			}
		}
		if walk.SetSize != historySize {
			t.Errorf("aria-setsize %d, want %d", walk.SetSize, historySize)
		}
		if walk.MaxRows >= historySize/2 {
			t.Errorf("the list rendered up to %d of %d rows at once: not virtualised", walk.MaxRows, historySize)
		}
		bob.waitJS(`document.querySelector('.start')`, 5*time.Second)
		bob.screenshot("scrollback")
		t.Logf("walked %d messages in %d steps, at most %d rows in the DOM", len(walk.Texts), walk.Steps, walk.MaxRows)
	})

	in(t, "a message link opens the channel around it", pages, func(t *testing.T) {
		var page []struct{ ID, Content string }
		srv.call(t, "GET", "/channels/"+w.history+"/messages?limit=100", w.aliceToken, nil, &page)
		target := page[len(page)-1] // history 020: older than the newest page
		bob.do(navigate(srv.base + "/channels/" + w.guild + "/" + w.history + "/" + target.ID))
		bob.waitFor("list", "Messages in #history", 10*time.Second)
		bob.waitJS(`document.querySelector('#msg-`+target.ID+`.highlight')`, 5*time.Second)
		// It is on screen, not merely in the DOM.
		bob.waitJS(`(() => { const r = document.querySelector('#msg-`+target.ID+`').getBoundingClientRect(), s = document.querySelector('.scroller').getBoundingClientRect();
			return r.top >= s.top && r.bottom <= s.bottom; })()`, 5*time.Second)
		if eval[bool](bob, messagesContain("history", "poster", fmt.Sprintf("history %03d", historySize-1))) {
			t.Error("the jump loaded the newest page instead of the page around the link")
		}
		bob.click("button", "Jump to present")
		bob.waitJS(messagesContain("history", "poster", fmt.Sprintf("history %03d", historySize-1)), 5*time.Second)
	})

	in(t, "mention autocomplete", pages, func(t *testing.T) {
		alice.click("link", "general")
		alice.fill("Message #general", "thanks @bo")
		alice.waitFor("listbox", "Mention suggestions", 5*time.Second)
		alice.waitFor("option", "@bob", time.Second)
		alice.enter() // picks the suggestion
		if v := eval[string](alice, `document.querySelector('[aria-label="Message #general"]').value`); v != "thanks @bob " {
			t.Fatalf("composer holds %q after picking, want %q", v, "thanks @bob ")
		}
		alice.enter() // sends
		var me struct{ ID string }
		srv.call(t, "GET", "/users/@me", bobToken(t, bob), nil, &me)
		var msgs []struct {
			Content  string
			Mentions []struct{ ID string }
		}
		deadline := time.Now().Add(5 * time.Second)
		for {
			srv.call(t, "GET", "/channels/"+w.general+"/messages?limit=1", w.aliceToken, nil, &msgs)
			if len(msgs) == 1 && strings.HasPrefix(msgs[0].Content, "thanks") {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the message did not arrive: %+v", msgs)
			}
			time.Sleep(20 * time.Millisecond)
		}
		if msgs[0].Content != "thanks <@"+me.ID+">" || len(msgs[0].Mentions) != 1 || msgs[0].Mentions[0].ID != me.ID {
			t.Fatalf("sent %+v, want a mention of bob (%s)", msgs[0], me.ID)
		}
		alice.waitJS(`[...`+listJS("Messages in #general")+`.querySelectorAll('.mention')].some(e => e.textContent === '@bob')`, 5*time.Second)
	})

	in(t, "resume after a dropped socket", pages, func(t *testing.T) {
		bob.click("link", "general (unread), 1 mentions") // alice's autocompleted mention
		bob.waitFor("list", "Messages in #general", 5*time.Second)
		bob.waitFor("link", "general", 5*time.Second)
		eval[bool](bob, `(window.noReload = true)`)
		eval[bool](bob, `(window.concordDebug.dropSocket(), true)`)
		w.send(t, w.general, "sent while bob was away")
		bob.waitJS(messagesContain("general", "alice", "sent while bob was away"), 10*time.Second)
		if !eval[bool](bob, `window.noReload === true`) {
			t.Fatal("the page reloaded")
		}
	})

	in(t, "direct messages", pages, func(t *testing.T) {
		alice.click("link", "general")
		alice.waitJS(listJS("Members")+`.textContent.includes('bob')`, 5*time.Second)
		alice.eval(`[...` + listJS("Members") + `.querySelectorAll('button')].find(b => b.textContent.startsWith('bob')).click()`)
		alice.click("button", "Message")
		alice.waitFor("textbox", "Message @bob", 10*time.Second)
		alice.fill("Message @bob", "psst, bob")
		alice.enter()
		bob.click("link", "Direct Messages")
		bob.click("link", "alice (unread)")
		bob.waitJS(messagesContain("@alice", "alice", "psst, bob"), 5*time.Second)
		// Reading it acks it: the entry and the DM badge clear.
		bob.waitFor("link", "alice", 5*time.Second)
		bob.waitJS(`!document.querySelector('a[aria-label="Direct Messages"] .badge')`, 5*time.Second)
		bob.screenshot("dm")
	})

	in(t, "owner edits roles and channel permissions", pages, func(t *testing.T) {
		alice.do(navigate(srv.base + "/channels/" + w.guild + "/" + w.roadmap))
		bob.do(navigate(srv.base + "/channels/" + w.guild + "/" + w.general))
		bob.waitFor("link", "roadmap", 10*time.Second)
		alice.click("button", "Server Settings")
		alice.waitFor("dialog", "Server settings", 5*time.Second)
		alice.fill("New role name", "mods")
		alice.click("button", "Create Role")
		alice.waitFor("button", "Delete role mods", 5*time.Second)
		var roles []struct{ Name string }
		srv.call(t, "GET", "/guilds/"+w.guild+"/roles", w.aliceToken, nil, &roles)
		if !strings.Contains(fmt.Sprint(roles), "mods") {
			t.Fatalf("role not created on the server: %v", roles)
		}
		alice.screenshot("server-settings")
		alice.click("button", "Done")
		// Deny View Channels to @everyone on #roadmap: it vanishes from bob's list.
		alice.click("button", "Channel Permissions")
		sel := alice.waitFor("combobox", "View Channels for @everyone", 5*time.Second)
		alice.callOn(sel, `function(){ this.value = "deny"; this.dispatchEvent(new Event("change", {bubbles: true})); }`)
		start := time.Now()
		bob.waitGone("link", "roadmap", 5*time.Second)
		t.Logf("#roadmap left bob's list %v after the overwrite", time.Since(start))
		alice.waitFor("link", "roadmap", time.Second) // the owner still sees it
		alice.click("button", "Done")
	})

	in(t, "create a server", pages, func(t *testing.T) {
		bob.click("button", "Add a Server")
		bob.waitFor("dialog", "Create a server", 5*time.Second)
		bob.fill("Server name", "Bob's Place")
		bob.screenshot("create-server")
		bob.click("button", "Create")
		bob.waitFor("link", "Bob's Place", 5*time.Second)
		bob.waitFor("list", "Messages in #general", 5*time.Second)
		if !strings.Contains(eval[string](bob, `document.querySelector('.guild-head h2').textContent`), "Bob's Place") {
			t.Error("the new server is not open")
		}
	})
}

func bobToken(t *testing.T, p *page) string {
	return eval[string](p, `localStorage.getItem('concord.token')`)
}

func (p *page) eval(js string) { eval[any](p, js) }
