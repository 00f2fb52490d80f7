package livetest_test

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/concord-chat/concord/runtime/domain/live/livetest"
)

// TestLiveOverH2C serves the live stream over cleartext HTTP/2, as behind
// a TLS-terminating proxy: the stream opens as HTTP/2 and delivers.
func TestLiveOverH2C(t *testing.T) {
	e := livetest.Start(t, livetest.Backends{}, livetest.Options{})
	srv := httptest.NewUnstartedServer(e.API)
	srv.Config.Protocols = new(http.Protocols)
	srv.Config.Protocols.SetHTTP1(true)
	srv.Config.Protocols.SetUnencryptedHTTP2(true)
	srv.Start()
	// SSE handlers end only when their connections do.
	t.Cleanup(func() {
		srv.CloseClientConnections()
		srv.Close()
	})
	tr := &http.Transport{Protocols: new(http.Protocols)}
	tr.Protocols.SetUnencryptedHTTP2(true)
	client := &http.Client{Transport: tr}
	alice := e.NewUser()
	s := e.CreateStream(alice, "h2")
	v := livetest.WatchWith(t, client, srv.URL, s.ID, nil, "")
	if p := v.Stream.Response.ProtoMajor; p != 2 {
		t.Fatalf("protocol HTTP/%d, want 2", p)
	}
	// A second stream on the same connection, as a browser multiplexes.
	w := livetest.WatchWith(t, client, srv.URL, s.ID, nil, "")
	c := e.Post(alice, s.ID, "over h2", 0)
	for _, x := range []*livetest.Viewer{v, w} {
		if got := x.Comments(1, 10*time.Second); got[0].ID != c.ID {
			t.Fatalf("got %+v", got)
		}
	}
}
