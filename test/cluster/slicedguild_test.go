//go:build integration

package cluster

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/concord-chat/concord/operator/fleet/etcdfleet"
	"github.com/concord-chat/concord/runtime/adapters/registry"
)

// slicedGuild is the topology the sliced-guild tests share: one relay
// node, two guild nodes with --relay-threshold=2 (so three sessions are
// handed to relays), a gateway+api+presence node, and a guild whose
// relay list names the relay.
type slicedGuild struct {
	fleet     *etcdfleet.Registry
	guildRing *registry.LocalRing
	relay     *proc
	relayGRPC string
	guilds    map[string]*proc
	app       *proc
	api       rest
	owner     clusterUser
	members   []clusterUser
	guildID   string
	channelID string
	// ownerNode names the guild node that owns the guild at the start;
	// victim is its process.
	ownerNode string
	victim    *proc
}

// startSlicedGuild starts the topology under name and creates the guild
// with the given number of members besides its owner.
func startSlicedGuild(t *testing.T, ctx context.Context, name string, members int) *slicedGuild {
	t.Helper()
	env := setupCluster(t, ctx, name)
	reg := env.registry(t)
	sg := &slicedGuild{fleet: &etcdfleet.Registry{Reg: reg}, guildRing: watchRing(t, ctx, reg, registry.RoleGuild)}
	common := env.nodeArgs()
	sg.relayGRPC = freeAddr(t)
	sg.relay = startNode(t, "relay-1", freeAddr(t), append([]string{"--roles=relay", "--grpc=" + sg.relayGRPC, "--worker=1", "--data-dir=" + t.TempDir()}, common...)...)
	sg.guilds = map[string]*proc{
		"guild-1": startRole(t, "guild-1", "guild", common, workerFlag(2), "--relay-threshold=2"),
		"guild-2": startRole(t, "guild-2", "guild", common, workerFlag(3), "--relay-threshold=2"),
	}
	// The presence role serves op 14 on the gateway (presencerole).
	sg.app = startRole(t, "app-1", "gateway,api,presence", common, workerFlag(4))
	deadline := time.Now().Add(45 * time.Second)
	for _, p := range []*proc{sg.relay, sg.guilds["guild-1"], sg.guilds["guild-2"], sg.app} {
		p.waitReady(t, deadline)
	}
	waitRing(t, sg.guildRing, 2)

	sg.api = rest{addr: sg.app.http, client: &http.Client{Timeout: 20 * time.Second}}
	sg.owner = newUser(t, sg.api, "owner")
	for i := range members {
		sg.members = append(sg.members, newUser(t, sg.api, fmt.Sprintf("m%d", i)))
	}
	sg.guildID, sg.channelID = guildWithMembers(t, sg.api, sg.owner, name+" guild", sg.members...)
	if err := sg.fleet.SetRelays(ctx, sg.guildID, []string{sg.relayGRPC}); err != nil {
		t.Fatal(err)
	}
	node, ok := sg.guildRing.Owner(mustID(t, sg.guildID))
	if !ok {
		t.Fatal("no guild node owns the guild")
	}
	sg.ownerNode, sg.victim = node.Name, sg.guilds[node.Name]
	return sg
}
