package ratelimit

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
)

// peekBody reads up to MaxPeek+1 bytes of r's body and puts them back in
// front of the rest, so the handler reads the body unchanged.
func peekBody(r *http.Request) []byte {
	if r.Body == nil || r.Body == http.NoBody {
		return nil
	}
	// A read error is the handler's to see: it reads the same body.
	head, _ := io.ReadAll(io.LimitReader(r.Body, MaxPeek+1))
	r.Body = readCloser{io.MultiReader(bytes.NewReader(head), r.Body), r.Body}
	return head
}

type readCloser struct {
	io.Reader
	io.Closer
}

// hasField reports whether body, a JSON object, has one of the
// comma-separated top-level fields. A body too large to inspect counts as
// having them; one that is not a JSON object does not (the API refuses it).
func hasField(body []byte, fields string) bool {
	if len(body) > MaxPeek {
		return true
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(body, &obj) != nil {
		return false
	}
	for _, f := range strings.Split(fields, ",") {
		if _, ok := obj[strings.TrimSpace(f)]; ok {
			return true
		}
	}
	return false
}
