//go:build integration

package browser

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	cdppage "github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
)

// standInPaintedJS resolves with the message texts the browser reports as
// painted (Element Timing) inside the boot script's stand-in list, once
// there is one.
const standInPaintedJS = `new Promise(res => {
  new PerformanceObserver(l => {
    const t = l.getEntries().filter(e => e.identifier === 'message' && e.element && e.element.closest('#boot')).map(e => e.element.textContent);
    if (t.length) res(t);
  }).observe({type: 'element', buffered: true});
})`

// TestStandInList holds the web client's bundle back and checks that the
// boot script alone paints the channel URL's newest messages (the list
// named as the pane's, each row with its author and text, reported painted
// by the browser), and that once the bundle runs its pane replaces the
// stand-in: one list of that name at every moment, the composer working.
func TestStandInList(t *testing.T) {
	srv := startDev(t)
	var reg struct{ Token string }
	srv.call(t, "POST", "/auth/register", "", map[string]any{"username": "alice", "password": "alice password"}, &reg)
	var g struct{ ID string }
	srv.call(t, "POST", "/guilds", reg.Token, map[string]any{"name": "Stand-in"}, &g)
	var chans []struct{ ID, Name string }
	srv.call(t, "GET", "/guilds/"+g.ID+"/channels", reg.Token, nil, &chans)
	general := ""
	for _, c := range chans {
		if c.Name == "general" {
			general = c.ID
		}
	}
	for i := range 3 {
		srv.call(t, "POST", "/channels/"+general+"/messages", reg.Token, map[string]any{"content": fmt.Sprintf("before the bundle %d", i)}, nil)
	}

	br := newBrowser(t)
	p := br.page("alice")
	p.do(navigate(srv.base + "/"))
	eval[bool](p, fmt.Sprintf(`(localStorage.setItem('concord.token', %q), true)`, reg.Token))
	// The bundle comes from the network, where it is held.
	if _, err := chromedp.Call(p.ctx, network.SetCacheDisabled, network.SetCacheDisabledParams{CacheDisabled: true}); err != nil {
		t.Fatal(err)
	}
	bundle := hold(p, "*/assets/main-*.js")
	defer bundle.stop()
	// Navigate without waiting for the load event, which the held module
	// script delays.
	ctx, cancel := context.WithTimeout(p.ctx, 20*time.Second)
	_, err := chromedp.Call(ctx, cdppage.Navigate, cdppage.NavigateParams{URL: srv.base + "/channels/" + g.ID + "/" + general})
	cancel()
	if err != nil {
		t.Fatalf("navigate: %v", err)
	}
	req := bundle.next("", 20*time.Second)

	// With no bundle: the stand-in list, painted. (The accessibility tree
	// is not queried here: Chromium answers that query only once the
	// document has loaded, which the held module script delays.)
	p.waitJS(listJS("Messages in #general")+`?.children.length === 3`, 20*time.Second)
	for i := range 3 {
		if !eval[bool](p, messagesContain("general", "alice", fmt.Sprintf("before the bundle %d", i))) {
			t.Fatalf("the stand-in list lacks message %d by alice: %s", i, eval[string](p, listJS("Messages in #general")+".textContent"))
		}
	}
	painted := eval[[]string](p, standInPaintedJS)
	if len(painted) == 0 || !strings.Contains(strings.Join(painted, " "), "before the bundle") {
		t.Fatalf("the browser reports no stand-in message painted: %q", painted)
	}
	if eval[bool](p, `!!document.querySelector('textarea, input, button, a[href]')`) {
		t.Fatal("the stand-in offers a control: everything to act with is the bundle's")
	}
	// The newest message is in view (the list is pinned to the bottom).
	if !eval[bool](p, `(() => { const s = document.querySelector('#boot .scroller'), li = s.querySelector('li.msg:last-child');
		return li.getBoundingClientRect().bottom <= s.getBoundingClientRect().bottom + 1; })()`) {
		t.Fatal("the stand-in list does not show its newest message")
	}

	// Count the lists of that name on every animation frame from here to
	// the end of the handover.
	eval[bool](p, `(window.__lists = [], (function f() {
		window.__lists.push(document.querySelectorAll('ol[aria-label="Messages in #general"]').length - (getComputedStyle(document.getElementById('app')).visibility === 'hidden' ? document.querySelectorAll('#app ol[aria-label="Messages in #general"]').length : 0));
		if (document.getElementById('boot') || window.__lists.length < 3) requestAnimationFrame(f);
	})(), true)`)
	bundle.release(req)
	p.waitFor("textbox", "Message #general", 20*time.Second)
	p.waitJS(`!document.getElementById('boot') && !document.documentElement.classList.contains('booting')`, 10*time.Second)
	p.waitFor("list", "Messages in #general", 5*time.Second)
	if bad := eval[[]int](p, `window.__lists.filter(n => n !== 1)`); len(bad) > 0 {
		t.Fatalf("visible lists named \"Messages in #general\" during the handover: %v (every frame must have exactly one)", eval[[]int](p, `window.__lists`))
	}
	for i := range 3 {
		if !eval[bool](p, messagesContain("general", "alice", fmt.Sprintf("before the bundle %d", i))) {
			t.Fatalf("the pane lacks message %d after the handover", i)
		}
	}
	// A send needs the session (READY), which may come after the handover.
	p.waitJS(`performance.getEntriesByName('concord:ready').length > 0`, 30*time.Second)
	p.fill("Message #general", "after the handover")
	p.enter()
	p.waitJS(messagesContain("general", "alice", "after the handover")+` && !document.querySelector('li.msg.pending')`, 10*time.Second)
}

