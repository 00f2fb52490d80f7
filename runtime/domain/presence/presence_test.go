package presence

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/concord-chat/concord/runtime/domain/event"
)

var t0 = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

func st(id string, client string, status Status, at time.Duration, acts ...Activity) *SessionState {
	return &SessionState{Session: event.SessionID(id), UserID: 1, Client: client, Status: status,
		Activities: acts, UpdatedAt: t0.Add(at)}
}

func game(name string) Activity { return Activity{Name: name} }

func TestFold(t *testing.T) {
	many := make([]Activity, 12)
	for i := range many {
		many[i] = game(fmt.Sprint("g", i))
	}
	tests := []struct {
		name     string
		sessions []*SessionState
		want     Presence
	}{
		{"none", nil, OfflinePresence()},
		{"online beats idle", []*SessionState{st("a", Desktop, Online, 0), st("b", Mobile, Idle, time.Second)},
			Presence{Status: Online, Activities: []Activity{}, ClientStatus: ClientStatus{Desktop: Online, Mobile: Idle}}},
		{"all idle", []*SessionState{st("a", Desktop, Idle, 0), st("b", Web, Idle, 0)},
			Presence{Status: Idle, Activities: []Activity{}, ClientStatus: ClientStatus{Desktop: Idle, Web: Idle}}},
		{"afk counts as idle", []*SessionState{{Session: "a", Client: Desktop, Status: Online, AFK: true}},
			Presence{Status: Idle, Activities: []Activity{}, ClientStatus: ClientStatus{Desktop: Idle}}},
		{"dnd applies to every session", []*SessionState{st("a", Desktop, DND, time.Second), st("b", Mobile, Online, 0)},
			Presence{Status: DND, Activities: []Activity{}, ClientStatus: ClientStatus{Desktop: DND, Mobile: DND}}},
		{"later online choice clears dnd", []*SessionState{st("a", Desktop, DND, 0), st("b", Mobile, Online, time.Second)},
			Presence{Status: Online, Activities: []Activity{}, ClientStatus: ClientStatus{Desktop: Online, Mobile: Online}}},
		{"idle does not clear dnd", []*SessionState{st("a", Desktop, DND, 0), st("b", Mobile, Idle, time.Second)},
			Presence{Status: DND, Activities: []Activity{}, ClientStatus: ClientStatus{Desktop: DND, Mobile: DND}}},
		{"invisible shows offline without activities", []*SessionState{st("a", Desktop, Invisible, time.Second, game("X")), st("b", Mobile, Online, 0)},
			OfflinePresence()},
		{"activities merged desktop first without duplicates", []*SessionState{
			st("m", Mobile, Online, 0, game("Chess"), game("Go")), st("d", Desktop, Online, 0, game("Go"), game("Doom"))},
			Presence{Status: Online, Activities: []Activity{game("Go"), game("Doom"), game("Chess")}, ClientStatus: ClientStatus{Desktop: Online, Mobile: Online}}},
		{"at most ten activities", []*SessionState{st("a", Desktop, Online, 0, many...)},
			Presence{Status: Online, Activities: many[:MaxActivities], ClientStatus: ClientStatus{Desktop: Online}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Fold(tt.sessions); !got.Equal(tt.want) {
				t.Fatalf("Fold = %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

func TestParseUpdate(t *testing.T) {
	u, err := ParseUpdate(json.RawMessage(`{"since":0,"game":{"name":"Go","type":0},"status":"","afk":false}`))
	if err != nil || u.Status != Online || len(u.Activities) != 1 || u.Activities[0].Name != "Go" {
		t.Fatalf("discordgo legacy update = %+v, %v", u, err)
	}
	u, err = ParseUpdate(json.RawMessage(`{"since":null,"activities":[{"name":"Doom","type":0}],"status":"offline","afk":true}`))
	if err != nil || u.Status != Invisible || !u.AFK {
		t.Fatalf("offline update = %+v, %v", u, err)
	}
	long := strings.Repeat("é", MaxActivityText+1)
	tooMany := "[" + strings.Repeat(`{"name":"x","type":0},`, MaxActivities) + `{"name":"x","type":0}]`
	bad := map[string]string{
		"unknown status":     `{"status":"away","activities":[]}`,
		"long name":          `{"status":"online","activities":[{"name":"` + long + `","type":0}]}`,
		"long state":         `{"status":"online","activities":[{"name":"a","state":"` + long + `","type":4}]}`,
		"unknown type":       `{"status":"online","activities":[{"name":"a","type":9}]}`,
		"too many":           `{"status":"online","activities":` + tooMany + `}`,
		"not an object":      `[1,2]`,
		"status not astring": `{"status":5}`,
	}
	for name, d := range bad {
		_, err := ParseUpdate(json.RawMessage(d))
		if !errors.Is(err, ErrInvalid) || CloseCode(err) != CloseDecodeError {
			t.Errorf("%s: err = %v, close %d", name, err, CloseCode(err))
		}
	}
	if _, err := ParseUpdate(json.RawMessage(`{"status":"dnd","activities":[{"name":"` + strings.Repeat("é", MaxActivityText) + `","type":0}]}`)); err != nil {
		t.Fatalf("128-rune name refused: %v", err)
	}
}

func TestPresenceEvent(t *testing.T) {
	p := Presence{Status: Idle, Activities: []Activity{game("Go")}, ClientStatus: ClientStatus{Mobile: Idle}}
	var got map[string]any
	if err := json.Unmarshal(p.Event(42, 7), &got); err != nil {
		t.Fatal(err)
	}
	if got["guild_id"] != "7" || got["status"] != "idle" || got["user"].(map[string]any)["id"] != "42" ||
		got["client_status"].(map[string]any)["mobile"] != "idle" || len(got["activities"].([]any)) != 1 {
		t.Fatalf("event = %v", got)
	}
	got = nil
	if err := json.Unmarshal(OfflinePresence().Event(42, 0), &got); err != nil {
		t.Fatal(err)
	}
	if _, has := got["guild_id"]; has {
		t.Fatalf("friend event has guild_id: %v", got)
	}
	if acts, ok := got["activities"].([]any); !ok || len(acts) != 0 {
		t.Fatalf("offline activities = %v", got["activities"])
	}
}

func TestAudience(t *testing.T) {
	u1 := event.Session{ID: "u1"}
	u2 := event.Session{ID: "u2"}
	viewer := event.Session{ID: "v"}
	botWith := event.Session{ID: "b1", Bot: true, Intents: IntentGuildPresences}
	botWithout := event.Session{ID: "b2", Bot: true}
	users := []event.Session{u1, u2, viewer}
	bots := []event.Session{botWith, botWithout}
	ids := func(ss []event.Session) string {
		var out []string
		for _, s := range ss {
			out = append(out, string(s.ID))
		}
		slices.Sort(out)
		return strings.Join(out, ",")
	}
	a := Audience{LargeThreshold: 100, DropThreshold: 1000}
	if got := ids(a.Select(50, users, bots, []event.Session{viewer})); got != "b1,u1,u2,v" {
		t.Fatalf("small = %s", got)
	}
	if got := ids(a.Select(500, users, bots, []event.Session{viewer})); got != "b1,v" {
		t.Fatalf("large = %s", got)
	}
	if got := ids(a.Select(5000, users, bots, []event.Session{viewer})); got != "v" {
		t.Fatalf("huge = %s", got)
	}
}

func TestClientKind(t *testing.T) {
	cases := map[[2]string]string{
		{"linux", "Discord Client"}:    Desktop,
		{"Android", "Discord Android"}: Mobile,
		{"iOS", "Discord iOS"}:         Mobile,
		{"Windows", "Chrome"}:          Web,
		{"linux", "discordgo"}:         Desktop,
		{"", ""}:                       Desktop,
	}
	for in, want := range cases {
		if got := ClientKind(in[0], in[1]); got != want {
			t.Errorf("ClientKind(%q, %q) = %s, want %s", in[0], in[1], got, want)
		}
	}
}
