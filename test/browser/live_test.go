//go:build integration

package browser

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/concord-chat/concord/runtime/domain/live/livetest"
	"github.com/concord-chat/concord/web"
)

// liveFront is the origin the browser loads: the web client and the
// live-comments API (which serves /v1/streams/{id}/live too) on one
// listener, restartable on the same address as a server restart is.
type liveFront struct {
	t    testing.TB
	addr string
	h    http.Handler
	mu   sync.Mutex
	srv  *http.Server
	// silent makes /live answer 200 with event-stream headers and then
	// nothing, as a buffering proxy does.
	silent atomic.Bool
}

// Streams' videos come from mediaOrigins (the page's CSP media-src).
func newLiveFront(t testing.TB, e *livetest.Env, mediaOrigins ...string) *liveFront {
	mux := http.NewServeMux()
	mux.Handle("/v1/", e.API)
	mux.Handle("/", web.Handler(web.Options{MediaSrc: mediaOrigins}))
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &liveFront{t: t, addr: l.Addr().String()}
	f.h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if f.silent.Load() && strings.HasSuffix(r.URL.Path, "/live") {
			w.Header().Set("Content-Type", "text/event-stream")
			w.WriteHeader(http.StatusOK)
			w.(http.Flusher).Flush()
			<-r.Context().Done()
			return
		}
		mux.ServeHTTP(w, r)
	})
	f.serve(l)
	t.Cleanup(f.stop)
	return f
}

func (f *liveFront) base() string { return "http://" + f.addr }

func (f *liveFront) serve(l net.Listener) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.srv = &http.Server{Handler: f.h}
	go f.srv.Serve(l)
}

// stop closes the listener and every connection, SSE streams included.
func (f *liveFront) stop() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.srv != nil {
		f.srv.Close()
		f.srv = nil
	}
}

// openLive loads /live/<stream> logged in with token ("" for anonymous).
func openLive(p *page, base, token, stream, query string) {
	p.t.Helper()
	p.do(navigate(base + "/"))
	tok, _ := json.Marshal(token)
	if token != "" {
		eval[bool](p, fmt.Sprintf(`(localStorage.setItem("concord.token", %s), true)`, tok))
	}
	p.do(navigate(base + "/live/" + stream + query))
	p.waitFor("list", "Live comments", 10*time.Second)
}

var liveList = listJS("Live comments")

// liveTexts is the comments on screen, in order.
func liveTexts(p *page) []string {
	return eval[[]string](p, `[...`+liveList+`.querySelectorAll("li .text")].map(e => e.textContent)`)
}

func liveHas(text string) string {
	b, _ := json.Marshal(text)
	return `[...` + liveList + `.querySelectorAll("li .text")].some(e => e.textContent === ` + string(b) + `)`
}

func countText(texts []string, s string) int {
	n := 0
	for _, x := range texts {
		if x == s {
			n++
		}
	}
	return n
}

// liveREST calls the live-comments API (/v1) of base.
type liveREST struct {
	t    testing.TB
	base string
}

