package topology

import (
	"net"
	"net/http"
	"os/exec"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pires/go-proxyproto"
)

// TestBalancerKeepsASlowServerUp: an api node that answers /readyz late
// for a few seconds (a machine stalled by a fault: in session 14 a
// minority split left HAProxy with no api server for 3 s although
// neither api node was cut off) is still serving; the balancer must not
// take it, and with it every replica slowed by the same stall, out of
// service. A server that stops answering altogether still goes down.
func TestBalancerKeepsASlowServerUp(t *testing.T) {
	bin, err := exec.LookPath("haproxy")
	if err != nil {
		t.Skip("no haproxy on PATH (hack/test-deps.sh installs it)")
	}
	var delay atomic.Int64
	var stopped atomic.Bool
	mux := http.NewServeMux()
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		if stopped.Load() {
			// A process that is gone: the connection is dropped unanswered.
			panic(http.ErrAbortHandler)
		}
		time.Sleep(time.Duration(delay.Load())) // the stall under test
		w.WriteHeader(http.StatusOK)
	})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: mux}
	go srv.Serve(&proxyproto.Listener{Listener: l})
	t.Cleanup(func() { srv.Close() })

	c := &Cluster{Nodes: []*Node{{Name: "api-1", HTTP: l.Addr().String()}}}
	if err := c.startHAProxy(bin, false); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Node("haproxy").Kill() })
	state := func() string {
		st, err := c.Admin.ServerStates()
		if err != nil {
			return err.Error() // the admin socket is not up yet
		}
		return st["apis/api-1"]
	}
	await := func(want string, within time.Duration) {
		t.Helper()
		deadline := time.Now().Add(within)
		for state() != want {
			if time.Now().After(deadline) {
				t.Fatalf("apis/api-1 is %q after %v, want %s", state(), within, want)
			}
			time.Sleep(50 * time.Millisecond) // HAProxy's checks run on their interval; polled
		}
	}
	await("UP", 10*time.Second)

	// Four seconds of /readyz answering after 800 ms.
	delay.Store(int64(800 * time.Millisecond))
	until := time.Now().Add(4 * time.Second)
	for time.Now().Before(until) {
		if st := state(); st != "UP" && st != "UP 1/3" && st != "UP 2/3" && st != "UP 1/2" {
			t.Fatalf("a server answering /readyz in 800 ms was taken out: %s", st)
		}
		time.Sleep(50 * time.Millisecond) // sampling the state through the stall
	}
	delay.Store(0)
	await("UP", 5*time.Second)

	// Gone: no answer at all. It goes down within a few seconds.
	stopped.Store(true)
	await("DOWN", 8*time.Second)
}

// TestBalancerRetriesAGoneServerElsewhere: in the half second before
// the checks notice that an api node died (the fault suite's kill), a
// request HAProxy sends it is refused a connection. Nothing reached the
// node, so the request goes to another server instead of being answered
// 503 "No server is available" (fault runs of session 17: 2 and 3 such
// sends per full schedule, at the kill of api-2).
func TestBalancerRetriesAGoneServerElsewhere(t *testing.T) {
	bin, err := exec.LookPath("haproxy")
	if err != nil {
		t.Skip("no haproxy on PATH (hack/test-deps.sh installs it)")
	}
	serve := func() (net.Listener, *http.Server) {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})}
		go srv.Serve(&proxyproto.Listener{Listener: l})
		t.Cleanup(func() { srv.Close() })
		return l, srv
	}
	la, a := serve()
	lb, _ := serve()
	c := &Cluster{Nodes: []*Node{{Name: "api-1", HTTP: la.Addr().String()}, {Name: "api-2", HTTP: lb.Addr().String()}}}
	if err := c.startHAProxy(bin, false); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Node("haproxy").Kill() })
	deadline := time.Now().Add(10 * time.Second)
	for {
		st, _ := c.Admin.ServerStates()
		if st["apis/api-1"] == "UP" && st["apis/api-2"] == "UP" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("servers not up: %v", st)
		}
		time.Sleep(50 * time.Millisecond) // HAProxy's first checks; polled
	}
	// api-1 dies: its port refuses connections from now on.
	a.Close()
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	for i := range 10 {
		resp, err := client.Get("http://" + c.Front + "/api/v10/gateway")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			st, _ := c.Admin.ServerStates()
			t.Fatalf("request %d right after api-1 died: %d (servers %v)", i, resp.StatusCode, st)
		}
	}
}
