package httpserve

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// serve runs h behind NewServer and Listener on a loopback port.
func serve(t *testing.T, h http.Handler, cfg Config) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := NewServer(h, cfg)
	done := make(chan struct{})
	go func() { defer close(done); _ = Serve(srv, l, cfg) }()
	t.Cleanup(func() { srv.Close(); <-done })
	return l.Addr().String()
}

// short are bounds a test can wait out.
var short = Config{ReadHeaderTimeout: 300 * time.Millisecond, ReadTimeout: 300 * time.Millisecond,
	WriteTimeout: 300 * time.Millisecond, IdleTimeout: 300 * time.Millisecond}

// A WebSocket (hijacked) outlives every per-request timeout: it is idle
// for several times ReadTimeout, WriteTimeout and IdleTimeout, then still
// echoes.
func TestWebSocketOutlivesRequestTimeouts(t *testing.T) {
	up := websocket.Upgrader{}
	addr := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer c.Close()
		for {
			mt, b, err := c.ReadMessage()
			if err != nil {
				return
			}
			if err := c.WriteMessage(mt, b); err != nil {
				return
			}
		}
	}), short)
	c, _, err := websocket.DefaultDialer.Dial("ws://"+addr+"/ws", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	time.Sleep(4 * short.ReadTimeout) // the quiet period is what is tested
	if err := c.WriteMessage(websocket.TextMessage, []byte("still here")); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, b, err := c.ReadMessage(); err != nil || string(b) != "still here" {
		t.Fatalf("echo after idling past the request timeouts: %q %v", b, err)
	}
}

// A handler slower than WriteTimeout has its connection cut; one within
// it answers.
func TestWriteTimeoutPerRequest(t *testing.T) {
	addr := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			time.Sleep(3 * short.WriteTimeout)
		}
		io.WriteString(w, "ok")
	}), short)
	if resp, err := http.Get("http://" + addr + "/fast"); err != nil || resp.StatusCode != 200 {
		t.Fatalf("fast request: %v %v", resp, err)
	}
	if resp, err := http.Get("http://" + addr + "/slow"); err == nil {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("slow handler's response arrived past WriteTimeout: %d %q", resp.StatusCode, b)
	}
}

// An idle keep-alive connection is closed after IdleTimeout.
func TestIdleKeepAliveClosed(t *testing.T) {
	addr := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }), short)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	start := time.Now()
	_ = c.SetReadDeadline(start.Add(5 * time.Second))
	if _, err := br.ReadByte(); err != io.EOF {
		t.Fatalf("idle keep-alive: read %v, want EOF", err)
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Fatalf("idle keep-alive closed after %v", took)
	}
}

// The total cap refuses connections beyond MaxConns from any address.
func TestTotalConnectionCap(t *testing.T) {
	addr := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}), Config{MaxConns: 2, MaxConnsPerAddr: 10})
	for range 2 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
		if _, err := http.ReadResponse(bufio.NewReader(c), nil); err != nil {
			t.Fatal(err)
		}
	}
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil || resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("third connection over MaxConns=2: %v %v", resp, err)
	}
}

// Responses from http.Error and http.Redirect become Discord's JSON
// error; a handler's own plain text and JSON pass through.
func TestFrontRewritesNetHTTPHelpers(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /only-get", func(w http.ResponseWriter, r *http.Request) {})
	mux.HandleFunc("GET /error", func(w http.ResponseWriter, r *http.Request) { http.Error(w, "boom <b>", http.StatusTeapot) })
	mux.HandleFunc("GET /redirect", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/elsewhere", http.StatusFound) })
	mux.HandleFunc("GET /text", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		w.WriteHeader(http.StatusServiceUnavailable)
		io.WriteString(w, "not ready")
	})
	mux.Handle("/dir/", http.NotFoundHandler())
	addr := serve(t, mux, Config{})
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for _, c := range []struct {
		method, path string
		status       int
		json         bool
	}{
		{"POST", "/only-get", http.StatusMethodNotAllowed, true},
		{"GET", "/error", http.StatusTeapot, true},
		{"GET", "/redirect", http.StatusNotFound, true},
		{"GET", "/dir", http.StatusNotFound, true}, // the mux's trailing-slash redirect
		{"GET", "/nowhere", http.StatusNotFound, true},
		{"GET", "/text", http.StatusServiceUnavailable, false},
	} {
		req, _ := http.NewRequest(c.method, "http://"+addr+c.path, nil)
		resp, err := noRedirect.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != c.status {
			t.Errorf("%s %s: status %d, want %d (%s)", c.method, c.path, resp.StatusCode, c.status, b)
			continue
		}
		var e struct {
			Message string `json:"message"`
			Code    *int   `json:"code"`
		}
		isJSON := resp.Header.Get("Content-Type") == "application/json" && json.Unmarshal(b, &e) == nil && e.Code != nil && *e.Code == 0 && e.Message != ""
		if isJSON != c.json || resp.Header.Get("Location") != "" {
			t.Errorf("%s %s: Content-Type %q Location %q body %s; want JSON %v", c.method, c.path,
				resp.Header.Get("Content-Type"), resp.Header.Get("Location"), b, c.json)
		}
	}
}