// TestStandInNotForHiddenChannel opens a channel the user cannot see by its
// URL: the boot script's reads are refused, and nothing of it is painted.
func TestStandInNotForHiddenChannel(t *testing.T) {
	srv := startDev(t)
	var alice, bob struct{ Token string }
	srv.call(t, "POST", "/auth/register", "", map[string]any{"username": "alice", "password": "alice password"}, &alice)
	srv.call(t, "POST", "/auth/register", "", map[string]any{"username": "bob", "password": "bob password"}, &bob)
	var g struct{ ID string }
	srv.call(t, "POST", "/guilds", alice.Token, map[string]any{"name": "Hidden"}, &g)
	var secret, general struct{ ID string }
	srv.call(t, "POST", "/guilds/"+g.ID+"/channels", alice.Token, map[string]any{"name": "secret", "type": 0, "permission_overwrites": []map[string]any{
		{"id": g.ID, "type": 0, "allow": "0", "deny": fmt.Sprint(1 << 10)}}}, &secret)
	srv.call(t, "POST", "/channels/"+secret.ID+"/messages", alice.Token, map[string]any{"content": "top secret words"}, nil)
	var chans []struct{ ID, Name string }
	srv.call(t, "GET", "/guilds/"+g.ID+"/channels", alice.Token, nil, &chans)
	for _, c := range chans {
		if c.Name == "general" {
			general.ID = c.ID
		}
	}
	var inv struct{ Code string }
	srv.call(t, "POST", "/channels/"+general.ID+"/invites", alice.Token, map[string]any{}, &inv)
	srv.call(t, "POST", "/invites/"+inv.Code, bob.Token, map[string]any{}, nil)

	br := newBrowser(t)
	p := br.page("bob")
	p.do(navigate(srv.base + "/"))
	eval[bool](p, fmt.Sprintf(`(localStorage.setItem('concord.token', %q), true)`, bob.Token))
	p.do(navigate(srv.base + "/channels/" + g.ID + "/" + secret.ID))
	// The app settles on the guild (READY came), and the hidden channel's
	// name was never on the page.
	p.waitFor("link", "general", 20*time.Second)
	if eval[bool](p, `!!document.getElementById('boot') || document.body.textContent.includes('secret')`) {
		t.Fatal("the hidden channel's stand-in or name is on the page")
	}
	if eval[int](p, `performance.getEntriesByName('concord:standin').length`) != 0 {
		t.Fatal("the boot script painted a stand-in for a channel the user cannot read")
	}
}
