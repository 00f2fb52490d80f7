package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/concord-chat/concord/runtime/app"
	"github.com/concord-chat/concord/runtime/config"
)

func newServeCommand() *cobra.Command {
	cfg := config.Default()
	var logFormat, logLevel, roles string
	rateLimits := true
	var pf podFlags
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the chosen roles as one node of a Concord cluster",
		Long: `concord serve runs some of the roles gateway, api, guild, data, readstate,
presence, relay, voice, live-api, live-gateway, live-router, live-archiver,
live-relay and live-moderation as one node of a cluster; concord dev is every role in one process, built by
the same code with the same configuration and flags. Nodes register in etcd (--registry=etcd://host:port) under a lease of
--lease-ttl and share the store (--store=cassandra://host:port/keyspace) and
the token key (--server-key). Guild nodes own the guilds a consistent-hash
ring over the live guild nodes gives them and run the bot platform
(applications, commands, interactions) for them; api nodes forward each REST
request to the owner of its guild (bot routes by the guild they act on) and
answer GET /gateway/bot; gateway nodes (also on the root path, as discord.py
connects) admit identifies as concord dev does, subscribe their sessions on
the owners and resubscribe them when a guild moves.

Data nodes (--roles=data) serve the message reads and writes of the channels
a consistent-hash ring over the live data nodes gives them, merging identical
in-flight reads; other nodes send them there with --data-nodes=ring (by
default they call the store directly) and retry on the new owner when a data
node dies.

With --eventlog=kafka://host:port on every node, guild nodes publish message
events to Kafka through an outbox in --data-dir, and read-state nodes
(--roles=readstate) count mentions from it (consumer group "readstate"),
keep read markers in the store's keyspace and serve acks to guild nodes and
READY's read_state to gateway nodes. Run two or more read-state nodes: users
are sharded on a ring over them, and a dead node's users move to the others.

Live comments: live-api serves the /v1/streams contract (comments,
moderation, reactions, scroll-back) and forwards GET /v1/streams/{id}/live to
a live-gateway node of the registry unless the node runs live-gateway too;
live-gateway serves that SSE; live-router and live-archiver consume the event
log; live-moderation scores every comment (--live-classifier) and takes down
what it flags; live-relay is a node of the relay tree the router and the
gateways use with --live-relay=tree (else Redis pub/sub). They run on
--eventlog=kafka://, --store=cassandra:// and --redis=redis:// (the API,
gateway and router); --live-prefix names their topics, consumer groups and
Redis keys.

A local Pebble store (--store=pebble:DIR) and --registry=embedded are
accepted only when one process runs every role.

Give each process its own --node. Its snowflake worker/process pair is
claimed in the registry (--snowflake-id=auto, the default without --worker
and --process), or set by hand with --worker/--process or --snowflake-id=W/P.

The operator configures its pods through the environment: CONCORD_CLUSTER,
CONCORD_ADMIN (the admin listener, container port "admin"),
CONCORD_GATEWAY_POOL/_CLIENT_CLASS/_SESSIONS_TARGET on gateway pods and
CONCORD_GUILD_DEDICATED on a GuildPlacement's guild node. Relay nodes
(--roles=relay) are the fan-out tier of big guilds: the RelayTier controller
publishes their gRPC addresses under relays/<guild id> in the registry and
guild nodes send such a guild's events once per relay. Voice nodes
(--roles=voice) run one SFU each: a voice gateway on --voice-listen (plain,
behind the platform's TLS, unless --voice-tls=devca) and RTP on --voice-udp,
reporting their load to the registry every 2 s under voice/load/<id>.`,
		Example: `  concord serve --roles=guild --node=guild-1 --http=10.0.0.5:8080 --grpc=10.0.0.5:9090 --admin=10.0.0.5:9091 \
    --registry=etcd://etcd:2379 --store=cassandra://cassandra:9042/concord --server-key=$KEY`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log, err := newLogger(logFormat, logLevel)
			if err != nil {
				return err
			}
			for _, r := range strings.Split(roles, ",") {
				if r = strings.TrimSpace(r); r != "" {
					cfg.Roles = append(cfg.Roles, r)
				}
			}
			cfg.Logger = log
			cfg.NoRateLimits = !rateLimits
			cfg.DevUser = false
			if err := applyPodFlags(cmd.Flags(), &cfg, pf); err != nil {
				return err
			}
			if err := checkServeRedis(cfg); err != nil {
				return err
			}
			if err := followFaultClock(cmd.Context(), cfg); err != nil {
				return err
			}
			ctx := cmd.Context()
			n, err := app.Open(ctx, cfg, app.Options{})
			if err != nil {
				return fmt.Errorf("concord serve: %w", err)
			}
			defer n.Close()
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "Concord node %s (%s) is listening on http://%s\n", cfg.Node, strings.Join(cfg.Roles, ","), n.HTTPAddr())
			if a := n.GRPCAddr(); a != "" {
				fmt.Fprintf(out, "  gRPC:      %s\n", a)
			}
			fmt.Fprintf(out, "  Metrics:   http://%s/metrics\n", n.HTTPAddr())
			if a := n.AdminAddr(); a != "" {
				fmt.Fprintf(out, "  Admin:     http://%s/admin\n", a)
			}
			return n.Serve(ctx)
		},
	}
	fs := cmd.Flags()
	d := config.Default()
	bindConfigFlags(fs, &cfg, &logFormat, &logLevel)
	strFlag(fs, &roles, "roles", strings.Join(app.DefaultRoles, ","), "comma-separated roles to run: "+strings.Join(app.DefaultTables().Names(), ", "))
	strFlag(fs, &cfg.DataNodes, "data-nodes", d.DataNodes, "where message reads and writes go: local (the store directly) or ring (the data-role node owning the channel)")
	strFlag(fs, &cfg.GRPC, "grpc", d.GRPC, "listen address of the gRPC server between nodes (every role but api)")
	boolFlag(fs, &rateLimits, "rate-limits", true, "api nodes: apply the REST rate limits (per route bucket, global per bot, invalid-request bans) on the --redis counters; =false only for load tests")
	strFlag(fs, &cfg.Admin, "admin", "", "listen address of the admin endpoint (/admin/drain, /admin/guilds, /metrics, /healthz, /readyz) the operator and kubectl-concord call; empty serves /admin on --http (private networks only)")
	strFlag(fs, &cfg.AdvertiseHost, "advertise-host", "", "host other nodes reach this one at; empty uses the listeners' host")
	durFlag(fs, &cfg.LeaseTTL, "lease-ttl", d.LeaseTTL, "registry lease TTL: how long a dead node keeps its guilds")
	durFlag(fs, &cfg.ReadStateFlush, "readstate-flush-interval", d.ReadStateFlush, "readstate role: how long a read-state change may stay only in memory before it is written")
	boolFlag(fs, &cfg.Presence.Enabled, "presence", false, "gateway and guild nodes: presence, member lists and typing focus through the presence nodes (--roles=presence, users sharded on a ring over them)")
	durFlag(fs, &cfg.Presence.Window, "presence-window", d.Presence.Window, "presence role: coalescing window of status changes")
	durFlag(fs, &cfg.Presence.ReportInterval, "presence-report-interval", d.Presence.ReportInterval, "gateway nodes: how often sessions are re-reported to the presence node; the presence role uses it too (sessions expire after 3 intervals, a fresh node absorbs re-reports for 2)")
	durFlag(fs, &cfg.RetryInterval, "retry-interval", d.RetryInterval, "how often failed subscriptions are retried and guilds placed elsewhere unloaded")
	bindIdentifyFlags(fs, &cfg)
	bindTracingFlags(fs, &cfg, 0.01)
	bindPodFlags(fs, &cfg, &pf)
	return cmd
}