func TestClean(t *testing.T) {
	for p, want := range map[string]bool{
		"/": true, "/api/v10/users/@me": true, "/api/": true, "/gateway": true,
		"": false, "api": false, "/api/../x": false, "/a/./b": false, "//a": false, "/a//b": false, "/a/..": false, "/a/.": false,
	} {
		if got := clean(p); got != want {
			t.Errorf("clean(%q) = %v, want %v", p, got, want)
		}
	}
}

// FuzzListenerRequest sends arbitrary bytes as a request to a real
// listener: the server never panics or hangs, and whatever error it
// answers (4xx/5xx) is Discord's JSON, whether net/http wrote it before
// any handler or the mux did.
func FuzzListenerRequest(f *testing.F) {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/ok", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "{}") })
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		f.Fatal(err)
	}
	cfg := Config{ReadHeaderTimeout: time.Second, ReadTimeout: time.Second, MaxHeaderBytes: 2048, MaxConnsPerAddr: -1}
	srv := NewServer(mux, cfg)
	go func() { _ = Serve(srv, l, cfg) }()
	defer srv.Close()
	addr := l.Addr().String()
	for _, s := range []string{
		"GET /api/ok HTTP/1.1\r\nHost: x\r\n\r\n",
		"GET /api/../ok HTTP/1.1\r\nHost: x\r\n\r\n",
		"GET /%ZZ HTTP/1.1\r\nHost: x\r\n\r\n",
		"POST /api/ok HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc",
		"GET / HTTP/9.9\r\n\r\n",
		"GET /\x00 HTTP/1.1\r\nHost: x\r\n\r\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, req []byte) {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.Write(req); err != nil {
			return // the server closed early: nothing was answered
		}
		if !bytes.Contains(req, []byte("\r\n\r\n")) && !bytes.Contains(req, []byte("\n\n")) {
			// Headers that never end: the server must still close within
			// ReadHeaderTimeout (checked by the deadline above).
			_ = c.(*net.TCPConn).CloseWrite()
		}
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				t.Fatalf("no answer and no close within 5s to %q", req)
			}
			return
		}
		defer resp.Body.Close()
		if resp.StatusCode < 400 {
			return
		}
		b, _ := io.ReadAll(resp.Body)
		if resp.Header.Get("Content-Type") != "application/json" || !json.Valid(b) || !strings.Contains(string(b), `"code":0`) {
			t.Fatalf("request %q: error %d answered %q %s", req, resp.StatusCode, resp.Header.Get("Content-Type"), b)
		}
	})
}

func TestNetError(t *testing.T) {
	for in, want := range map[string]int{
		"HTTP/1.1 400 Bad Request" + netErrorHeaders + "400 Bad Request":                                              400,
		"HTTP/1.1 431 Request Header Fields Too Large" + netErrorHeaders + "431 Request Header Fields Too Large":      431,
		"HTTP/1.1 400 Bad Request: missing required Host header" + netErrorHeaders + "400 Bad Request: missing...":    400,
		"HTTP/1.1 400 Bad Request\r\nConnection: close\r\nContent-Type: text/plain; charset=utf-8\r\nDate: x\r\n\r\n": 0,
		"HTTP/1.1 200 OK" + netErrorHeaders: 0,
		"some body bytes":                   0,
	} {
		got, ok := netError([]byte(in))
		if !ok {
			got = 0
		}
		if got != want {
			t.Errorf("netError(%q) = %d, want %d", in, got, want)
		}
	}
}

// A client speaking HTTP/2 with prior knowledge (a TLS-terminating proxy)
// is served over HTTP/2, an event stream included: its events arrive as
// they are flushed, before the handler returns.
func TestUnencryptedHTTP2(t *testing.T) {
	release := make(chan struct{})
	addr := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: "+r.Proto+"\n\n")
		w.(http.Flusher).Flush()
		<-release
	}), Config{})
	var protocols http.Protocols
	protocols.SetUnencryptedHTTP2(true)
	client := &http.Client{Transport: &http.Transport{Protocols: &protocols}}
	resp, err := client.Get("http://" + addr + "/events")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	defer close(release)
	if resp.ProtoMajor != 2 {
		t.Fatalf("served over %s, want HTTP/2", resp.Proto)
	}
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	if err != nil || line != "data: HTTP/2.0\n" {
		t.Fatalf("first event = %q, %v", line, err)
	}
}
