package mention

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/concord-chat/concord/runtime/base/snowflake"
)

func TestParse(t *testing.T) {
	content := "hi <@1> <@!2> <@1> <@&7> @here"
	for _, tc := range []struct {
		name     string
		am       string // allowed_mentions JSON; "" for none
		users    []snowflake.ID
		roles    []snowflake.ID
		everyone bool
	}{
		{"no allowed_mentions parses all", "", []snowflake.ID{1, 2}, []snowflake.ID{7}, true},
		{"empty object parses none", `{}`, nil, nil, false},
		{"parse users only", `{"parse":["users"]}`, []snowflake.ID{1, 2}, nil, false},
		{"listed ids, as strings or numbers", `{"users":["2"],"roles":[7]}`, []snowflake.ID{2}, []snowflake.ID{7}, false},
		{"everyone", `{"parse":["everyone"]}`, nil, nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var am *Allowed
			if tc.am != "" {
				am = new(Allowed)
				if err := json.Unmarshal([]byte(tc.am), am); err != nil {
					t.Fatal(err)
				}
			}
			got := Parse(content, am)
			if !slices.Equal(got.Users, tc.users) || !slices.Equal(got.Roles, tc.roles) || got.Everyone != tc.everyone {
				t.Fatalf("Parse = %+v, want users %v roles %v everyone %v", got, tc.users, tc.roles, tc.everyone)
			}
		})
	}
}

func TestCheck(t *testing.T) {
	many := make([]snowflake.ID, MaxIDs+1)
	for _, tc := range []struct {
		am   *Allowed
		code string
	}{
		{nil, ""},
		{&Allowed{Parse: &[]string{"users", "roles", "everyone"}}, ""},
		{&Allowed{Parse: &[]string{"channels"}}, "BASE_TYPE_CHOICES"},
		{&Allowed{Parse: &[]string{"users"}, Users: []snowflake.ID{1}}, "MESSAGE_ALLOWED_MENTIONS_PARSE_EXCLUSIVE"},
		{&Allowed{Parse: &[]string{"roles"}, Roles: []snowflake.ID{1}}, "MESSAGE_ALLOWED_MENTIONS_PARSE_EXCLUSIVE"},
		{&Allowed{Users: many}, "BASE_TYPE_MAX_LENGTH"},
		{&Allowed{Roles: many}, "BASE_TYPE_MAX_LENGTH"},
	} {
		p := tc.am.Check()
		switch {
		case tc.code == "" && p != nil:
			t.Errorf("Check(%+v) = %v, want valid", tc.am, p)
		case tc.code != "" && (p == nil || p.Code != tc.code):
			t.Errorf("Check(%+v) = %v, want %s", tc.am, p, tc.code)
		}
	}
}
