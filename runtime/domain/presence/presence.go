// Package presence is Concord's presence role: it knows every live session
// of every user (gateways report them), folds them into the one status and
// activity list others see, coalesces changes so a user broadcasts at most
// one update per window, and hands each update to a Router that delivers
// it to the user's friends and guilds.
//
// Presence is derived from live sessions and never stored: a restarted
// service rebuilds it from the gateways' periodic re-reports (Report).
package presence

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/event"
)

// Status is a presence status.
type Status string

// Statuses. Invisible is what a user chooses; others see it as Offline.
const (
	Online    Status = "online"
	Idle      Status = "idle"
	DND       Status = "dnd"
	Invisible Status = "invisible"
	Offline   Status = "offline"
)

// Client platforms of a session (client_status keys).
const (
	Desktop = "desktop"
	Mobile  = "mobile"
	Web     = "web"
)

// Limits on one update.
const (
	MaxActivities   = 10
	MaxActivityText = 128 // runes, for name, state and details
	MaxActivityURL  = 512
	maxActivityType = 6
)

// Activity is one entry of `activities` ("Playing X" is type 0 with name
// X).
type Activity struct {
	Name      string `json:"name"`
	Type      int    `json:"type"`
	URL       string `json:"url,omitempty"`
	State     string `json:"state,omitempty"`
	Details   string `json:"details,omitempty"`
	CreatedAt int64  `json:"created_at,omitempty"`
}

// ClientStatus is `client_status`: the status per platform; empty
// platforms are omitted.
type ClientStatus struct {
	Desktop Status `json:"desktop,omitempty"`
	Mobile  Status `json:"mobile,omitempty"`
	Web     Status `json:"web,omitempty"`
}

// Presence is a user's presence as others see it.
type Presence struct {
	Status       Status       `json:"status"`
	Activities   []Activity   `json:"activities"`
	ClientStatus ClientStatus `json:"client_status"`
}

// Equal reports whether two presences look the same to others.
func (p Presence) Equal(o Presence) bool {
	return p.Status == o.Status && p.ClientStatus == o.ClientStatus && slices.Equal(p.Activities, o.Activities)
}

// OfflinePresence is the presence of a user with no visible session.
func OfflinePresence() Presence { return Presence{Status: Offline, Activities: []Activity{}} }

// Event encodes PRESENCE_UPDATE for a guild (guildID 0 for friends, which
// omits guild_id).
func (p Presence) Event(userID, guildID snowflake.ID) json.RawMessage {
	b := make([]byte, 0, 160)
	b = append(b, `{"user":{"id":"`...)
	b = strconv.AppendUint(b, uint64(userID), 10)
	b = append(b, `"},`...)
	if guildID != 0 {
		b = append(b, `"guild_id":"`...)
		b = strconv.AppendUint(b, uint64(guildID), 10)
		b = append(b, `",`...)
	}
	rest, err := json.Marshal(p)
	if err != nil {
		// Presence holds only strings and integers.
		panic("presence: encode: " + err.Error())
	}
	return append(b, rest[1:]...)
}

// Update is a client's op 3 (or IDENTIFY's `presence`).
type Update struct {
	Status     Status
	AFK        bool
	Activities []Activity
	// At is when the gateway received the update; it becomes the
	// session's UpdatedAt, which the gateway re-reports. Zero means the
	// service's clock.
	At time.Time
}

