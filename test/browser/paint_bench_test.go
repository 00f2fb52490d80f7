//go:build integration

package browser

import (
	"fmt"
	"testing"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
)

// paintJS resolves, once the message list of #general has items and two
// animation frames have passed (the frame with them was painted), with
// performance.now(): milliseconds since the navigation started.
const paintJS = `new Promise(res => {
  const check = () => {
    const l = document.querySelector('ol[aria-label="Messages in #general"]');
    if (l && l.children.length > 0) requestAnimationFrame(() => requestAnimationFrame(() => res(performance.now())));
    else requestAnimationFrame(check);
  };
  check();
})`

// markJS resolves with the time of a performance mark, once it is made.
func markJS(name string) string {
	return fmt.Sprintf(`new Promise(res => {
  const f = () => { const e = performance.getEntriesByName(%q)[0]; e ? res(e.startTime) : requestAnimationFrame(f); };
  f();
})`, name)
}

// historyFetchJS times the one REST read the page cannot do without, the
// newest 50 messages, from inside the page: the peer of the paint time.
const historyFetchJS = `(async () => {
  const t0 = performance.now();
  const r = await fetch('/api/v10/channels/%s/messages?limit=50', {headers: {Authorization: localStorage.getItem('concord.token')}});
  await r.json();
  return performance.now() - t0;
})()`

// BenchmarkFirstMessagesPaint measures, in headless Chromium on loopback,
// the time from navigating to a channel's URL to its message list (50
// messages) painted — with the bundle cached (a returning visitor) and with
// the cache disabled (first visit) — beside the REST history read alone.
//
//	. ~/.cache/concord/test-env.sh && go test -tags integration ./test/browser -run '^$' -bench FirstMessagesPaint -benchtime 20x
func BenchmarkFirstMessagesPaint(b *testing.B) {
	srv := startDev(b)
	w := setup(b, srv)
	for i := range 50 {
		w.srv.call(b, "POST", "/channels/"+w.general+"/messages", tokenFor(b, srv, i/5), map[string]any{"content": fmt.Sprintf("message %d", i)}, nil)
	}
	br := newBrowser(b)
	p := br.page("alice")
	p.do(navigate(srv.base + "/"))
	eval[bool](p, fmt.Sprintf(`(localStorage.setItem('concord.token', %q), true)`, w.aliceToken))
	url := srv.base + "/channels/" + w.guild + "/" + w.general
	for _, run := range []struct {
		cold, wait bool
	}{{false, false}, {false, true}, {true, false}, {true, true}} {
		name := "cached"
		if run.cold {
			name = "no-cache"
		}
		// The peer: the same client painting only after READY and
		// GUILD_CREATE, as it did before the early paint.
		if run.wait {
			name += "/after-READY"
		} else {
			name += "/early"
		}
		cold := run.cold
		b.Run(name, func(b *testing.B) {
			p.t = b
			flag := "localStorage.removeItem('concord.earlyPaint')"
			if run.wait {
				flag = "localStorage.setItem('concord.earlyPaint', 'off')"
			}
			eval[bool](p, "("+flag+", true)")
			if _, err := chromedp.Call(p.ctx, network.SetCacheDisabled, network.SetCacheDisabledParams{CacheDisabled: cold}); err != nil {
				b.Fatal(err)
			}
			var paint, fetch, load, ready, guildCreate, history, rows float64
			for b.Loop() {
				p.do(navigate(url))
				paint += eval[float64](p, paintJS)
				load += eval[float64](p, `performance.getEntriesByType('navigation')[0].loadEventEnd`)
				ready += eval[float64](p, markJS("concord:ready"))
				guildCreate += eval[float64](p, markJS("concord:guild-create"))
				history += eval[float64](p, markJS("concord:history"))
				rows += eval[float64](p, markJS("concord:messages"))
				fetch += eval[float64](p, fmt.Sprintf(historyFetchJS, w.general))
			}
			n := float64(b.N)
			b.ReportMetric(paint/n, "ms-to-paint")
			b.ReportMetric(load/n, "ms-to-load")
			b.ReportMetric(ready/n, "ms-to-READY")
			b.ReportMetric(guildCreate/n, "ms-to-GUILD_CREATE")
			b.ReportMetric(history/n, "ms-to-history")
			b.ReportMetric(rows/n, "ms-to-rows-in-DOM")
			b.ReportMetric(fetch/n, "ms-history-fetch")
			b.ReportMetric(paint/load, "paint/load")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// tokenFor logs in poster i of setup (each may send 5 messages at once).
func tokenFor(tb testing.TB, srv *server, i int) string {
	var r struct{ Token string }
	srv.call(tb, "POST", "/auth/login", "", map[string]any{"login": fmt.Sprintf("poster%02d", i), "password": "poster password"}, &r)
	return r.Token
}
