//go:build integration

package browser

import (
	"context"
	"encoding/json"
	"fmt"
	"math/big"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/fetch"
	"github.com/chromedp/cdproto/heapprofiler"
	cdpruntime "github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

// synthetic answers the tab's scroll-back requests for one channel with
// generated pages (50 messages with ids just below `before`) until total
// messages were served, then an empty page. The server's rate limits make
// 10,000 real messages an hour's work; the client's memory does not care
// where the JSON came from.
func synthetic(b *testing.B, p *page, channel string, total int) *atomic.Int64 {
	served := &atomic.Int64{}
	ctx := p.ctx
	if _, err := chromedp.Call(ctx, fetch.Enable, fetch.EnableParams{Patterns: []*fetch.RequestPattern{
		{URLPattern: "*/channels/" + channel + "/messages?*before=*"},
	}}); err != nil {
		b.Fatal(err)
	}
	events := chromedp.Events(ctx, fetch.RequestPaused)
	go func() {
		for ev, err := range events {
			if err != nil {
				return
			}
			u, _ := url.Parse(ev.Request.URL)
			before, _ := new(big.Int).SetString(u.Query().Get("before"), 10)
			page := []map[string]any{}
			for i := 0; i < 50 && served.Load() < int64(total); i++ {
				id := new(big.Int).Sub(before, big.NewInt(int64(i+1)<<22))
				n := served.Add(1)
				page = append(page, map[string]any{
					"id": id.String(), "channel_id": channel, "type": 0, "tts": false, "pinned": false,
					"author":    map[string]any{"id": "1000", "username": fmt.Sprintf("user%02d", n%40), "discriminator": "0", "global_name": nil, "avatar": nil},
					"content":   fmt.Sprintf("synthetic message %d: the quick brown fox jumps over the lazy dog", n),
					"timestamp": "2026-01-01T00:00:00.000000+00:00", "edited_timestamp": nil,
					"mention_everyone": false, "mentions": []any{}, "mention_roles": []any{}, "attachments": []any{}, "embeds": []any{},
				})
			}
			body, _ := json.Marshal(page)
			chromedp.Call(ctx, fetch.FulfillRequest, fetch.FulfillRequestParams{
				RequestID: ev.RequestID, ResponseCode: 200, Body: body,
				ResponseHeaders: []*fetch.HeaderEntry{{Name: "Content-Type", Value: "application/json"}},
			})
		}
	}()
	return served
}

// evalSlow is eval for a page whose frames may take seconds (the peer
// rendering every one of 10,000 messages).
func evalSlow[T any](p *page, js string) T {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, 3*time.Minute)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](js, chromedp.EvalAwaitPromise))
	if err != nil {
		p.fatalf("eval %s: %v", js, err)
	}
	return v
}

// heap is the tab's used JavaScript heap after a full collection, the used
// size of Blink's own garbage-collected heap (where DOM nodes live), and
// its DOM element count.
func heap(b *testing.B, p *page) (float64, float64, int) {
	if _, err := chromedp.Call(p.ctx, heapprofiler.CollectGarbage, cdp.Empty{}); err != nil {
		b.Fatal(err)
	}
	u, err := chromedp.Call(p.ctx, cdpruntime.GetHeapUsage, cdp.Empty{})
	if err != nil {
		b.Fatal(err)
	}
	return u.UsedSize, u.EmbedderHeapUsedSize, eval[int](p, `document.getElementsByTagName('*').length`)
}

// fpsJS scrolls the message pane up and down for 3 s, one step per
// animation frame, and resolves with the frames per second achieved.
const fpsJS = `new Promise(res => {
  const el = document.querySelector('.scroller');
  const t0 = performance.now();
  let frames = 0;
  const step = (t) => {
    frames++;
    const phase = ((t - t0) / 1500) % 2;
    const span = Math.max(0, el.scrollHeight - el.clientHeight);
    el.scrollTop = span * (phase < 1 ? 1 - phase : phase - 1);
    if (t - t0 < 3000) requestAnimationFrame(step);
    else res(frames / ((t - t0) / 1000));
  };
  requestAnimationFrame(step);
})`

// scrollBackJS scrolls the message pane to the top on every animation
// frame for up to 5 s, and resolves true once the beginning of the
// channel is shown (every synthetic page was loaded).
const scrollBackJS = `new Promise(res => {
  const t0 = performance.now();
  const step = () => {
    if (document.querySelector('.start')) return res(true);
    if (performance.now() - t0 > 5000) return res(false);
    document.querySelector('.scroller').scrollTop = 0;
    requestAnimationFrame(step);
  };
  step();
})`