func (l liveREST) do(method, path, token string, body any) (int, []byte) {
	l.t.Helper()
	var rd io.Reader
	if body != nil {
		j, _ := json.Marshal(body)
		rd = bytes.NewReader(j)
	}
	req, _ := http.NewRequest(method, l.base+path, rd)
	if token != "" {
		req.Header.Set("Authorization", token)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		l.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, b
}

func (l liveREST) post(token, stream, text string, vts int64) livetest.Comment {
	l.t.Helper()
	st, b := l.do("POST", "/v1/streams/"+stream+"/comments", token, map[string]any{"text": text, "video_ts_ms": vts})
	if st != http.StatusCreated {
		l.t.Fatalf("post %q = %d %s", text, st, b)
	}
	var c livetest.Comment
	if err := json.Unmarshal(b, &c); err != nil {
		l.t.Fatal(err)
	}
	return c
}

// TestLivePage runs the live viewer against `concord dev` (the
// live-comments roles on their embedded backends) in two browser
// contexts: the stream's creator and a viewer.
func TestLivePage(t *testing.T) {
	srv := startDev(t)
	reg := func(name string) string {
		var r struct{ Token string }
		srv.call(t, "POST", "/auth/register", "", map[string]any{"username": name, "password": name + " password"}, &r)
		return r.Token
	}
	creator, viewer := reg("creator"), reg("viewer")
	l := liveREST{t: t, base: srv.base}
	b := newBrowser(t)
	pv := b.page("viewer")
	pc := b.page("creator")
	// The creator starts the stream from the page at /live.
	pc.do(navigate(srv.base + "/"))
	tok, _ := json.Marshal(creator)
	eval[bool](pc, `(localStorage.setItem("concord.token", `+string(tok)+`), true)`)
	pc.do(navigate(srv.base + "/live"))
	pc.fill("Stream title", "Launch day")
	pc.click("button", "Start Stream")
	pc.waitFor("list", "Live comments", 10*time.Second)
	id := eval[string](pc, `location.pathname.split("/")[2] || ""`)
	code, body := l.do("GET", "/v1/streams/"+id, "", nil)
	var st livetest.Stream
	json.Unmarshal(body, &st)
	if code != http.StatusOK || st.Title != "Launch day" || st.State != "live" {
		t.Fatalf("the stream started from the page: GET %s = %d %s", id, code, body)
	}
	openLive(pv, srv.base, viewer, st.ID, "")
	pages := []*page{pv, pc}
	status := func(p *page, want string) {
		p.t.Helper()
		b, _ := json.Marshal(want)
		p.waitJS(`document.querySelector(".live-status").textContent === `+string(b), 15*time.Second)
	}

	in(t, "ReceivesComments", pages, func(t *testing.T) {
		status(pv, "Live")
		start := time.Now()
		l.post(creator, st.ID, "welcome to the launch", 0)
		pv.waitJS(liveHas("welcome to the launch"), 5*time.Second)
		t.Logf("creator's comment on the viewer's screen after %v", time.Since(start))
		if d := time.Since(start); d > time.Second {
			t.Errorf("comment took %v to appear, want < 1 s", d)
		}
	})

	in(t, "OwnCommentAtOnceMatchedById", pages, func(t *testing.T) {
		pv.fill("Comment", "hello from the viewer")
		// Click Send and watch the list: the row is inserted before any
		// answer came back (still pending when it appears: a
		// MutationObserver sees it in the microtasks after the render,
		// before the POST's answer, a later task, can be handled), and
		// stays the same element once the broadcast copy arrives. Looking
		// at the next animation frame instead was racy on a loaded
		// machine, where the answer can come before the frame.
		shown := eval[bool](pv, `(async () => {
			const list = `+liveList+`;
			const own = () => [...list.querySelectorAll("li")].find(li => li.querySelector(".text")?.textContent === "hello from the viewer");
			const seen = new Promise(res => {
				const mo = new MutationObserver(() => { const row = own(); if (row) { mo.disconnect(); res(row.classList.contains("pending")); window.__own = row; } });
				mo.observe(list, {childList: true, subtree: true, characterData: true});
			});
			const btn = [...document.querySelectorAll("button")].find(b => b.textContent.trim() === "Send");
			btn.click();
			return await seen;
		})()`)
		if !shown {
			t.Fatal("own comment was not rendered (pending) before the server answered")
		}
		pv.waitJS(`window.__own.isConnected && window.__own.dataset.id && !window.__own.classList.contains("pending")`, 5*time.Second)
		// The broadcast copy (same id) reached the creator; the viewer
		// still has one row for it, the one typed.
		pc.waitJS(liveHas("hello from the viewer"), 5*time.Second)
		time.Sleep(600 * time.Millisecond) // two gateway flushes: a duplicate would have landed
		if n := countText(liveTexts(pv), "hello from the viewer"); n != 1 {
			t.Fatalf("own comment shown %d times, want 1", n)
		}
		if !eval[bool](pv, `window.__own.isConnected`) {
			t.Fatal("own comment's row was replaced when the broadcast copy arrived")
		}
		pv.screenshot("live-viewer")
	})

	in(t, "RetractionWithinOneSecond", pages, func(t *testing.T) {
		c := l.post(creator, st.ID, "this will be taken down", 0)
		pv.waitJS(liveHas(c.Text), 5*time.Second)
		start := time.Now()
		if code, body := l.do("DELETE", "/v1/streams/"+st.ID+"/comments/"+c.ID, creator, map[string]any{"reason": "test"}); code != http.StatusNoContent {
			t.Fatalf("retract = %d %s", code, body)
		}
		pv.waitJS("!"+liveHas(c.Text), 5*time.Second)
		d := time.Since(start)
		t.Logf("retraction gone from the viewer's screen after %v", d)
		if d > time.Second {
			t.Errorf("retraction took %v, want < 1 s", d)
		}
	})

	in(t, "SurvivesServerRestartWithResume", pages, func(t *testing.T) {
		eval[bool](pv, `(window.__sameDocument = true)`)
		before := liveTexts(pv)
		srv.kill()
		status(pv, "Connecting…")
		srv.restart(t)
		// Posted at once after the restart: the page is still waiting
		// to reconnect, or has; either way each shows exactly once.
		missed := []string{"after restart one", "after restart two", "after restart three"}
		for _, m := range missed {
			l.post(creator, st.ID, m, 0)
		}
		for _, m := range missed {
			pv.waitJS(liveHas(m), 20*time.Second)
		}
		status(pv, "Live")
		if !eval[bool](pv, `window.__sameDocument === true`) {
			t.Fatal("the page reloaded")
		}
		time.Sleep(600 * time.Millisecond)
		after := liveTexts(pv)
		for _, s := range append(before, missed...) {
			if n := countText(after, s); n != 1 {
				t.Errorf("%q shown %d times after the restart, want 1 (screen: %q)", s, n, after)
			}
		}
		if !eval[bool](pv, `window.concordLive.lastId > 0`) {
			t.Error("no resume point kept")
		}
	})

	in(t, "Reactions", pages, func(t *testing.T) {
		// Own taps show at once; the batch (every 2 s) reaches the other
		// viewer as a reactions event, drawn as bursts there.
		got := eval[int](pv, `(async () => {
			const btn = [...document.querySelectorAll("button")].find(b => b.getAttribute("aria-label") === "Heart");
			for (let i = 0; i < 5; i++) btn.click();
			await new Promise(r => requestAnimationFrame(() => r()));
			return document.querySelectorAll(".burst.own").length;
		})()`)
		if got < 5 {
			t.Fatalf("%d own bursts after 5 taps, want 5", got)
		}
		pc.waitJS(`document.querySelectorAll(".burst:not(.own)").length > 0`, 8*time.Second)
		pc.screenshot("live-reactions")
	})

	in(t, "ViewerCount", pages, func(t *testing.T) {
		pv.waitJS(`/^[1-9]\d* watching$/.test(document.querySelector(".viewers").textContent)`, 20*time.Second)
	})

	in(t, "CreatorModeration", pages, func(t *testing.T) {
		if len(pv.query("form", "Moderation")) != 0 {
			t.Error("a viewer sees the moderation controls")
		}
		pc.waitFor("form", "Moderation", 5*time.Second)
		pc.screenshot("live-creator")
		// Ban the viewer with remove_recent: the viewer's comments are
		// retracted on both screens and the next post is refused. (A
		// comment sent by this server process: one from before the
		// restart was delivered by the previous process, which alone knew
		// who was sent it.)
		vc := l.post(viewer, st.ID, "the viewer speaks again", 0)
		pc.waitJS(liveHas(vc.Text), 5*time.Second)
		pv.waitJS(liveHas(vc.Text), 5*time.Second)
		pc.click("button", `Ban viewer for "`+vc.Text+`"`)
		pv.waitJS("!"+liveHas(vc.Text), 5*time.Second)
		pc.waitJS("!"+liveHas(vc.Text), 5*time.Second)
		pv.fill("Comment", "am I still here")
		pv.click("button", "Send")
		pv.waitJS(`[...document.querySelectorAll("[role=alert]")].some(e => /banned/i.test(e.textContent))`, 5*time.Second)
		if countText(liveTexts(pv), "am I still here") != 0 {
			t.Error("a refused comment stayed on screen")
		}
		// Blocked terms from the form.
		pc.fill("Blocked terms (one a line)", "forbiddenword")
		pc.click("button", "Save Moderation")
		pc.waitJS(`document.querySelector(".moderation [role=status]").textContent === "Saved."`, 5*time.Second)
		if code, body := l.do("POST", "/v1/streams/"+st.ID+"/comments", creator, map[string]any{"text": "a forbiddenword here", "video_ts_ms": 0}); code != http.StatusBadRequest {
			t.Errorf("blocked term set from the page: post = %d %s, want 400", code, body)
		}
		// Retract from the page.
		c := l.post(creator, st.ID, "retract me from the page", 0)
		pc.waitJS(liveHas(c.Text), 5*time.Second)
		pc.click("button", `Retract "`+c.Text+`" by creator`)
		pv.waitJS("!"+liveHas(c.Text), 5*time.Second)
	})
}

// TestLiveReplay plays an ended stream's recording: each comment shows
// only once the playhead passes its video_ts_ms.
func TestLiveReplay(t *testing.T) {
	dir := t.TempDir()
	// A 12 s VP8 test pattern, the stream's "recording".
	out, err := exec.Command("ffmpeg", "-hide_banner", "-loglevel", "error", "-f", "lavfi", "-i", "testsrc=size=320x180:rate=10",
		"-t", "12", "-c:v", "libvpx", "-b:v", "100k", filepath.Join(dir, "rec.webm")).CombinedOutput()
	if err != nil {
		t.Fatalf("ffmpeg (hack/test-deps.sh installs it): %v\n%s", err, out)
	}
	e := livetest.Start(t, livetest.Backends{}, livetest.TestOptions())
	creator := e.NewUser()
	st := e.CreateStream(creator, "Recorded")
	for _, ts := range []int64{500, 2500, 5000} {
		e.Post(creator, st.ID, fmt.Sprintf("at %d ms", ts), ts)
	}
	if r := e.Do("POST", "/v1/streams/"+st.ID+"/end", creator.Token, nil); r.Status != http.StatusOK {
		t.Fatalf("end = %d %s", r.Status, r.Body)
	}
	// The archiver stores asynchronously: wait until replay reads all three.
	e.Eventually(10*time.Second, func() string {
		r := e.Do("GET", "/v1/streams/"+st.ID+"/comments?after_video_ts=-1&limit=10", "", nil)
		var cs []livetest.Comment
		if r.Status == 200 {
			r.JSON(t, &cs)
		}
		if len(cs) < 3 {
			return fmt.Sprintf("%d comments in the store", len(cs))
		}
		return ""
	})
	// The recording is on a media server of its own origin, which the web
	// client's media-src lists (web.Options.MediaSrc): without it the
	// video would never load.
	media := httptest.NewServer(http.FileServer(http.Dir(dir)))
	t.Cleanup(media.Close)
	front := newLiveFront(t, e, media.URL)
	// The creator sets the stream's video: the page plays stream_url.
	if r := e.Do("PATCH", "/v1/streams/"+st.ID, creator.Token, map[string]any{"stream_url": media.URL + "/rec.webm"}); r.Status != http.StatusOK {
		t.Fatalf("set stream_url = %d %s", r.Status, r.Body)
	}
	b := newBrowser(t)
	p := b.page("replay")
	openLive(p, front.base(), "", st.ID, "")
	p.waitJS(`document.querySelector(".live-status").textContent === "Replay"`, 10*time.Second)
	v := `document.querySelector("video")`
	p.waitJS(v+`.readyState >= 2`, 10*time.Second)
	// Paused at 0: nothing yet. Seek to 3 s: the first two.
	eval[bool](p, `(`+v+`.pause(), `+v+`.currentTime = 0, true)`)
	// Await the page acting on that playhead: the seek done, playhead 0
	// applied, and all three comments fetched and held back.
	p.waitJS(`!`+v+`.seeking && (r => r.playheadMs === 0 && r.settled && r.held === 3)(window.concordLive.replayProgress)`, 20*time.Second)
	if got := liveTexts(p); len(got) != 0 {
		t.Fatalf("at 0 s the replay shows %q, want nothing", got)
	}
	eval[bool](p, `(`+v+`.currentTime = 3, true)`)
	p.waitJS(liveHas("at 2500 ms"), 5*time.Second)
	if got := liveTexts(p); countText(got, "at 5000 ms") != 0 || countText(got, "at 500 ms") != 1 {
		t.Fatalf("at 3 s the replay shows %q, want the 500 and 2500 ms comments only", got)
	}
	// Play on: the 5 s comment comes when the playhead passes it.
	eval[bool](p, `(`+v+`.play(), true)`)
	p.waitJS(liveHas("at 5000 ms"), 10*time.Second)
	if at := eval[float64](p, v+`.currentTime`); at < 5 {
		t.Fatalf("the 5000 ms comment showed at playhead %.2f s", at)
	}
	// Seek back: the list starts over from there.
	eval[bool](p, `(`+v+`.pause(), `+v+`.currentTime = 1, true)`)
	p.waitJS("!"+liveHas("at 2500 ms")+" && "+liveHas("at 500 ms"), 5*time.Second)
	p.screenshot("live-replay")
	if got := liveTexts(p); strings.Join(got, ",") != "at 500 ms" {
		t.Fatalf("after seeking to 1 s the replay shows %q, want the 500 ms comment only", got)
	}
}

// TestLivePollingFallback silences the event stream (headers, then
// nothing, as a buffering proxy would): after 20 s without an event the
// page polls the store, shows new comments and drops retracted ones, and
// goes back to the stream once it speaks again.
func TestLivePollingFallback(t *testing.T) {
	e := livetest.Start(t, livetest.Backends{}, livetest.TestOptions())
	creator := e.NewUser()
	st := e.CreateStream(creator, "Behind a proxy")
	old := e.Post(creator, st.ID, "before the silence", 0)
	front := newLiveFront(t, e)
	front.silent.Store(true)
	b := newBrowser(t)
	p := b.page("viewer")
	openLive(p, front.base(), "", st.ID, "")
	start := time.Now()
	p.waitJS(`document.querySelector(".live-status").textContent.startsWith("Reconnecting (polling)")`, 30*time.Second)
	if d := time.Since(start); d < 19*time.Second {
		t.Errorf("polling began after %v of silence, want about 20 s", d)
	}
	t.Logf("polling after %v of silence", time.Since(start))
	p.waitJS(liveHas(old.Text), 5*time.Second)
	c := e.Post(creator, st.ID, "delivered by polling", 0)
	p.waitJS(liveHas(c.Text), 10*time.Second)
	if r := e.Do("DELETE", "/v1/streams/"+st.ID+"/comments/"+old.ID, creator.Token, map[string]any{}); r.Status != http.StatusNoContent {
		t.Fatalf("retract = %d %s", r.Status, r.Body)
	}
	p.waitJS("!"+liveHas(old.Text), 10*time.Second)
	front.silent.Store(false)
	p.waitJS(`document.querySelector(".live-status").textContent === "Live"`, 20*time.Second)
	c2 := e.Post(creator, st.ID, "back on the stream", 0)
	p.waitJS(liveHas(c2.Text), 5*time.Second)
	if n := countText(liveTexts(p), c.Text); n != 1 {
		t.Errorf("%q shown %d times, want 1", c.Text, n)
	}
}
