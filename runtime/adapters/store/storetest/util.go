package storetest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/concord-chat/concord/runtime/adapters/store"
	"github.com/concord-chat/concord/runtime/base/snowflake"
)

// rid returns a random non-zero id with a plausible timestamp, so tests
// never collide with each other or with data already in the database.
func rid() snowflake.ID {
	for {
		if id := snowflake.ID(rand.Uint64() >> 1); id != 0 {
			return id
		}
	}
}

// rname returns a random username with the given stem.
func rname(stem string) string { return fmt.Sprintf("%s_%016x", stem, rand.Uint64()) }

// idAt returns an id minted at t with low bits lo (worker, process and
// sequence; lo < 1<<22).
func idAt(t time.Time, lo uint64) snowflake.ID {
	return snowflake.FromTime(t) | snowflake.ID(lo&(1<<22-1))
}

// base is an arbitrary fixed instant well inside the id space, aligned to
// nothing in particular.
var base = time.Date(2024, 3, 7, 13, 21, 5, 0, time.UTC)

// bucketStart returns the first instant of bucket k at the default width.
func bucketStart(k int64) time.Time {
	return time.UnixMilli(snowflake.Epoch + k*store.DefaultBucketWidth.Milliseconds()).UTC()
}

func bucketOf(id snowflake.ID) int64 { return store.Bucket(id, store.DefaultBucketWidth) }

// ms truncates t to milliseconds in UTC: Cassandra timestamps keep no more.
func ms(t time.Time) time.Time { return time.UnixMilli(t.UnixMilli()).UTC() }

// fullMessage returns a message with every field set.
func fullMessage(ch, guild, id snowflake.ID) store.Message {
	return store.Message{
		ID:              id,
		ChannelID:       ch,
		GuildID:         guild,
		AuthorID:        rid(),
		Content:         "hello ☃ " + id.String(),
		Type:            19,
		Flags:           4,
		TTS:             true,
		Pinned:          true,
		EditedAt:        ms(time.Now()),
		ReferenceID:     rid(),
		MentionEveryone: true,
		Mentions:        []snowflake.ID{rid(), rid()},
		MentionRoles:    []snowflake.ID{rid()},
		Attachments: []store.Attachment{
			{ID: rid(), Filename: "a.png", Size: 1234, URL: "https://cdn.example/a.png", ContentType: "image/png"},
			{ID: rid(), Filename: "b.txt", Size: 0, URL: "https://cdn.example/b.txt"},
		},
		Nonce:         "nonce-" + id.String(),
		Embeds:        `[{"type":"rich","title":"t ☃","fields":[{"name":"n","value":"v","inline":true}]}]`,
		Components:    `[{"type":1,"components":[{"type":2,"style":1,"custom_id":"ok","label":"OK"}]}]`,
		WebhookID:     rid(),
		WebhookName:   "Captain Hook ☃",
		WebhookAvatar: "0123abcd",
	}
}

