package cluster

import (
	"strings"
	"testing"
)

func TestReadStateRoleNeedsKafka(t *testing.T) {
	base := func(roles []string, eventlog string) Config {
		return Config{Roles: roles,
			Store: "cassandra://127.0.0.1:9042/concord", ServerKey: "k", EventLog: eventlog,
		}
	}
	for _, tc := range []struct {
		roles    []string
		eventlog string
		want     string // "" accepts
	}{
		{[]string{RoleReadState}, "mem", "--eventlog=kafka://"},
		{[]string{RoleReadState}, "", "--eventlog=kafka://"},
		{[]string{RoleReadState}, "kafka://127.0.0.1:9092", ""},
		{[]string{"guild"}, "kafka://127.0.0.1:9092", ""},
		{[]string{"guild"}, "mem", ""},
		{[]string{"guild"}, "nats://x", "share only kafka://"},
	} {
		_, err := withDefaults(base(tc.roles, tc.eventlog))
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("roles %v, eventlog %q: %v", tc.roles, tc.eventlog, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("roles %v, eventlog %q: err %v, want one mentioning %q", tc.roles, tc.eventlog, err, tc.want)
		}
	}
}
