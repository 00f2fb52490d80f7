package presence

import (
	"encoding/json"
	"errors"
	"testing"
	"unicode/utf8"
)

// FuzzParseUpdate: any op 3 payload either fails with ErrInvalid or yields
// an update within the limits.
func FuzzParseUpdate(f *testing.F) {
	f.Add([]byte(`{"since":0,"game":{"name":"Go","type":0},"status":"","afk":false}`))
	f.Add([]byte(`{"since":null,"activities":[{"name":"Doom","type":0,"state":"x"}],"status":"dnd","afk":true}`))
	f.Add([]byte(`{"status":"offline","activities":[{"name":"","type":4,"state":"hi"}]}`))
	f.Add([]byte(`{"status":"away"}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, d []byte) {
		u, err := ParseUpdate(json.RawMessage(d))
		if err != nil {
			if !errors.Is(err, ErrInvalid) || CloseCode(err) != CloseDecodeError {
				t.Fatalf("error %v does not map to 4002", err)
			}
			return
		}
		switch u.Status {
		case Online, Idle, DND, Invisible:
		default:
			t.Fatalf("accepted status %q", u.Status)
		}
		if len(u.Activities) > MaxActivities || u.Activities == nil {
			t.Fatalf("activities %v", u.Activities)
		}
		for _, a := range u.Activities {
			if utf8.RuneCountInString(a.Name) > MaxActivityText || utf8.RuneCountInString(a.State) > MaxActivityText ||
				utf8.RuneCountInString(a.Details) > MaxActivityText || len(a.URL) > MaxActivityURL || a.Type < 0 || a.Type > 6 {
				t.Fatalf("accepted activity %+v", a)
			}
		}
		var p map[string]any
		if err := json.Unmarshal(Fold([]*SessionState{{Session: "s", Status: u.Status, Activities: u.Activities}}).Event(1, 2), &p); err != nil {
			t.Fatalf("event of an accepted update does not decode: %v", err)
		}
	})
}
