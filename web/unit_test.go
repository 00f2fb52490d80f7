//go:build integration

package web

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/concord-chat/concord/web/internal/bundle"
)

// TestClientUnitsInChromium runs web/test/unit.test.ts (state, errors,
// nonces, member-list ops, labels) in headless Chromium: the client's logic
// needs a DOM, and Chromium is the runtime it ships to.
func TestClientUnitsInChromium(t *testing.T) {
	path := os.Getenv("CONCORD_CHROMIUM")
	if path == "" {
		t.Fatal("CONCORD_CHROMIUM is not set: run `make test-deps` (it installs Debian's chromium) and source ~/.cache/concord/test-env.sh")
	}
	js, err := bundle.BuildTest(".", "test/unit.test.ts")
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/unit.js" {
			w.Header().Set("Content-Type", "text/javascript")
			w.Write(js)
			return
		}
		w.Header().Set("Content-Type", "text/html")
		w.Write([]byte(`<!doctype html><html><body><div id="app"></div><script type="module" src="/unit.js"></script></body></html>`))
	}))
	defer srv.Close()
	actx, cancelA := chromedp.NewExecAllocator(context.Background(),
		append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path), chromedp.NoSandbox, chromedp.DisableGPU)...)
	defer cancelA()
	ctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	if err := chromedp.Do(ctx, chromedp.Navigate(srv.URL+"/")); err != nil {
		t.Fatalf("chromium: %v", err)
	}
	type result struct {
		Name  string `json:"name"`
		Error string `json:"error"`
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		res, err := chromedp.Run(ctx, chromedp.Evaluate[[]result](`window.__results || null`))
		if err != nil {
			t.Fatal(err)
		}
		if res != nil {
			if len(res) == 0 {
				t.Fatal("no tests ran")
			}
			for _, r := range res {
				if r.Error != "" {
					t.Errorf("%s: %s", r.Name, r.Error)
				} else {
					t.Logf("ok  %s", r.Name)
				}
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the unit tests did not finish in 20 s")
		}
		time.Sleep(20 * time.Millisecond)
	}
}
