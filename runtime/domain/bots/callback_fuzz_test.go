package bots

import (
	"encoding/json"
	"errors"
	"net/http"
	"testing"
)

// FuzzDecodeCallback feeds interaction callback bodies, which bots send
// over the network, to the decoder for every interaction type: it never
// panics, refuses with a Discord 400, and what it accepts is a callback
// type the interaction allows, within Discord's limits.
func FuzzDecodeCallback(f *testing.F) {
	for _, s := range []string{
		`{"type":4,"data":{"content":"pong"}}`,
		`{"type":4,"data":{"content":"x","flags":64,"embeds":[{"title":"t","fields":[{"name":"n","value":"v"}]}]}}`,
		`{"type":4,"data":{"components":[{"type":1,"components":[{"type":2,"style":1,"label":"ok","custom_id":"a"}]}]}}`,
		`{"type":5}`, `{"type":6}`, `{"type":7,"data":{"content":"edited"}}`,
		`{"type":8,"data":{"choices":[{"name":"a","value":"a"}]}}`,
		`{"type":9,"data":{"custom_id":"m","title":"Modal","components":[{"type":1,"components":[{"type":4,"custom_id":"f","label":"F","style":1}]}]}}`,
		`{"type":4,"data":{"content":""}}`, `{"type":1}`, `{"type":"4"}`, `[]`, `null`, `{"type":4,"data":[]}`,
	} {
		f.Add([]byte(s), InteractionApplicationCommand)
		f.Add([]byte(s), InteractionMessageComponent)
	}
	f.Fuzz(func(t *testing.T, body []byte, ixType int) {
		req, err := decodeCallback(body, ixType)
		if err != nil {
			var ae *APIError
			if !errors.As(err, &ae) {
				t.Fatalf("error %T (%v) is not a Discord error", err, err)
			}
			if ae.Status != http.StatusBadRequest || (ae.Code != 50035 && ae.Code != 50006 && ae.Code != 50109) {
				t.Fatalf("refusal maps to %d/%d: %v", ae.Status, ae.Code, err)
			}
			if _, merr := json.Marshal(ae); merr != nil {
				t.Fatalf("error does not encode: %v", merr)
			}
			return
		}
		allowed := false
		for _, typ := range callbackAllowed[ixType] {
			allowed = allowed || typ == req.Type
		}
		if !allowed {
			t.Fatalf("accepted callback type %d for interaction type %d", req.Type, ixType)
		}
		d := req.Data
		if d.Content != nil && runes(*d.Content) > maxContentRunes {
			t.Fatalf("accepted %d characters", runes(*d.Content))
		}
		if d.Components != nil && len(*d.Components) > maxComponents {
			t.Fatalf("accepted %d component rows", len(*d.Components))
		}
		if req.Type == CallbackAutocompleteResult && (d.Choices == nil || len(*d.Choices) > maxOpt) {
			t.Fatal("accepted an autocomplete result without choices or with too many")
		}
		if req.Type == CallbackModal && (runes(d.CustomID) < 1 || runes(d.Title) < 1) {
			t.Fatal("accepted a modal without custom_id or title")
		}
	})
}
