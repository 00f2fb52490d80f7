package livetest_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/concord-chat/concord/runtime/domain/live/gateway"
	"github.com/concord-chat/concord/runtime/domain/live/livetest"
)

// TestPingsWithoutReports: ": ping" comes from the stream's own schedule,
// not only with viewer-count reports: with reports an hour apart, a quiet
// stream's HTTP/1.1 (detached) and HTTP/2 viewers both keep getting
// pings, and no viewers event.
func TestPingsWithoutReports(t *testing.T) {
	e := livetest.Start(t, livetest.Backends{}, livetest.Options{Gateway: gateway.Config{
		PingInterval: 300 * time.Millisecond, ReportInterval: time.Hour}})
	srv := httptest.NewUnstartedServer(e.API)
	srv.Config.Protocols = new(http.Protocols)
	srv.Config.Protocols.SetHTTP1(true)
	srv.Config.Protocols.SetUnencryptedHTTP2(true)
	srv.Start()
	t.Cleanup(func() {
		srv.CloseClientConnections()
		srv.Close()
	})
	tr := &http.Transport{Protocols: new(http.Protocols)}
	tr.Protocols.SetUnencryptedHTTP2(true)
	alice := e.NewUser()
	s := e.CreateStream(alice, "quiet")
	h1 := livetest.Watch(t, srv.URL, s.ID, nil, "")
	h2 := livetest.WatchWith(t, &http.Client{Transport: tr}, srv.URL, s.ID, nil, "")
	if p := h2.Stream.Response.ProtoMajor; p != 2 {
		t.Fatalf("protocol HTTP/%d, want 2", p)
	}
	h1.Next(livetest.Wait, "state")
	h2.Next(livetest.Wait, "state")
	e.Eventually(livetest.Wait, func() string {
		if a, b := h1.Pings.Load(), h2.Pings.Load(); a < 3 || b < 3 {
			return fmt.Sprintf("pings: HTTP/1.1 viewer %d, HTTP/2 viewer %d (want 3 each)", a, b)
		}
		return ""
	})
	h1.Quiet(500*time.Millisecond, "viewers")
}