// BenchmarkScrollBack measures a tab that scrolled back through 10,000
// messages (JS heap and DOM size, beside the same tab holding the first
// page) and the frame rate while the pane scrolls, in a quiet channel,
// while ~19 messages/s arrive in it, and holding 10,000 messages (the
// "10k" metrics: at msgs-loaded when the peer ran out of its 5 minutes). The peer
// in the same run is the same client with the list's virtualisation
// switched off (localStorage concord.virtualList = off: every loaded
// message rendered).
//
//	. ~/.cache/concord/test-env.sh && go test -tags integration ./test/browser -run '^$' -bench ScrollBack -benchtime 1x
func BenchmarkScrollBack(b *testing.B) {
	srv := startDev(b)
	w := setup(b, srv)
	br := newBrowser(b)
	tokens := make([]string, 24)
	for i := range tokens {
		tokens[i] = tokenFor(b, srv, i)
	}
	const total = 10000
	for _, mode := range []string{"virtual", "all"} {
		b.Run(mode, func(b *testing.B) {
			p := br.page("alice-" + mode)
			p.t = b
			p.do(navigate(srv.base + "/"))
			eval[bool](p, fmt.Sprintf(`(localStorage.setItem('concord.token', %q), true)`, w.aliceToken))
			if mode == "all" {
				eval[bool](p, `(localStorage.setItem('concord.virtualList', 'off'), true)`)
			}
			for b.Loop() {
				served := synthetic(b, p, w.history, total)
				p.do(navigate(srv.base + "/channels/" + w.guild + "/" + w.history))
				p.waitFor("list", "Messages in #history", 10*time.Second)
				p.waitJS(listJS("Messages in #history")+".children.length > 0", 10*time.Second)
				heap0, blink0, dom0 := heap(b, p)
				quiet := eval[float64](p, fpsJS)

				// Busy: 24 posters, one message every 1.25 s each, while it scrolls.
				ctx, stop := context.WithCancel(context.Background())
				var wg sync.WaitGroup
				var sent atomic.Int64
				for _, tok := range tokens {
					wg.Add(1)
					go func() {
						defer wg.Done()
						t := time.NewTicker(1250 * time.Millisecond)
						defer t.Stop()
						for {
							select {
							case <-ctx.Done():
								return
							case <-t.C:
								srv.call(b, "POST", "/channels/"+w.history+"/messages", tok, map[string]any{"content": "busy"}, nil)
								sent.Add(1)
							}
						}
					}()
				}
				busyStart := time.Now()
				busy := eval[float64](p, fpsJS)
				rate := float64(sent.Load()) / time.Since(busyStart).Seconds()
				stop()
				wg.Wait()

				// Scroll back through everything, a frame at a time, for at most
				// 5 minutes: the peer rendering every message slows with each
				// page (every one re-renders them all) and may not get there;
				// it is then measured with what it loaded.
				start := time.Now()
				done := false
				for !done && time.Since(start) < 5*time.Minute {
					done = evalSlow[bool](p, scrollBackJS)
				}
				took := time.Since(start)
				if done && served.Load() < total {
					b.Fatalf("the beginning showed after %d of %d synthetic messages", served.Load(), total)
				}
				if !done && mode == "virtual" {
					b.Fatalf("scroll-back stuck at %d of %d", served.Load(), total)
				}
				loaded := float64(served.Load() + int64(historySize))
				heap1, blink1, dom1 := heap(b, p)
				full := evalSlow[float64](p, fpsJS)
				b.ReportMetric(heap0/1e6, "MB-heap-first-page")
				b.ReportMetric(heap1/1e6, "MB-heap-10k")
				b.ReportMetric(blink0/1e6, "MB-blink-heap-first-page")
				b.ReportMetric(blink1/1e6, "MB-blink-heap-10k")
				b.ReportMetric(float64(dom0), "DOM-first-page")
				b.ReportMetric(float64(dom1), "DOM-10k")
				b.ReportMetric(quiet, "fps-quiet")
				b.ReportMetric(busy, "fps-busy")
				b.ReportMetric(full, "fps-10k")
				b.ReportMetric(rate, "msg/s-busy")
				b.ReportMetric(took.Seconds(), "s-scrolling-back")
				b.ReportMetric(loaded, "msgs-loaded")
				b.ReportMetric(0, "ns/op")
			}
		})
	}
}
