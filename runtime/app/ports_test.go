package app

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/concord-chat/concord/runtime/role"
	"github.com/concord-chat/concord/runtime/roles"
)

// A process whose roles need a port that neither the root nor any of its
// roles gives does not start: Open fails at once, naming the role and the
// port.
func TestOpenNamesAMissingPort(t *testing.T) {
	built := false
	tables := Tables{Chat: roles.Chat, Table: []role.Role{{Name: "needy", Needs: []string{"no/such-port"},
		Build: func(context.Context, *role.Builder) error { built = true; return nil }}}}
	cfg := Config{Roles: tables.Names(), DataDir: t.TempDir(), HTTP: "127.0.0.1:0", Registry: "mem", Logger: slog.New(slog.DiscardHandler)}
	n, err := Open(context.Background(), cfg, Options{Tables: tables})
	if err == nil {
		n.Close()
		t.Fatal("a process with a role needing a port nothing gives started")
	}
	if !strings.Contains(err.Error(), `role needy needs port "no/such-port"`) || built {
		t.Fatalf("Open = %v (built %v), want the role and port named and the role not built", err, built)
	}
}

// Where every role is in the process, the root gives the in-process
// ports: the guild role's events go to this process's gateway, the voice
// role joins the in-process fleet, the SFU serves TLS from the dev CA,
// and there is no placement ring, session directory or load port.
func TestCheckDecidesTheInProcessVoiceTLS(t *testing.T) {
	c, inProc, err := Check(Config{Roles: DefaultTables().Names(), Registry: "mem"}, DefaultTables())
	if err != nil || !inProc || c.Voice.TLS != "devca" {
		t.Fatalf("every role: in process %v, voice TLS %q, %v; want in process, devca", inProc, c.Voice.TLS, err)
	}
	c, inProc, err = Check(Config{Roles: []string{"voice"}, Registry: "etcd://127.0.0.1:2379", Store: "cassandra://127.0.0.1:9042/ks",
		ServerKey: strings.Repeat("k", 32), EventLog: "kafka://127.0.0.1:9092"}, DefaultTables())
	if err != nil || inProc || c.Voice.TLS != "" {
		t.Fatalf("a voice node: in process %v, voice TLS %q, %v; want remote and the SFU's own default", inProc, c.Voice.TLS, err)
	}
}
