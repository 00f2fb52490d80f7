//go:build integration

package browser

import (
	"fmt"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/fetch"
	"github.com/chromedp/chromedp"
)

// held pauses a page's requests matching a pattern until released.
type held struct {
	p    *page
	reqs chan fetch.EventRequestPaused
	done chan struct{}
}

// hold starts pausing the page's requests whose URL matches pattern
// (Fetch domain glob).
func hold(p *page, pattern string) *held {
	p.t.Helper()
	h := &held{p: p, reqs: make(chan fetch.EventRequestPaused, 16), done: make(chan struct{})}
	events := chromedp.Events(p.ctx, fetch.RequestPaused)
	if _, err := chromedp.Call(p.ctx, fetch.Enable, fetch.EnableParams{Patterns: []*fetch.RequestPattern{{URLPattern: pattern}}}); err != nil {
		p.fatalf("fetch.enable: %v", err)
	}
	go func() {
		for ev, err := range events {
			if err != nil {
				return
			}
			select {
			case h.reqs <- ev:
			case <-h.done:
				return
			}
		}
	}()
	return h
}

// next waits for the next paused request, evaluating poke (JavaScript
// that makes the page send it; "" for none) every 100 ms until it comes.
func (h *held) next(poke string, timeout time.Duration) fetch.EventRequestPaused {
	h.p.t.Helper()
	deadline := time.After(timeout)
	for {
		if poke != "" {
			eval[any](h.p, poke)
		}
		select {
		case ev := <-h.reqs:
			return ev
		case <-time.After(100 * time.Millisecond):
		case <-deadline:
			h.p.fatalf("no request paused within %v; the page: %s", timeout, eval[string](h.p, paneStateJS))
			return fetch.EventRequestPaused{}
		}
	}
}

// paneStateJS describes the message pane, for failure messages.
const paneStateJS = `(() => {
  const s = document.querySelector('.scroller');
  if (!s) return 'no message pane';
  const rows = s.querySelectorAll('li.msg');
  return JSON.stringify({scrollTop: s.scrollTop, scrollHeight: s.scrollHeight, clientHeight: s.clientHeight,
    rows: rows.length, first: rows[0]?.textContent.slice(0, 60), loading: !!s.querySelector('.loading'),
    start: !!s.querySelector('.start'), error: s.querySelector('.error')?.textContent});
})()`

// release lets a paused request go on to the server.
func (h *held) release(ev fetch.EventRequestPaused) {
	h.p.t.Helper()
	if _, err := chromedp.Call(h.p.ctx, fetch.ContinueRequest, fetch.ContinueRequestParams{RequestID: ev.RequestID}); err != nil {
		h.p.fatalf("fetch.continueRequest: %v", err)
	}
}

// stop ends the pausing.
func (h *held) stop() {
	h.p.t.Helper()
	close(h.done)
	if _, err := chromedp.Call(h.p.ctx, fetch.Disable, cdp.Empty{}); err != nil {
		h.p.fatalf("fetch.disable: %v", err)
	}
}

// rowPos is a message row and its top relative to the message pane's
// viewport.
type rowPos struct {
	ID   string  `json:"id"`
	Text string  `json:"text"`
	Top  float64 `json:"top"`
}

// firstInViewJS is the first message row whose bottom is below the top of
// the message pane's viewport.
const firstInViewJS = `(() => {
  const s = document.querySelector('.scroller'), top = s.getBoundingClientRect().top;
  for (const li of s.querySelectorAll('li.msg')) {
    const r = li.getBoundingClientRect();
    if (r.bottom > top) return {id: li.dataset.id, text: li.querySelector('.text').textContent, top: r.top - top};
  }
  return {};
})()`

// rowPosJS (with the message id) is that row's position, if rendered.
const rowPosJS = `(() => {
  const s = document.querySelector('.scroller'), li = s.querySelector('li.msg[data-id="%s"]');
  if (!li) return {};
  return {id: li.dataset.id, text: li.querySelector('.text').textContent, top: li.getBoundingClientRect().top - s.getBoundingClientRect().top};
})()`

// walked is what walkJS saw.
type walked struct {
	Texts   []string `json:"texts"`
	Authors []string `json:"authors"`
	SetSize int      `json:"setSize"`
	MaxRows int      `json:"maxRows"`
	Steps   int      `json:"steps"`
}

// walkJS scrolls the message pane from the top to the bottom half a
// viewport at a time, waiting two animation frames after each step (the
// scroll event and the render it causes come before the next frame), and
// records every row by its aria-posinset.
func walkJS(list string) string {
	return fmt.Sprintf(`(async () => {
  const s = document.querySelector('.scroller'), l = %s;
  const texts = [], authors = [];
  let maxRows = 0, steps = 0, setSize = 0;
  s.scrollTop = 0;
  for (;;) {
    await new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)));
    const rows = [...l.children];
    maxRows = Math.max(maxRows, rows.length);
    for (const li of rows) {
      const i = +li.getAttribute('aria-posinset') - 1;
      setSize = +li.getAttribute('aria-setsize');
      if (i >= 0) { texts[i] = li.querySelector('.text').textContent; authors[i] = li.querySelector('.author').textContent; }
    }
    if (s.scrollTop + s.clientHeight >= s.scrollHeight - 1 || ++steps > 1000) break;
    s.scrollTop += s.clientHeight / 2;
  }
  return {texts: [...texts].map(t => t ?? ''), authors: [...authors].map(a => a ?? ''), setSize, maxRows, steps};
})()`, list)
}
