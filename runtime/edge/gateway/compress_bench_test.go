package gateway

import (
	"fmt"
	"runtime"
	"testing"
)

// eventMix is a realistic run of dispatches for the compression
// comparison: a busy channel's messages (some with embeds), presence
// changes, typing and member-list updates, with the ids, names and keys
// that repeat between them in a real guild.
func eventMix(n int) [][]byte {
	users := []string{"alice", "bob", "carol", "dave", "erin", "frank", "grace", "heidi"}
	var out [][]byte
	for i := range n {
		u := users[i%len(users)]
		id := 1580000000000000000 + int64(i)*4096
		uid := 1570000000000000000 + int64(i%len(users))*17
		var d string
		switch i % 6 {
		case 0, 1:
			d = fmt.Sprintf(`{"t":"MESSAGE_CREATE","s":%d,"op":0,"d":{"type":0,"tts":false,"timestamp":"2026-12-06T05:%02d:%02d.000000+00:00","pinned":false,"mentions":[],"mention_roles":[],"mention_everyone":false,"member":{"roles":["1560000000000000001"],"premium_since":null,"pending":false,"nick":null,"mute":false,"joined_at":"2026-11-01T10:00:00.000000+00:00","flags":0,"deaf":false,"communication_disabled_until":null,"avatar":null},"id":"%d","flags":0,"embeds":[],"edited_timestamp":null,"content":"message %d from %s about the match tonight","components":[],"channel_id":"1560000000000000100","author":{"username":"%s","public_flags":0,"id":"%d","global_name":"%s","discriminator":"0","avatar":null},"attachments":[],"guild_id":"1560000000000000000"}}`, i, i%60, i%60, id, i, u, u, uid, u)
		case 2:
			d = fmt.Sprintf(`{"t":"MESSAGE_CREATE","s":%d,"op":0,"d":{"type":0,"tts":false,"timestamp":"2026-12-06T05:%02d:%02d.000000+00:00","pinned":false,"mentions":[],"mention_roles":[],"mention_everyone":false,"id":"%d","flags":0,"embeds":[{"type":"rich","url":"https://example.org/articles/%d","title":"Article %d","description":"A longer description of the linked page that a bot put into its embed, with a few sentences of text.","color":5814783,"fields":[{"name":"Score","value":"%d","inline":true},{"name":"Author","value":"%s","inline":true}],"footer":{"text":"example.org"}}],"edited_timestamp":null,"content":"","components":[],"channel_id":"1560000000000000100","author":{"username":"newsbot","public_flags":0,"id":"1570000000000009999","global_name":null,"discriminator":"0","bot":true,"avatar":null},"attachments":[],"guild_id":"1560000000000000000"}}`, i, i%60, i%60, id, i, i, i*7, u)
		case 3:
			d = fmt.Sprintf(`{"t":"PRESENCE_UPDATE","s":%d,"op":0,"d":{"user":{"id":"%d"},"status":"%s","guild_id":"1560000000000000000","client_status":{"desktop":"%[3]s"},"activities":[]}}`, i, uid, []string{"online", "idle", "dnd"}[i%3])
		case 4:
			d = fmt.Sprintf(`{"t":"TYPING_START","s":%d,"op":0,"d":{"user_id":"%d","timestamp":%d,"member":{"user":{"username":"%s","id":"%[2]d","global_name":"%[4]s","discriminator":"0","avatar":null},"roles":[],"nick":null,"joined_at":"2026-11-01T10:00:00.000000+00:00"},"channel_id":"1560000000000000100","guild_id":"1560000000000000000"}}`, i, uid, 1796000000+i, u)
		case 5:
			d = fmt.Sprintf(`{"t":"GUILD_MEMBER_LIST_UPDATE","s":%d,"op":0,"d":{"ops":[{"op":"UPDATE","index":%d,"item":{"member":{"user":{"username":"%s","id":"%d","global_name":"%[3]s","discriminator":"0","avatar":null},"roles":["1560000000000000001"],"presence":{"user":{"id":"%[4]d"},"status":"online","client_status":{"web":"online"},"activities":[]},"nick":null,"joined_at":"2026-11-01T10:00:00.000000+00:00"}}}],"online_count":812,"member_count":1520,"id":"everyone","guild_id":"1560000000000000000","groups":[{"id":"online","count":812},{"id":"offline","count":708}]}}`, i, i%100, u, uid)
		}
		out = append(out, []byte(d))
	}
	return out
}

