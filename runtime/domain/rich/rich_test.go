package rich

import (
	"encoding/json"
	"testing"

	"github.com/concord-chat/concord/runtime/base/rest"
)

func raws(ss ...string) []json.RawMessage {
	out := make([]json.RawMessage, len(ss))
	for i, s := range ss {
		out[i] = json.RawMessage(s)
	}
	return out
}

func TestModalComponents(t *testing.T) {
	ok := raws(`{"type":1,"components":[{"type":4,"custom_id":"a","style":1,"label":"A"}]}`,
		`{"type":18,"label":"B","component":{"type":4,"custom_id":"b","style":2}}`)
	if _, err := Components("data.components", ok, true); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{
		`{"type":1}`, // empty row
		`{"type":1,"components":[{"type":2,"style":1,"custom_id":"x","label":"x"}]}`, // a button in a modal
		`{"type":1,"components":[{"type":4,"custom_id":"a","style":3,"label":"A"}]}`, // bad style
	} {
		if _, err := Components("data.components", raws(bad), true); err == nil {
			t.Fatalf("modal accepted %s", bad)
		}
	}
	// Text inputs belong in modals only.
	if _, err := Components("components", raws(string(ok[0])), false); err == nil {
		t.Fatal("message accepted a text input")
	}
}

func TestFind(t *testing.T) {
	out, err := Components("components", raws(`{"type":1,"components":[{"type":2,"style":1,"custom_id":"go","label":"Go","disabled":true}]}`,
		`{"type":1,"components":[{"type":3,"custom_id":"pick","options":[{"label":"A","value":"a"}]}]}`), false)
	if err != nil {
		t.Fatal(err)
	}
	stored, _ := json.Marshal(out)
	if it, ok := Find(string(stored), "go"); !ok || it.Type != Button || !it.Disabled {
		t.Fatalf("go = %+v %v", it, ok)
	}
	if it, ok := Find(string(stored), "pick"); !ok || it.Type != StringSelect || len(it.Options) != 1 || it.Options[0] != "a" {
		t.Fatalf("pick = %+v %v", it, ok)
	}
	if _, ok := Find(string(stored), "forged"); ok {
		t.Fatal("found a custom_id the message does not carry")
	}
	if _, ok := Find("", "go"); ok {
		t.Fatal("found a component in an empty list")
	}
}

// FuzzEmbedsAndComponents: arbitrary bytes never panic, and whatever is
// accepted is valid JSON that validates again unchanged.
func FuzzEmbedsAndComponents(f *testing.F) {
	f.Add(`[{"title":"t","fields":[{"name":"a","value":"b"}],"footer":{"text":"x"}}]`)
	f.Add(`[{"type":1,"components":[{"type":2,"style":5,"url":"https://a.b","label":"l"}]}]`)
	f.Add(`[{"type":1,"components":[{"type":3,"custom_id":"s","options":[{"label":"a","value":"a"}],"max_values":1}]}]`)
	f.Add(`[{"description":"` + "\xff" + `"}]`)
	f.Fuzz(func(t *testing.T, s string) {
		var list []json.RawMessage
		if json.Unmarshal([]byte(s), &list) != nil {
			return
		}
		for _, check := range []func([]json.RawMessage) ([]json.RawMessage, error){
			func(l []json.RawMessage) ([]json.RawMessage, error) { return Embeds("embeds", l) },
			func(l []json.RawMessage) ([]json.RawMessage, error) { return Components("components", l, false) },
			func(l []json.RawMessage) ([]json.RawMessage, error) { return Components("components", l, true) },
		} {
			out, err := check(list)
			if err != nil {
				if _, ok := err.(*rest.Error); !ok {
					t.Fatalf("error %T %v is not a Discord error", err, err)
				}
				continue
			}
			again, err := check(out)
			if err != nil {
				t.Fatalf("normalised output refused: %v\n%s", err, out)
			}
			a, _ := json.Marshal(out)
			b, _ := json.Marshal(again)
			if string(a) != string(b) {
				t.Fatalf("not idempotent:\n%s\n%s", a, b)
			}
		}
	})
}
