package cluster

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/concord-chat/concord/runtime/transport"
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

func TestGuildCallServesOnlyReadStateMethods(t *testing.T) {
	_, _, err := serveReadStateCall(context.Background(), nil, 1, "POST /channels/1/messages", nil)
	if !errors.Is(err, transport.ErrNotServed) {
		t.Fatalf("unknown Call method: %v, want transport.ErrNotServed", err)
	}
	status, _, err := serveReadStateCall(context.Background(), nil, 1, callCanView, []byte("{"))
	if err != nil || status != 400 {
		t.Fatalf("malformed CanView: %d, %v; want 400", status, err)
	}
}