// BenchmarkCompressMix compares the transport compressions on the event
// mix, one connection's context through the whole run: wire bytes per
// event (B/event) and compression time per event (ns/op per event).
//
//	go test -run '^$' -bench BenchmarkCompressMix -benchmem ./runtime/edge/gateway/
func BenchmarkCompressMix(b *testing.B) {
	mix := eventMix(600)
	raw := 0
	for _, m := range mix {
		raw += len(m)
	}
	for _, mode := range []struct {
		name string
		comp compression
	}{{"none", compressNone}, {"zlib-stream", compressStream}, {"zstd-stream", compressZstdStream}} {
		// park: the context gives its encoder back every park events,
		// as an idle session does between bursts (0: never), so the next
		// event starts with a fresh encoder: the ratio an idle-parked
		// session loses.
		for _, park := range []int{0, 100, 20, 5, 1} {
			name := mode.name
			if park > 0 {
				if mode.comp == compressNone {
					continue
				}
				name = fmt.Sprintf("%s/park-every-%d", mode.name, park)
			}
			b.Run(name, func(b *testing.B) {
				var sc streamCompressor
				if mode.comp != compressNone {
					sc = newStreamCompressor(mode.comp)
				}
				var wire int
				b.ResetTimer()
				for i := range b.N {
					m := mix[i%len(mix)]
					if sc == nil {
						wire += len(m)
						continue
					}
					if park > 0 && i%park == 0 {
						sc.park()
					}
					z, err := sc.compress(m)
					if err != nil {
						b.Fatal(err)
					}
					wire += len(z)
				}
				b.ReportMetric(float64(wire)/float64(b.N), "B/event")
				b.ReportMetric(float64(raw)/float64(len(mix)), "rawB/event")
			})
		}
	}
}

// BenchmarkStreamContextHeap reports the heap one connection's streaming
// compression context holds once it has sent a message: what a
// zlib-stream or zstd-stream session costs beyond an uncompressed one,
// idle or not (the context is the stream's state and lives as long as
// the connection).
//
//	go test -run '^$' -bench StreamContextHeap -benchtime 200x ./runtime/edge/gateway/
func BenchmarkStreamContextHeap(b *testing.B) {
	msg := eventMix(1)[0]
	for _, mode := range []struct {
		name string
		comp compression
	}{{"zlib-stream", compressStream}, {"zstd-stream", compressZstdStream}} {
		b.Run(mode.name, func(b *testing.B) {
			keep := make([]streamCompressor, b.N)
			runtime.GC()
			var m0, m1, m2 runtime.MemStats
			runtime.ReadMemStats(&m0)
			for i := range b.N {
				sc := newStreamCompressor(mode.comp)
				if _, err := sc.compress(msg); err != nil {
					b.Fatal(err)
				}
				keep[i] = sc
			}
			runtime.GC()
			runtime.ReadMemStats(&m1)
			b.ReportMetric(float64(m1.HeapInuse-m0.HeapInuse)/float64(b.N), "heap-B/context")
			// Parked, as after Config.CompressIdle without a send: the
			// encoders go back to the pool, which the collector empties
			// when nothing takes them (two cycles: sync.Pool's victim
			// cache outlives one).
			for _, sc := range keep {
				sc.park()
			}
			runtime.GC()
			runtime.GC()
			runtime.ReadMemStats(&m2)
			b.ReportMetric(float64(m2.HeapInuse-m0.HeapInuse)/float64(b.N), "heap-B/parked")
			runtime.KeepAlive(keep)
		})
	}
}
