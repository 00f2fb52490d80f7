//go:build integration

package browser

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/accessibility"
	"github.com/chromedp/cdproto/dom"
	"github.com/chromedp/cdproto/input"
	cdpruntime "github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/concord-chat/concord/internal/concordbin"
)

// server is a running `concord dev` process.
type server struct {
	base    string // http://127.0.0.1:port
	addr    string
	dataDir string
	logs    *bytes.Buffer
	mu      sync.Mutex
	cmd     *exec.Cmd
	pw      *io.PipeWriter
	args    []string // extra flags of `concord dev`
}

// startDev runs `concord dev` on a free loopback port with a fresh data
// directory and waits until /readyz answers 200.
func startDev(t testing.TB, args ...string) *server {
	t.Helper()
	addr := freeAddr(t)
	s := &server{base: "http://" + addr, addr: addr, dataDir: t.TempDir(), logs: &bytes.Buffer{}, args: args}
	t.Cleanup(func() {
		s.kill()
		if t.Failed() {
			s.mu.Lock()
			t.Logf("concord dev output:\n%s", s.logs.String())
			s.mu.Unlock()
		}
	})
	s.run(t)
	return s
}

// run starts the process on s's address and data directory and waits for
// /readyz.
func (s *server) run(t testing.TB) {
	t.Helper()
	cmd := exec.Command(concordbin.Path(t), append([]string{"dev", "--http=" + s.addr, "--data-dir=" + s.dataDir}, s.args...)...)
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			s.mu.Lock()
			s.logs.WriteString(sc.Text() + "\n")
			s.mu.Unlock()
		}
	}()
	if err := cmd.Start(); err != nil {
		t.Fatalf("start concord dev: %v", err)
	}
	s.mu.Lock()
	s.cmd, s.pw = cmd, pw
	s.mu.Unlock()
	deadline := time.Now().Add(2 * time.Minute) // a bound on a loaded CI machine, not an expectation
	for {
		res, err := http.Get(s.base + "/readyz")
		if err == nil {
			res.Body.Close()
			if res.StatusCode == 200 {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("concord dev not ready on %s: %v", s.addr, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// freeAddr is a loopback address with a port free a moment ago.
func freeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// kill ends the process with SIGKILL, as a crash would.
func (s *server) kill() {
	s.mu.Lock()
	cmd, pw := s.cmd, s.pw
	s.cmd, s.pw = nil, nil
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	cmd.Process.Kill()
	cmd.Wait()
	pw.Close()
}

// restart kills the process and starts a new one on the same address and
// data directory.
func (s *server) restart(t testing.TB) {
	t.Helper()
	s.kill()
	s.run(t)
}

// call makes a REST call and decodes the answer into out (when non-nil).
func (s *server) call(t testing.TB, method, path, token string, body, out any) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, s.base+"/api/v10"+path, rd)
	if token != "" {
		req.Header.Set("Authorization", token)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode/100 != 2 {
		t.Fatalf("%s %s: %d %s", method, path, res.StatusCode, b)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s %s: decode %s: %v", method, path, b, err)
		}
	}
}

// chromium is the browser binary; the tests fail without it.
func chromium(t testing.TB) string {
	t.Helper()
	p := os.Getenv("CONCORD_CHROMIUM")
	if p == "" {
		t.Fatal("CONCORD_CHROMIUM is not set: run `make test-deps` (hack/test-deps.sh installs Debian's chromium) and source ~/.cache/concord/test-env.sh")
	}
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("CONCORD_CHROMIUM=%s: %v", p, err)
	}
	return p
}

// browser is one headless Chromium; each page runs in its own browser
// context (separate storage, like two people on two machines).
type browser struct {
	t   testing.TB
	ctx context.Context
}

func newBrowser(t testing.TB, extra ...chromedp.ExecAllocatorOption) *browser {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium(t)),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.WindowSize(1280, 800),
	)
	opts = append(opts, extra...)
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	bctx, cancelB := chromedp.NewContext(actx)
	// The first Run starts the browser; it lives as long as bctx.
	if err := chromedp.Do(bctx); err != nil {
		cancelB()
		cancelA()
		t.Fatalf("start chromium: %v", err)
	}
	t.Cleanup(func() {
		cancelB()
		cancelA()
	})
	return &browser{t: t, ctx: bctx}
}

