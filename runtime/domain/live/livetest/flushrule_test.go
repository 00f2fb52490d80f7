package livetest_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/concord-chat/concord/runtime/domain/live/gateway"
	"github.com/concord-chat/concord/runtime/domain/live/livetest"
)

// TestLoneCommentAfterViewersEventGoesAtOnce: over real HTTP/1.1
// (detached) and HTTP/2 viewers, a comment posted right after a viewers
// event reached them is written at once, not held by the flush rule. The
// flush interval and the quiet gap are an hour, so any hold outlasts the
// test; the next comment does wait for it.
func TestLoneCommentAfterViewersEventGoesAtOnce(t *testing.T) {
	e := livetest.Start(t, livetest.Backends{}, livetest.Options{Gateway: gateway.Config{
		FlushInterval: time.Hour, QuietGap: time.Hour, ReportInterval: 200 * time.Millisecond, PingInterval: time.Hour}})
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
	// One viewer per stream: a stream's viewers event after a bookkeeping
	// flush waits the hour, so a second viewer joining after the first
	// count would never get one.
	for _, c := range []struct {
		name   string
		client *http.Client
		proto  int
	}{{"HTTP/1.1", nil, 1}, {"HTTP/2", &http.Client{Transport: tr}, 2}} {
		s := e.CreateStream(alice, "quiet "+c.name)
		v := livetest.WatchWith(t, c.client, srv.URL, s.ID, nil, "")
		if p := v.Stream.Response.ProtoMajor; p != c.proto {
			t.Fatalf("%s: protocol HTTP/%d", c.name, p)
		}
		v.Next(livetest.Wait, "state")
		v.Next(livetest.Wait, "viewers")
		e.Post(alice, s.ID, "right after the count", 0)
		if ev := v.Next(livetest.Wait, "comment"); !strings.Contains(string(ev.Data), "right after the count") {
			t.Fatalf("%s viewer got %s", c.name, ev.Data)
		}
		e.Post(alice, s.ID, "within the interval", 0)
		v.Quiet(300*time.Millisecond, "comment")
	}
}
