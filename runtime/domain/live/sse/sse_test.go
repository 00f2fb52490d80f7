package sse_test

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/concord-chat/concord/runtime/domain/live/sse"
)

func TestParseStandardExamples(t *testing.T) {
	in := ": ping\r\n\r\n" +
		"data: YHOO\ndata: +2\ndata: 10\n\n" +
		"event: add\rid: 7\rdata:73857293\r\r" +
		"data\n\n" +
		"id: 8\nretry: 1500\n\n" + // no data: not dispatched, id kept
		"event: x\ndata:  two spaces\n\n" +
		"data: tail" // unterminated: discarded
	r := sse.NewReader(strings.NewReader(in), 0)
	want := []sse.Event{
		{Type: "message", Data: []byte("YHOO\n+2\n10")},
		{Type: "add", ID: "7", HasID: true, Data: []byte("73857293")},
		{Type: "message", ID: "7", Data: []byte("")},
		{Type: "x", ID: "8", Data: []byte(" two spaces")},
	}
	for i, w := range want {
		got, err := r.Next()
		if err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
		if got.Type != w.Type || got.ID != w.ID || got.HasID != w.HasID || !bytes.Equal(got.Data, w.Data) {
			t.Fatalf("event %d = %v, want %v", i, got, w)
		}
	}
	if _, err := r.Next(); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("tail: %v", err)
	}
	if r.Comments != 1 || r.Retry != 1500 {
		t.Fatalf("comments %d retry %d", r.Comments, r.Retry)
	}
}

func TestLineLimit(t *testing.T) {
	r := sse.NewReader(strings.NewReader("data: "+strings.Repeat("x", 100)+"\n\n"), 50)
	if _, err := r.Next(); !errors.Is(err, sse.ErrLineTooLong) {
		t.Fatalf("err = %v", err)
	}
}

func FuzzReader(f *testing.F) {
	f.Add([]byte("event: comment\nid: 5\ndata: {\"a\":1}\n\n: ping\n\n"))
	f.Add([]byte("data\r\ndata:\r\n\r\nid: \x00\nretry: x\n\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		r := sse.NewReader(bytes.NewReader(b), 256)
		for range 1000 {
			ev, err := r.Next()
			if err != nil {
				return
			}
			if len(ev.Data) > 256 {
				t.Fatalf("data of %d bytes past the limit", len(ev.Data))
			}
		}
	})
}

// FuzzRoundTrip checks that what AppendEvent writes parses back to the
// same event, for any type, id and data the gateway could send.
func FuzzRoundTrip(f *testing.F) {
	f.Add("comment", "12", []byte(`{"text":"hi"}`))
	f.Add("retract", "", []byte("a\nb\r\nc\rd"))
	f.Fuzz(func(t *testing.T, typ, id string, data []byte) {
		if strings.ContainsAny(typ, "\r\n") || strings.ContainsAny(id, "\r\n\x00") || typ == "" {
			return
		}
		if strings.HasPrefix(typ, " ") || strings.HasPrefix(id, " ") {
			return // one leading space is the separator
		}
		buf := sse.AppendComment(nil, "ping")
		buf = sse.AppendEvent(buf, typ, id, data)
		r := sse.NewReader(bytes.NewReader(buf), 1<<20)
		ev, err := r.Next()
		if err != nil {
			t.Fatal(err)
		}
		norm := strings.NewReplacer("\r\n", "\n", "\r", "\n").Replace(string(data))
		if ev.Type != typ || ev.ID != id || ev.HasID != (id != "") || string(ev.Data) != norm {
			t.Fatalf("got %v, want type=%q id=%q data=%q", ev, typ, id, norm)
		}
	})
}