// ParseUpdate decodes and validates an op 3 `d`: `{"since","activities",
// "status","afk"}`, also accepting discordgo's legacy `game` and an empty
// status (online). Errors wrap ErrInvalid.
func ParseUpdate(d json.RawMessage) (Update, error) {
	var in struct {
		Activities []Activity `json:"activities"`
		Game       *Activity  `json:"game"`
		Status     string     `json:"status"`
		AFK        bool       `json:"afk"`
	}
	if err := json.Unmarshal(d, &in); err != nil {
		return Update{}, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	u := Update{Status: Status(in.Status), AFK: in.AFK, Activities: in.Activities}
	if len(u.Activities) == 0 && in.Game != nil && in.Game.Name != "" {
		u.Activities = []Activity{*in.Game}
	}
	if err := u.normalize(); err != nil {
		return Update{}, err
	}
	return u, nil
}

// normalize validates u and maps "" to online and "offline" to invisible.
func (u *Update) normalize() error {
	switch u.Status {
	case "":
		u.Status = Online
	case Offline:
		u.Status = Invisible
	case Online, Idle, DND, Invisible:
	default:
		return fmt.Errorf("%w: %w: %q", ErrInvalid, ErrUnknownStatus, u.Status)
	}
	if len(u.Activities) > MaxActivities {
		return fmt.Errorf("%w: %w: %d activities", ErrInvalid, ErrBadActivity, len(u.Activities))
	}
	for _, a := range u.Activities {
		switch {
		case a.Type < 0 || a.Type > maxActivityType:
			return fmt.Errorf("%w: %w: type %d", ErrInvalid, ErrBadActivity, a.Type)
		case a.Name == "" && a.Type != 4,
			utf8.RuneCountInString(a.Name) > MaxActivityText,
			utf8.RuneCountInString(a.State) > MaxActivityText,
			utf8.RuneCountInString(a.Details) > MaxActivityText,
			len(a.URL) > MaxActivityURL:
			return fmt.Errorf("%w: %w: name %.32q", ErrInvalid, ErrBadActivity, a.Name)
		}
	}
	if u.Activities == nil {
		u.Activities = []Activity{}
	}
	return nil
}

// SessionState is one live session as gateways report it.
type SessionState struct {
	Session event.SessionID
	UserID  snowflake.ID
	// Node is the gateway node holding the session.
	Node string
	// Client is Desktop, Mobile or Web (default Desktop).
	Client string
	// Status is the last status the session set (online, idle, dnd or
	// invisible); AFK marks a session its client reported away.
	Status     Status
	AFK        bool
	Activities []Activity
	// UpdatedAt is when the session last set its status; the newest
	// explicit choice among a user's sessions wins. Gateways re-report it
	// unchanged, so a rebuilt service folds the same way.
	UpdatedAt time.Time
}

// active reports whether the session counts as online (not idle).
func (s *SessionState) active() bool { return s.Status != Idle && !s.AFK }

// clientRank orders platforms for merged activities: desktop first.
func clientRank(c string) int {
	switch c {
	case Desktop:
		return 0
	case Web:
		return 1
	}
	return 2
}

// Fold computes the presence others see from a user's sessions:
//   - no session: offline;
//   - the user's explicit choice is the status of the session that most
//     recently set online, dnd or invisible (idle and AFK are automatic
//     and never override a choice); dnd applies to every session and
//     invisible shows as offline with no activities;
//   - otherwise online if any session is active, idle if all are idle;
//   - activities are merged, desktop's first, then web's, then mobile's,
//     without duplicates (same type and name), at most MaxActivities.
func Fold(sessions []*SessionState) Presence {
	if len(sessions) == 0 {
		return OfflinePresence()
	}
	ss := slices.Clone(sessions)
	slices.SortFunc(ss, func(a, b *SessionState) int {
		if c := clientRank(a.Client) - clientRank(b.Client); c != 0 {
			return c
		}
		if c := a.UpdatedAt.Compare(b.UpdatedAt); c != 0 {
			return -c
		}
		switch {
		case a.Session < b.Session:
			return -1
		case a.Session > b.Session:
			return 1
		}
		return 0
	})
	var choice *SessionState
	for _, s := range ss {
		if s.Status == Idle {
			continue
		}
		if choice == nil || s.UpdatedAt.After(choice.UpdatedAt) ||
			(s.UpdatedAt.Equal(choice.UpdatedAt) && s.Session > choice.Session) {
			choice = s
		}
	}
	explicit := Online
	if choice != nil {
		explicit = choice.Status
	}
	if explicit == Invisible {
		return OfflinePresence()
	}
	p := Presence{Activities: []Activity{}}
	anyActive := false
	for _, s := range ss {
		st := Idle
		if s.active() {
			st = Online
			anyActive = true
		}
		if explicit == DND {
			st = DND
		}
		cs := &p.ClientStatus.Desktop
		switch s.Client {
		case Mobile:
			cs = &p.ClientStatus.Mobile
		case Web:
			cs = &p.ClientStatus.Web
		}
		if *cs == "" || *cs == Idle {
			*cs = st
		}
		for _, a := range s.Activities {
			if len(p.Activities) < MaxActivities && !slices.ContainsFunc(p.Activities, func(x Activity) bool {
				return x.Type == a.Type && x.Name == a.Name
			}) {
				p.Activities = append(p.Activities, a)
			}
		}
	}
	switch {
	case explicit == DND:
		p.Status = DND
	case anyActive:
		p.Status = Online
	default:
		p.Status = Idle
	}
	return p
}

// ClientKind maps IDENTIFY's `properties` to a client_status platform:
// Mobile for Discord's Android and iOS clients (and an os of "android" or
// "ios"), Web for a browser, Desktop otherwise (bots included).
func ClientKind(os, browser string) string {
	b := strings.ToLower(browser)
	o := strings.ToLower(os)
	switch {
	case strings.Contains(b, "android") || strings.Contains(b, "ios") || o == "android" || o == "ios":
		return Mobile
	case strings.Contains(b, "chrome") || strings.Contains(b, "firefox") || strings.Contains(b, "safari") ||
		strings.Contains(b, "edge") || strings.Contains(b, "opera"):
		return Web
	}
	return Desktop
}
