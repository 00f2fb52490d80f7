package apirole

import (
	"bytes"
	"crypto/sha256"
	"io"
	"log/slog"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/concord-chat/concord/runtime/adapters/registry/etcd/etcdtest"
	"github.com/concord-chat/concord/runtime/config"
	"github.com/concord-chat/concord/runtime/edge/api/uploads"
)

// upload builds a multipart message with one file of n bytes.
func upload(t *testing.T, n int) (body []byte, contentType string) {
	t.Helper()
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	if err := mw.WriteField("payload_json", `{"content":"big"}`); err != nil {
		t.Fatal(err)
	}
	fw, err := mw.CreateFormFile("files[0]", "big.bin")
	if err != nil {
		t.Fatal(err)
	}
	chunk := bytes.Repeat([]byte("0123456789abcdef"), 4096)
	for written := 0; written < n; written += len(chunk) {
		fw.Write(chunk[:min(len(chunk), n-written)])
	}
	if err := mw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes(), mw.FormDataContentType()
}

// TestProxyUploadLargerThanJSONCap: a 12 MiB upload (over the 8 MiB a
// JSON body may have) reaches the guild node byte for byte, also when the
// first owner took it and died, so the proxy sent it again from its spool;
// a JSON body over the cap is still refused with 413.
func TestProxyUploadLargerThanJSONCap(t *testing.T) {
	f := etcdtest.NewGuildRing(t)
	dying := joinGuild(f, "guild-a", vanishingOwner(t))
	var sums atomic.Value
	var served atomic.Int32
	next := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		served.Add(1)
		h := sha256.New()
		n, _ := io.Copy(h, r.Body)
		sums.Store(h.Sum(nil))
		if r.ContentLength != n {
			t.Errorf("Content-Length %d, body %d bytes", r.ContentLength, n)
		}
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(next.Close)

	sig := &logSignal{match: "lost mid-request", ch: make(chan struct{}, 1)}
	p := newProxy(f.Ring, newResolver(nil), 30*time.Second, testMetrics(t), slog.New(sig))
	body, ct := upload(t, 12<<20)
	want := sha256.Sum256(body)
	done := make(chan *httptest.ResponseRecorder, 1)
	go func() {
		req := httptest.NewRequest(http.MethodPost, "/api/v10/guilds/42/channels", bytes.NewReader(body))
		req.Header.Set("Content-Type", ct)
		rec := httptest.NewRecorder()
		p.ServeHTTP(rec, req)
		done <- rec
	}()
	<-sig.ch
	joinGuild(f, "guild-b", strings.TrimPrefix(next.URL, "http://"))
	f.Leave("guild-a", dying)
	rec := <-done
	if rec.Code != http.StatusOK || served.Load() != 1 {
		t.Fatalf("upload: got %d %s after %d served, want 200 once", rec.Code, rec.Body, served.Load())
	}
	if got, _ := sums.Load().([]byte); !bytes.Equal(got, want[:]) {
		t.Fatal("the guild node got a different body than the client sent")
	}

	big := `{"content":"` + strings.Repeat("x", maxProxyBody) + `"}`
	if rec := post(t, p, "/api/v10/guilds/42/channels", big); rec.Code != http.StatusRequestEntityTooLarge || !strings.Contains(rec.Body.String(), `"code":40005`) {
		t.Fatalf("JSON body over %d bytes: got %d %s, want 413 with code 40005", maxProxyBody, rec.Code, rec.Body)
	}
}

// TestProxyUploadCap: an upload over the configured bound is refused
// with 413 before any guild node sees it.
func TestProxyUploadCap(t *testing.T) {
	f := etcdtest.NewGuildRing(t)
	var served atomic.Int32
	joinGuild(f, "guild-a", strings.TrimPrefix(echo(t, &served, nil).URL, "http://"))
	p := newProxy(f.Ring, newResolver(nil), time.Second, testMetrics(t), slog.New(slog.DiscardHandler))
	p.maxUpload = 1 << 20
	body, ct := upload(t, 2<<20)
	req := httptest.NewRequest(http.MethodPost, "/api/v10/guilds/42/channels", bytes.NewReader(body))
	req.Header.Set("Content-Type", ct)
	rec := httptest.NewRecorder()
	p.ServeHTTP(rec, req)
	if rec.Code != http.StatusRequestEntityTooLarge || served.Load() != 0 || !strings.Contains(rec.Body.String(), `"code":40005`) {
		t.Fatalf("got %d %s after %d served, want 413 (40005) before any", rec.Code, rec.Body, served.Load())
	}
	if got, want := maxUploadBody(config.Config{}), uploads.RequestLimit(0, 0); got != want {
		t.Fatalf("the api role spools up to %d bytes, the REST API takes %d", got, want)
	}
}