// page is a tab in its own browser context.
type page struct {
	t    testing.TB
	name string
	ctx  context.Context
}

func (b *browser) page(name string) *page {
	ctx, cancel := chromedp.NewContext(b.ctx, chromedp.WithNewBrowserContext())
	b.t.Cleanup(cancel)
	p := &page{t: b.t, name: name, ctx: ctx}
	// The first Run opens the tab, which lives as long as the context of
	// that call: no timeout on it.
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(1280, 800)); err != nil {
		b.t.Fatalf("[%s] open tab: %v", name, err)
	}
	return p
}

func (p *page) fatalf(format string, args ...any) {
	p.t.Helper()
	p.t.Fatalf("[%s] %s", p.name, fmt.Sprintf(format, args...))
}

func (p *page) do(steps ...chromedp.Action[chromedp.Void]) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, 20*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		p.fatalf("%v", err)
	}
}

// eval evaluates a JavaScript expression and decodes its value into out.
func eval[T any](p *page, js string) T {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, 20*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](js, chromedp.EvalAwaitPromise))
	if err != nil {
		p.fatalf("eval %s: %v", js, err)
	}
	return v
}

// waitJS polls a JavaScript condition every 10 ms until it is true.
func (p *page) waitJS(js string, timeout time.Duration) time.Duration {
	p.t.Helper()
	start := time.Now()
	for {
		if eval[bool](p, "!!("+js+")") {
			return time.Since(start)
		}
		if time.Since(start) > timeout {
			p.screenshotOnFailure()
			p.fatalf("timed out after %v waiting for %s", timeout, js)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// query returns the nodes of the accessibility tree with this role and
// accessible name ("" matches any name) that are not ignored.
func (p *page) query(role, name string) []*accessibility.Node {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, 20*time.Second)
	defer cancel()
	doc, err := chromedp.Call(ctx, dom.GetDocument, dom.GetDocumentParams{})
	if err != nil {
		p.fatalf("get document: %v", err)
	}
	res, err := chromedp.Call(ctx, accessibility.QueryAXTree, accessibility.QueryAXTreeParams{
		BackendNodeID: doc.Root.BackendNodeID, Role: role, AccessibleName: name,
	})
	if err != nil {
		p.fatalf("query %s %q: %v", role, name, err)
	}
	var out []*accessibility.Node
	for _, n := range res.Nodes {
		if !n.Ignored {
			out = append(out, n)
		}
	}
	return out
}

// waitFor waits until exactly one node has this role and name.
func (p *page) waitFor(role, name string, timeout time.Duration) *accessibility.Node {
	p.t.Helper()
	start := time.Now()
	for {
		ns := p.query(role, name)
		if len(ns) == 1 {
			return ns[0]
		}
		if len(ns) > 1 {
			p.fatalf("%d nodes with role %s and name %q, want one", len(ns), role, name)
		}
		if time.Since(start) > timeout {
			p.screenshotOnFailure()
			p.fatalf("no %s named %q after %v", role, name, timeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitGone waits until no node has this role and name.
func (p *page) waitGone(role, name string, timeout time.Duration) {
	p.t.Helper()
	start := time.Now()
	for len(p.query(role, name)) > 0 {
		if time.Since(start) > timeout {
			p.screenshotOnFailure()
			p.fatalf("%s named %q still there after %v", role, name, timeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// call runs fn (a JavaScript function declaration) with this bound to the
// node's DOM element.
func (p *page) callOn(n *accessibility.Node, fn string, args ...any) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, 20*time.Second)
	defer cancel()
	obj, err := chromedp.Call(ctx, dom.ResolveNode, dom.ResolveNodeParams{BackendNodeID: n.BackendDOMNodeID})
	if err != nil {
		p.fatalf("resolve node: %v", err)
	}
	var cargs []*cdpruntime.CallArgument
	for _, a := range args {
		b, _ := json.Marshal(a)
		cargs = append(cargs, &cdpruntime.CallArgument{Value: b})
	}
	res, err := chromedp.Call(ctx, cdpruntime.CallFunctionOn, cdpruntime.CallFunctionOnParams{
		FunctionDeclaration: fn, ObjectID: obj.Object.ObjectID, Arguments: cargs,
	})
	if err != nil {
		p.fatalf("call on node: %v", err)
	}
	if res.ExceptionDetails != nil {
		p.fatalf("call on node: %s", res.ExceptionDetails.Text)
	}
}

func (p *page) click(role, name string) {
	p.t.Helper()
	p.callOn(p.waitFor(role, name, 10*time.Second), `function(){ this.scrollIntoView({block: "center"}); this.click(); }`)
}

// fill focuses the textbox and types text into it as keyboard input.
func (p *page) fill(name, text string) {
	p.t.Helper()
	n := p.waitFor("textbox", name, 10*time.Second)
	p.callOn(n, `function(){ this.focus(); this.select && this.select(); }`)
	ctx, cancel := context.WithTimeout(p.ctx, 20*time.Second)
	defer cancel()
	if _, err := chromedp.Call(ctx, input.InsertText, input.InsertTextParams{Text: text}); err != nil {
		p.fatalf("type: %v", err)
	}
}

// enter presses Enter in the focused element as a keyboard does: a
// keyDown that carries the text (so a handler that prevents its default
// also prevents the newline) and a keyUp.
func (p *page) enter() {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, 20*time.Second)
	defer cancel()
	for _, typ := range []input.DispatchKeyEventType{input.DispatchKeyEventTypeKeyDown, input.DispatchKeyEventTypeKeyUp} {
		ev := input.DispatchKeyEventParams{Type: typ, Key: "Enter", Code: "Enter", WindowsVirtualKeyCode: 13, NativeVirtualKeyCode: 13}
		if typ == input.DispatchKeyEventTypeKeyDown {
			ev.Text = "\r"
		}
		if _, err := chromedp.Call(ctx, input.DispatchKeyEvent, ev); err != nil {
			p.fatalf("press Enter: %v", err)
		}
	}
}

// in runs a subtest with every page reporting to it.
func in(t *testing.T, name string, pages []*page, fn func(t *testing.T)) {
	t.Helper()
	t.Run(name, func(st *testing.T) {
		for _, p := range pages {
			p.t = st
		}
		defer func() {
			for _, p := range pages {
				p.t = t
			}
		}()
		fn(st)
	})
}

// screenshot saves the viewport to docs/screenshots/<name>.png when
// CONCORD_SCREENSHOTS=1.
func (p *page) screenshot(name string) {
	p.t.Helper()
	if os.Getenv("CONCORD_SCREENSHOTS") != "1" {
		return
	}
	ctx, cancel := context.WithTimeout(p.ctx, 20*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		p.fatalf("screenshot: %v", err)
	}
	_, file, _, _ := runtime.Caller(0)
	dir := filepath.Join(filepath.Dir(file), "..", "..", "docs", "screenshots")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		p.fatalf("%v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644); err != nil {
		p.fatalf("%v", err)
	}
}

// screenshotOnFailure keeps what the page showed when a wait failed.
func (p *page) screenshotOnFailure() {
	ctx, cancel := context.WithTimeout(p.ctx, 10*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		return
	}
	f := filepath.Join(os.TempDir(), fmt.Sprintf("concord-%s-%s.png", strings.ReplaceAll(p.t.Name(), "/", "_"), p.name))
	if os.WriteFile(f, png, 0o644) == nil {
		p.t.Logf("[%s] screenshot of the failure: %s", p.name, f)
	}
}

// listText is the text of the list (role list) with this accessible name,
// read through its DOM element.
func listJS(name string) string {
	b, _ := json.Marshal(name)
	return fmt.Sprintf(`[...document.querySelectorAll('ol,ul')].find(e => e.getAttribute('aria-label') === %s)`, b)
}

func navigate(u string) chromedp.Action[chromedp.Void] { return chromedp.Navigate(u) }