// msg returns a small message.
func msg(ch, id snowflake.ID) store.Message {
	return store.Message{ID: id, ChannelID: ch, AuthorID: 42, Content: "m" + id.String()}
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// putAll writes messages for ids into ch, in parallel (the order of puts
// is not something a store may depend on).
func putAll(t testing.TB, s store.Store, ch snowflake.ID, ids []snowflake.ID) {
	t.Helper()
	ctx := ctxT(t)
	errs := make(chan error, len(ids))
	sem := make(chan struct{}, 16)
	for _, id := range ids {
		sem <- struct{}{}
		go func() {
			defer func() { <-sem }()
			errs <- s.PutMessage(ctx, msg(ch, id))
		}()
	}
	for range ids {
		if err := <-errs; err != nil {
			t.Fatalf("PutMessage: %v", err)
		}
	}
}

func msgIDs(ms []store.Message) []snowflake.ID {
	out := make([]snowflake.ID, len(ms))
	for i, m := range ms {
		out[i] = m.ID
	}
	return out
}

// pick returns ids[i] for each index, in the order given.
func pick(ids []snowflake.ID, idx ...int) []snowflake.ID {
	out := make([]snowflake.ID, len(idx))
	for i, j := range idx {
		out[i] = ids[j]
	}
	return out
}

// span returns ids[hi], ids[hi-1], ..., ids[lo]: newest first.
func span(ids []snowflake.ID, hi, lo int) []snowflake.ID {
	var out []snowflake.ID
	for i := hi; i >= lo; i-- {
		out = append(out, ids[i])
	}
	return out
}

func mustList(t testing.TB, s store.Store, ch snowflake.ID, q store.HistoryQuery) []snowflake.ID {
	t.Helper()
	got, err := s.ListMessages(ctxT(t), ch, q)
	if err != nil {
		t.Fatalf("ListMessages(%+v): %v", q, err)
	}
	for i, m := range got {
		if m.ChannelID != ch {
			t.Fatalf("ListMessages(%+v): message %v of channel %v", q, m.ID, m.ChannelID)
		}
		if i > 0 && got[i-1].ID <= m.ID {
			t.Fatalf("ListMessages(%+v): not strictly newest first: %v", q, msgIDs(got))
		}
	}
	return msgIDs(got)
}

func mustBuckets(t testing.TB, s store.Store, ch snowflake.ID) []int64 {
	t.Helper()
	got, err := s.Buckets(ctxT(t), ch)
	if err != nil {
		t.Fatalf("Buckets: %v", err)
	}
	return got
}

// wantBuckets computes the non-empty buckets of ids, newest first.
func wantBuckets(ids []snowflake.ID) []int64 {
	var out []int64
	for _, id := range ids {
		if b := bucketOf(id); !slices.Contains(out, b) {
			out = append(out, b)
		}
	}
	slices.Sort(out)
	slices.Reverse(out)
	return out
}

// allHistory pages back through the whole channel with Before.
func allHistory(t testing.TB, s store.Store, ch snowflake.ID, limit int) []snowflake.ID {
	t.Helper()
	var all []snowflake.ID
	var before snowflake.ID
	for pages := 0; ; pages++ {
		if pages > 100000 {
			t.Fatal("scroll-back does not terminate")
		}
		page := mustList(t, s, ch, store.HistoryQuery{Before: before, Limit: limit})
		if len(page) == 0 {
			return all
		}
		if len(all) > 0 && page[0] >= all[len(all)-1] {
			t.Fatalf("scroll-back went forward: %v after %v", page[0], all[len(all)-1])
		}
		all = append(all, page...)
		before = page[len(page)-1]
	}
}

func wantErr(t testing.TB, what string, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("%s: got error %v, want %v", what, err, target)
	}
}

func noErr(t testing.TB, what string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

func equalIDs(t testing.TB, what string, got, want []snowflake.ID) {
	t.Helper()
	if len(got) == 0 && len(want) == 0 {
		return
	}
	if !slices.Equal(got, want) {
		t.Fatalf("%s:\n got %v\nwant %v", what, got, want)
	}
}

// normalize makes values comparable across adapters: times in UTC at
// millisecond precision, empty slices nil.
func normalize(v any) any {
	rv := reflect.New(reflect.TypeOf(v)).Elem()
	rv.Set(reflect.ValueOf(v))
	normValue(rv)
	return rv.Interface()
}

var timeType = reflect.TypeOf(time.Time{})

func normValue(v reflect.Value) {
	switch {
	case v.Type() == timeType:
		t := v.Interface().(time.Time)
		if t.IsZero() {
			v.Set(reflect.ValueOf(time.Time{}))
		} else {
			v.Set(reflect.ValueOf(ms(t)))
		}
	case v.Kind() == reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			normValue(v.Field(i))
		}
	case v.Kind() == reflect.Slice:
		if v.Len() == 0 {
			v.Set(reflect.Zero(v.Type()))
			return
		}
		c := reflect.MakeSlice(v.Type(), v.Len(), v.Len())
		reflect.Copy(c, v)
		for i := 0; i < c.Len(); i++ {
			normValue(c.Index(i))
		}
		v.Set(c)
	}
}

func equal(t testing.TB, what string, got, want any) {
	t.Helper()
	g, w := normalize(got), normalize(want)
	if !reflect.DeepEqual(g, w) {
		t.Fatalf("%s:\n got %+v\nwant %+v", what, g, w)
	}
}
