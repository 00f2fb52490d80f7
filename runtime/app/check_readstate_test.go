package app

import (
	"strings"
	"testing"

	"github.com/concord-chat/concord/runtime/services/readstaterole"
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
		{[]string{readstaterole.Name}, "mem", "--eventlog=kafka://"},
		{[]string{readstaterole.Name}, "", "--eventlog=kafka://"},
		{[]string{readstaterole.Name}, "kafka://127.0.0.1:9092", ""},
		{[]string{"guild"}, "kafka://127.0.0.1:9092", ""},
		{[]string{"guild"}, "mem", ""},
		{[]string{"guild"}, "nats://x", "share only kafka://"},
	} {
		_, _, err := Check(base(tc.roles, tc.eventlog), DefaultTables())
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("roles %v, eventlog %q: %v", tc.roles, tc.eventlog, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("roles %v, eventlog %q: err %v, want one mentioning %q", tc.roles, tc.eventlog, err, tc.want)
		}
	}
}
