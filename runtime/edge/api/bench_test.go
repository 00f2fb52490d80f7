package api

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/concord-chat/concord/runtime/adapters/store"
)

// benchEnv is newEnv for benchmarks: one guild, alice and bob.
func benchWorld(b *testing.B) (*env, world) {
	b.Helper()
	e := newEnv(b)
	e.inProcess("it times the handler itself")
	return e, e.world()
}

// BenchmarkCreateMessage measures POST /channels/{id}/messages through the
// handler (no network): decode, then one guild actor step that
// authorises, mints, writes durably to Pebble, renders and publishes. Compare with BenchmarkGetMe, an
// authenticated request that touches only the store.
func BenchmarkCreateMessage(b *testing.B) {
	e, w := benchWorld(b)
	h := e.srv.Config.Handler
	path := fmt.Sprintf("%s/channels/%d/messages", v10, w.general)
	body := []byte(`{"content":"a benchmark message of ordinary length, nothing to see here","nonce":"1"}`)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		req := httptest.NewRequest("POST", path, bytes.NewReader(body))
		req.Header.Set("Authorization", w.alice.Token)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			b.Fatalf("%d %s", rec.Code, rec.Body)
		}
	}
}

// BenchmarkGetMe is the peer of BenchmarkCreateMessage.
func BenchmarkGetMe(b *testing.B) {
	e, w := benchWorld(b)
	h := e.srv.Config.Handler
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		req := httptest.NewRequest("GET", v10+"/users/@me", nil)
		req.Header.Set("Authorization", w.alice.Token)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			b.Fatalf("%d %s", rec.Code, rec.Body)
		}
	}
}

// BenchmarkStorePutMessage is the durable write alone, the floor under
// BenchmarkCreateMessage.
func BenchmarkStorePutMessage(b *testing.B) {
	e, w := benchWorld(b)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		id, err := e.ids.Next()
		if err != nil {
			b.Fatal(err)
		}
		m := store.Message{ID: id, ChannelID: w.general, GuildID: w.guildID, AuthorID: w.alice.ID, Content: "a benchmark message of ordinary length, nothing to see here"}
		if err := e.store.PutMessage(b.Context(), m); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCreateMessageParallel is BenchmarkCreateMessage from many
// senders at once into one channel of one guild: what the guild's
// ordering costs when sends contend.
func BenchmarkCreateMessageParallel(b *testing.B) {
	e, w := benchWorld(b)
	h := e.srv.Config.Handler
	path := fmt.Sprintf("%s/channels/%d/messages", v10, w.general)
	body := []byte(`{"content":"a benchmark message of ordinary length, nothing to see here"}`)
	b.SetParallelism(8)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			req := httptest.NewRequest("POST", path, bytes.NewReader(body))
			req.Header.Set("Authorization", w.alice.Token)
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != http.StatusOK {
				b.Errorf("%d %s", rec.Code, rec.Body)
				return
			}
		}
	})
}
