package app

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/concord-chat/concord/runtime/domain/event"
	"github.com/concord-chat/concord/runtime/services/catalog"
	"github.com/concord-chat/concord/runtime/services/wiring"
)

// A process whose roles need a port that neither the root nor any of its
// roles gives does not start: Open fails at once, naming the role and the
// port.
func TestOpenNamesAMissingPort(t *testing.T) {
	built := false
	tables := Tables{Chat: catalog.Chat, Table: []wiring.Role{{Name: "needy", Needs: []string{"no/such-port"},
		Build: func(context.Context, *wiring.Builder) error { built = true; return nil }}}}
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

// has reports whether the node's seams hold port k.
func hasPort[T any](n *Node, k wiring.Key[T]) bool {
	_, ok := wiring.Lookup(n.Seams(), k)
	return ok
}

// The root decides each port once, by whether the process runs every
// role: in process, the guilds are here (no placement ring, no GuildNode
// client, no session directory), their events go to this process's
// gateway, the voice role joins the in-process fleet; on a node of a
// cluster, the guilds are placed on the ring and reached over GuildNode,
// events go to the gateway nodes, and identify reads from the one guild
// reader. Read states, the bot store and the revocation path are given
// in both.
func TestRootGivesPortsByMode(t *testing.T) {
	if testing.Short() {
		t.Skip("opens a node with an embedded etcd")
	}
	ctx := context.Background()
	dev, err := Open(ctx, Config{Roles: DefaultTables().Names(), DataDir: t.TempDir(), HTTP: "127.0.0.1:0", Registry: "mem",
		Logger: slog.New(slog.DiscardHandler)}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	for name, want := range map[string]bool{
		"Sink": hasPort(dev, wiring.Sink), "LocalGateway": hasPort(dev, wiring.LocalGateway), "VoiceFleet": hasPort(dev, wiring.VoiceFleet),
		"ReadStates": hasPort(dev, wiring.ReadStates), "EventLog": hasPort(dev, wiring.EventLog), "Outbox": hasPort(dev, wiring.Outbox),
		"BotStore": hasPort(dev, wiring.BotStore), "Revocations": hasPort(dev, wiring.Revocations), "BotCounters": hasPort(dev, wiring.BotCounters),
		"no Placement": !hasPort(dev, wiring.Placement), "no GuildClient": !hasPort(dev, wiring.GuildClient), "no Sessions": !hasPort(dev, wiring.Sessions),
		"no GuildReader": !hasPort(dev, wiring.GuildReader), "no VoiceLoad": !hasPort(dev, wiring.VoiceLoad),
	} {
		if !want {
			t.Errorf("one process: %s", name)
		}
	}
	if g, _ := wiring.Lookup(dev.Seams(), wiring.GuildService); g != dev.Guilds() {
		t.Error("one process: the guild port is not the node's guild service")
	}

	node, err := Open(ctx, Config{Roles: DefaultRoles, Node: "solo", DataDir: t.TempDir(), HTTP: "127.0.0.1:0", GRPC: "127.0.0.1:0",
		LeaseTTL: 2 * time.Second, Logger: slog.New(slog.DiscardHandler)}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer node.Close()
	for name, want := range map[string]bool{
		"Placement": hasPort(node, wiring.Placement), "GuildClient": hasPort(node, wiring.GuildClient), "Sessions": hasPort(node, wiring.Sessions),
		"Gateways": hasPort(node, wiring.Gateways), "GuildReader": hasPort(node, wiring.GuildReader), "Sink": hasPort(node, wiring.Sink),
		"BotStore": hasPort(node, wiring.BotStore), "Revocations": hasPort(node, wiring.Revocations),
		"no LocalGateway": !hasPort(node, wiring.LocalGateway), "no VoiceFleet": !hasPort(node, wiring.VoiceFleet),
		// Read states travel on Kafka in a cluster; this node has none.
		"no ReadStates": !hasPort(node, wiring.ReadStates),
	} {
		if !want {
			t.Errorf("a cluster node: %s", name)
		}
	}
	sink, _ := wiring.Lookup(node.Seams(), wiring.Sink)
	gateways, _ := wiring.Lookup(node.Seams(), wiring.Gateways)
	if sink != event.Sink(gateways) {
		t.Error("a cluster node: the guild role's sink is not the node's one GatewayNode client")
	}
}
