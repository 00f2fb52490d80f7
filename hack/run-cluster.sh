#!/usr/bin/env bash
# Starts a whole Concord cluster on this machine, from the project's own
# scripts, behind HAProxy, and stops it on Ctrl-C (make run-cluster):
#
#   etcd        3 members (built from the Go module proxy by hack/envtest/build.sh, cached)
#   Cassandra, Kafka, Redis, S3   the test servers (hack/cassandra, hack/kafka, hack/redis, hack/s3;
#               left running); attachments under the cluster's own prefix in the S3 bucket
#   concord serve   2 api, 2 gateway, 2 guild, 2 data, 2 readstate, 2 presence, 1 relay,
#               1 voice (an SFU: its voice gateway and UDP ports on loopback) and the
#               live-comment roles (live-api, live-gateway, live-router, live-archiver,
#               2 live-relay nodes of the relay tree, live-moderation with the Go classifier)
#   HAProxy     one public address: /gateway and WebSocket upgrades to the gateway nodes,
#               /v1/streams/{id}/live (the live comments' SSE) to the live gateway,
#               the rest of /v1/ (the live-comments API) to the live api, everything else
#               to the api nodes; health checks on /readyz, so a draining or unready node
#               gets no new connection while its open ones stay
#
# The state directory belongs to one cluster: its id (CLUSTER_DIR/cluster-id, made on
# first start) names the Cassandra keyspace, the Kafka topics and the live comments'
# Redis keys, so a new state directory (rm -rf .concord-cluster) starts a new, empty
# cluster instead of meeting the old one's users with new credentials. The script says
# which state it reused.
#
# Read states and presence are sharded by user on a ring over their live replicas
# (docs/architecture.md, "Read states and presence on rings"): killing one replica moves
# its users to the other.
#
# Environment (defaults in brackets):
#   CLUSTER_HTTP   public address HAProxy listens on [127.0.0.1:8090]
#   CLUSTER_PORTS  first of the ports the nodes, etcd, the SFU and HAProxy's stats use,
#                  72 in all (TCP, and UDP for the SFU's media) [18100]
#   CLUSTER_DIR    state: cluster id, etcd data, node data, logs, server key, dev user [./.concord-cluster]
#   CLUSTER_KEYSPACE  Cassandra keyspace [cluster_<the state directory's cluster id>]
#   CONCORD_BIN    the concord binary [built into bin/concord]
#   CLUSTER_ETCD   the etcd binary [built by hack/envtest/build.sh]
#   CLUSTER_PROXY_PROTOCOL  1: HAProxy sends PROXY protocol v2 and the nodes trust it, 0: off [1]
#   CONCORD_CACHE  where the test servers and etcd are cached [~/.cache/concord]
#   REPLICATED     1: the store and event log are hack/replicated.sh's three Cassandra nodes
#                  (rf=3) and three Kafka brokers (replication 3) instead of the single-node
#                  test servers [0]; `make run-cluster REPLICATED=1`
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

LB=${CLUSTER_HTTP:-127.0.0.1:8090}
BASE=${CLUSTER_PORTS:-18100}
RUN=${CLUSTER_DIR:-$ROOT/.concord-cluster}
CACHE=${CONCORD_CACHE:-$HOME/.cache/concord}
export CONCORD_CACHE=$CACHE
FRESH=1
[[ -s $RUN/cluster-id ]] && FRESH=0
mkdir -p "$RUN/logs" "$RUN/nodes" "$RUN/etcd"
RUN=$(cd "$RUN" && pwd)

log() { printf '[run-cluster %s] %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }
die() { log "error: $*"; exit 1; }

# The cluster's identity: made with the state directory, so the keyspace
# (and the dev user in it) lives and dies with the directory that holds
# the dev user's password. The name has no "concord" prefix: the test
# suites' hack/cassandra/prune drops concord* keyspaces older than two
# hours, and a dev cluster lives longer than that.
LEGACY=0
if [[ ! -s $RUN/cluster-id && -s $RUN/dev-password ]]; then
	# A state directory of this script's earlier versions: its cluster
	# lives in the keyspace they all used.
	LEGACY=1
	FRESH=0
else
	[[ -s $RUN/cluster-id ]] || head -c 5 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$RUN/cluster-id"
	CLUSTER_ID=$(cat "$RUN/cluster-id")
	[[ $CLUSTER_ID =~ ^[0-9a-f]+$ ]] || die "$RUN/cluster-id holds '$CLUSTER_ID', not a hex id: remove $RUN to start over"
fi
if ((LEGACY)); then
	KEYSPACE=${CLUSTER_KEYSPACE:-concord_cluster}
	log "reusing the state in $RUN (made before state directories had a cluster id): keyspace $KEYSPACE, its etcd data, server key, admin token and dev user"
elif ((FRESH)); then
	KEYSPACE=${CLUSTER_KEYSPACE:-cluster_$CLUSTER_ID}
	log "new state directory $RUN: cluster $CLUSTER_ID, keyspace $KEYSPACE (created empty), new server key, admin token and dev user"
else
	KEYSPACE=${CLUSTER_KEYSPACE:-cluster_$CLUSTER_ID}
	log "reusing the state in $RUN: cluster $CLUSTER_ID, keyspace $KEYSPACE, its etcd data, server key, admin token and dev user"
fi

# Every process this script starts, stopped in reverse on exit.
PIDS=()
NAMES=()
cleanup() {
	trap - INT TERM EXIT
	log "stopping ${#PIDS[@]} processes"
	local i
	for ((i = ${#PIDS[@]} - 1; i >= 0; i--)); do
		kill -TERM "${PIDS[i]}" 2>/dev/null || true
	done
	local deadline=$((SECONDS + 20))
	for ((i = ${#PIDS[@]} - 1; i >= 0; i--)); do
		while kill -0 "${PIDS[i]}" 2>/dev/null; do
			if ((SECONDS >= deadline)); then
				log "${NAMES[i]} did not stop within 20 s: kill -9"
				kill -KILL "${PIDS[i]}" 2>/dev/null || true
				break
			fi
			sleep 0.1
		done
	done
	log "stopped (Cassandra, Kafka, Redis and S3 keep running: make test uses them too)"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP
# Who started the script (make, a shell, a test): when it is gone — a
# SIGINT sent to make's pid alone ends make without reaching this script
# — the cluster stops rather than running on unowned.
PARENT=$PPID

# start NAME CMD...: runs CMD in the background, its output in logs/NAME.log.
start() {
	local name=$1
	shift
	"$@" >"$RUN/logs/$name.log" 2>&1 &
	PIDS+=($!)
	NAMES+=("$name")
}

# wait_http NAME URL [SECONDS]: waits until URL answers 200, failing with
# the process's log when it exits or the time runs out.
wait_http() {
	local name=$1 url=$2 limit=${3:-60} deadline i
	deadline=$((SECONDS + limit))
	until curl -fsS -o /dev/null --max-time 2 "$url" 2>/dev/null; do
		for i in "${!NAMES[@]}"; do
			if [[ ${NAMES[i]} == "$name" ]] && ! kill -0 "${PIDS[i]}" 2>/dev/null; then
				tail -n 30 "$RUN/logs/$name.log" >&2 || true
				die "$name exited before it was ready"
			fi
		done
		if ((SECONDS >= deadline)); then
			tail -n 30 "$RUN/logs/$name.log" >&2 || true
			die "$name not ready at $url within ${limit}s"
		fi
		sleep 0.2
	done
}

command -v curl >/dev/null || die "curl is needed"
if ! command -v haproxy >/dev/null; then
	command -v apt-get >/dev/null || die "haproxy is missing and apt-get is not available: install haproxy"
	log "installing haproxy from Debian"
	apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq haproxy >/dev/null ||
		die "apt-get install haproxy failed"
fi

BIN=${CONCORD_BIN:-}
if [[ -z $BIN ]]; then
	log "building bin/concord"
	go build -o bin/concord ./runtime/cmd/concord
	BIN=$ROOT/bin/concord
fi

# REPLICATED=1 switches the store and the event log to the three-node
# Cassandra (rf=3, LOCAL_QUORUM) and the three Kafka brokers (replication 3,
# min.insync.replicas 2, acks=all) of hack/replicated.sh, started if not
# running; the single-node test servers stay as they are.
if [[ ${REPLICATED:-0} == 1 ]]; then
	log "replicated Cassandra x3 and Kafka x3, and Redis (hack/replicated.sh, hack/redis; started if not running)"
	bash hack/replicated.sh start >&2
	# shellcheck disable=SC1091
	. "$CACHE/replicated/env.sh"
	CASS=$CONCORD_REPL_CASSANDRA
	KAFKA=$CONCORD_REPL_KAFKA
	STORE_OPTS="rf=3"
	KAFKA_OPTS="replication=3&"
else
	log "Cassandra, Kafka, Redis and S3 (hack/ scripts; started if not running)"
	CASS=$(bash hack/cassandra/start.sh)
	bash hack/kafka/kafka.sh start >&2
	KAFKA=$(bash hack/kafka/kafka.sh addr)
	STORE_OPTS="rf=1"
	KAFKA_OPTS=""
fi
REDIS=$(bash hack/redis/start.sh | sed -n 's/^export CONCORD_TEST_REDIS=//p')
# Attachments go to the S3-compatible test server, under the cluster's own
# prefix: a node's disk would lose a guild's files when the guild moves to
# another guild node.
S3=$(bash hack/s3/start.sh | sed -n 's/^export CONCORD_S3=//p')
[[ -n $CASS && -n $KAFKA && -n $REDIS && -n $S3 ]] || die "a backend gave no address (cassandra '$CASS', kafka '$KAFKA', redis '$REDIS', s3 '$S3')"

log "etcd: three members"
ETCD=${CLUSTER_ETCD:-}
[[ -n $ETCD ]] || ETCD="$(bash hack/envtest/build.sh | tail -n 1)/etcd"
[[ -x $ETCD ]] || die "no etcd binary at $ETCD"
peers=""
for i in 1 2 3; do
	peers+="${peers:+,}etcd-$i=http://127.0.0.1:$((BASE + 30 + i))"
done
ETCD_CLIENTS=""
for i in 1 2 3; do
	client=127.0.0.1:$((BASE + 20 + i))
	ETCD_CLIENTS+="${ETCD_CLIENTS:+,}$client"
	start "etcd-$i" "$ETCD" --name "etcd-$i" --data-dir "$RUN/etcd/etcd-$i" \
		--listen-client-urls "http://$client" --advertise-client-urls "http://$client" \
		--listen-peer-urls "http://127.0.0.1:$((BASE + 30 + i))" \
		--initial-advertise-peer-urls "http://127.0.0.1:$((BASE + 30 + i))" \
		--initial-cluster "$peers" --initial-cluster-state new --initial-cluster-token concord-run-cluster \
		--listen-metrics-urls "http://127.0.0.1:$((BASE + 35 + i))"
done
for i in 1 2 3; do
	wait_http "etcd-$i" "http://127.0.0.1:$((BASE + 20 + i))/health" 60
done

# The cluster's secrets, kept across runs so tokens stay valid.
[[ -s $RUN/server-key ]] || head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$RUN/server-key"
[[ -s $RUN/admin-token ]] || head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$RUN/admin-token"
chmod 600 "$RUN/server-key" "$RUN/admin-token"

COMMON=(
	--registry="etcd://$ETCD_CLIENTS"
	--store="cassandra://$CASS/$KEYSPACE?$STORE_OPTS"
	--eventlog="kafka://$KAFKA?${KAFKA_OPTS}topic_prefix=$KEYSPACE."
	--objects="$S3/$KEYSPACE"
	--server-key="$(cat "$RUN/server-key")"
	--admin-token="$(cat "$RUN/admin-token")"
	--data-nodes=ring
	--public-url="ws://$LB/gateway"
)

# PROXY_PROTOCOL is the one switch for the PROXY protocol between HAProxy
# and the nodes behind it: with it, the nodes see each client's address
# (--trusted-proxies), so the per-address connection cap, rate limits and
# bans apply per client instead of to HAProxy. HAProxy's servers then
# send-proxy-v2 (health checks too) and every node behind it (BEHIND)
# trusts the loopback HAProxy connects from; a trusted peer without a
# header (live-api forwarding /live) still counts as itself.
PROXY_PROTOCOL=${CLUSTER_PROXY_PROTOCOL:-1}
SERVER_OPTS=""
BEHIND=()
if ((PROXY_PROTOCOL)); then
	SERVER_OPTS=" send-proxy-v2 check-send-proxy"
	BEHIND=(--trusted-proxies=127.0.0.1/32)
fi

# node NAME ROLES INDEX [FLAGS...]: one `concord serve` process; its HTTP
# port is BASE+INDEX and its gRPC port BASE+40+INDEX (INDEX 1..18 and
# 24..26; etcd takes BASE+21..23, 31..33 and 36..38, HAProxy's stats
# BASE+19, the SFU BASE+60..62 and the live relays' protocol BASE+70..71).
worker=0
node() {
	local name=$1 roles=$2 idx=$3
	shift 3
	worker=$((worker + 1))
	mkdir -p "$RUN/nodes/$name"
	start "$name" "$BIN" serve --node="$name" --roles="$roles" \
		--http="127.0.0.1:$((BASE + idx))" --grpc="127.0.0.1:$((BASE + 40 + idx))" \
		--worker="$worker" --data-dir="$RUN/nodes/$name" "${COMMON[@]}" "$@"
}

log "concord serve: the first guild node creates or migrates the keyspace"
node guild-1 guild 1 --presence
wait_http guild-1 "http://127.0.0.1:$((BASE + 1))/readyz" 180
node guild-2 guild 2 --presence
node data-1 data 3
node data-2 data 4
node readstate-1 readstate 5
node presence-1 presence 6
node presence-2 presence 13
node relay-1 relay 7
node gateway-1 gateway 8 "${BEHIND[@]}" --presence --redis="redis://$REDIS"
node gateway-2 gateway 9 "${BEHIND[@]}" --presence --redis="redis://$REDIS"
node api-1 api 10 "${BEHIND[@]}" --redis="redis://$REDIS"
node api-2 api 11 "${BEHIND[@]}" --redis="redis://$REDIS"
# The SFU: its voice gateway (TLS from the dev CA in its data directory,
# as `make run`'s, so browsers and the bot libraries' wss:// reach it),
# RTP for bots and one ICE port for browsers' WebRTC, all on loopback. It
# reports its load to etcd every 2 s; guild nodes place calls on the
# voice servers they find there and answer op 4 with its endpoint.
node voice-1 voice 14 --voice-tls=devca --voice-listen="127.0.0.1:$((BASE + 60))" \
	--voice-udp="127.0.0.1:$((BASE + 61))" --voice-webrtc-udp="127.0.0.1:$((BASE + 62))"
# Live comments: the roles on the event log, the keyspace and Redis,
# their topics, consumer groups and Redis keys under the cluster's prefix.
# The router's batches reach the gateway through the relay tree of two
# live-relay nodes (each serving the relay protocol on a port of its own,
# announced in etcd); live-moderation scores every comment with the Go
# model and takes down what it flags.
LIVE=(--redis="redis://$REDIS" --live-prefix="$KEYSPACE.live.")
node live-relay-1 live-relay 24 --live-prefix="$KEYSPACE.live." --live-relay-listen="127.0.0.1:$((BASE + 70))"
node live-relay-2 live-relay 25 --live-prefix="$KEYSPACE.live." --live-relay-listen="127.0.0.1:$((BASE + 71))"
node live-api-1 live-api 15 "${BEHIND[@]}" "${LIVE[@]}"
node live-gateway-1 live-gateway 16 "${BEHIND[@]}" "${LIVE[@]}" --live-relay=tree
node live-router-1 live-router 17 "${LIVE[@]}" --live-relay=tree
node live-archiver-1 live-archiver 18 --live-prefix="$KEYSPACE.live."
node live-moderation-1 live-moderation 26 --live-prefix="$KEYSPACE.live." --live-classifier=linear
# The first read-state replica creates the read-state tables; the second
# starts once it is ready, so two replicas never create them at once.
wait_http readstate-1 "http://127.0.0.1:$((BASE + 5))/readyz" 180
node readstate-2 readstate 12
for n in guild-2:2 data-1:3 data-2:4 readstate-2:12 presence-1:6 presence-2:13 relay-1:7 gateway-1:8 gateway-2:9 api-1:10 api-2:11 \
	voice-1:14 live-api-1:15 live-gateway-1:16 live-router-1:17 live-archiver-1:18 \
	live-relay-1:24 live-relay-2:25 live-moderation-1:26; do
	wait_http "${n%%:*}" "http://127.0.0.1:$((BASE + ${n##*:}))/readyz" 120
done

log "HAProxy on $LB"
cat >"$RUN/haproxy.cfg" <<CFG
# Written by hack/run-cluster.sh.
global
	# Each connection takes two descriptors; stay within the usual 20000 limit.
	maxconn 8000
	# The runtime API: socat - UNIX:$RUN/haproxy.sock, then e.g.
	# "set server gateways/gateway-1 state drain" or "show stat".
	stats socket $RUN/haproxy.sock mode 600 level admin

defaults
	mode http
	timeout connect 2s
	timeout client 60s
	timeout server 60s
	# A gateway WebSocket is a tunnel once upgraded: heartbeats every ~41 s.
	timeout tunnel 1h
	timeout client-fin 5s
	option forwardfor
	# A refused connection carried nothing to the server: retry it on
	# another one (a node killed before its checks failed), not on the
	# same one until it is down and the request is answered 503.
	retries 2
	option redispatch 1

frontend public
	bind $LB
	acl websocket hdr(Upgrade) -i websocket
	acl gateway_path path /gateway
	acl gateway_path path_beg /gateway/
	# Live comments: /v1/... is the live-comments API (Discord's REST is
	# under /api/), and GET /v1/streams/{id}/live its server-sent events.
	acl live_sse path_reg ^/v1/streams/[^/]+/live\$
	acl live_api path_beg /v1/
	use_backend gateways if websocket or gateway_path
	use_backend live_gateways if live_sse
	use_backend live_apis if live_api
	default_backend apis

# Readiness: /readyz answers 503 while a node starts, drains (POST
# /admin/drain) or stops; after two failed checks it gets no new
# connection, and its open WebSockets stay until the node closes them.
backend apis
	balance roundrobin
	option httpchk GET /readyz
	http-check expect status 200
	default-server inter 1s fall 2 rise 2$SERVER_OPTS
	server api-1 127.0.0.1:$((BASE + 10)) check
	server api-2 127.0.0.1:$((BASE + 11)) check

backend gateways
	balance leastconn
	option httpchk GET /readyz
	http-check expect status 200
	default-server inter 1s fall 2 rise 2$SERVER_OPTS
	server gateway-1 127.0.0.1:$((BASE + 8)) check
	server gateway-2 127.0.0.1:$((BASE + 9)) check

backend live_apis
	balance roundrobin
	option httpchk GET /readyz
	http-check expect status 200
	default-server inter 1s fall 2 rise 2$SERVER_OPTS
	server live-api-1 127.0.0.1:$((BASE + 15)) check

# One stream's viewers meet on one live gateway (one relay copy per
# stream): the path, which names the stream, picks the server. An event
# stream sends a ping every 15 s, well inside the server timeout.
backend live_gateways
	balance uri
	hash-type consistent
	option httpchk GET /readyz
	http-check expect status 200
	default-server inter 1s fall 2 rise 2$SERVER_OPTS
	server live-gateway-1 127.0.0.1:$((BASE + 16)) check

listen stats
	bind 127.0.0.1:$((BASE + 19))
	stats enable
	stats uri /
CFG
haproxy -c -q -f "$RUN/haproxy.cfg" || die "haproxy rejected $RUN/haproxy.cfg"
start haproxy haproxy -W -db -f "$RUN/haproxy.cfg"
wait_http haproxy "http://$LB/readyz" 30

API="http://$LB/api/v10"
CLUSTER_NAME=${CLUSTER_ID:-(legacy state)}
# The dev user: registered on first start, logged in after.
[[ -s $RUN/dev-password ]] || head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$RUN/dev-password"
chmod 600 "$RUN/dev-password"
creds="{\"username\":\"dev\",\"password\":\"$(cat "$RUN/dev-password")\"}"
answer=$(curl -sS --max-time 10 -H 'Content-Type: application/json' -d "$creds" "$API/auth/register" || true)
if [[ $answer != *'"token"'* ]]; then
	answer=$(curl -sS --max-time 10 -H 'Content-Type: application/json' -d "$creds" "$API/auth/login" || true)
fi
TOKEN=$(sed -n 's/.*"token":"\([^"]*\)".*/\1/p' <<<"$answer")
if [[ -z $TOKEN ]]; then
	[[ -n ${CLUSTER_KEYSPACE:-} ]] && log "CLUSTER_KEYSPACE=$CLUSTER_KEYSPACE names a keyspace that may hold a dev user of another state directory; unset it to get the state directory's own"
	die "no dev token: register and login answered $answer"
fi
printf '%s\n' "$TOKEN" >"$RUN/dev-token"

cat <<EOF

Concord cluster $CLUSTER_NAME is running: 2 api, 2 gateway, 2 guild, 2 data, 2 readstate,
2 presence, 1 relay, 1 voice, live-api, live-gateway, live-router, live-archiver,
live-moderation and 2 live-relay behind HAProxy; etcd x3, Cassandra (keyspace $KEYSPACE), Kafka and Redis.
  REST API:    http://$LB/api/v10
  Gateway:     ws://$LB/gateway
  Live API:    http://$LB/v1/streams   (events: GET http://$LB/v1/streams/{id}/live)
  Web client:  http://$LB/
  Voice:       wss://127.0.0.1:$((BASE + 60)), TLS from the dev CA $RUN/nodes/voice-1/voice-ca.pem
               (browsers: import it as a certificate authority; Node: NODE_EXTRA_CA_CERTS)
  Dev token:   $TOKEN
  Admin token: $(cat "$RUN/admin-token")   (nodes' /admin/..., e.g. POST http://127.0.0.1:$((BASE + 8))/admin/drain)
  HAProxy:     http://127.0.0.1:$((BASE + 19))/ (backend health); runtime API on $RUN/haproxy.sock
  Logs:        $RUN/logs/
Press Ctrl-C to stop.
EOF

# Until Ctrl-C, until a process of the cluster exits, or until the
# command that started the script is gone.
while :; do
	if ! kill -0 "$PARENT" 2>/dev/null; then
		log "the command that started the cluster (pid $PARENT) is gone; stopping"
		exit 0
	fi
	for i in "${!PIDS[@]}"; do
		if ! kill -0 "${PIDS[i]}" 2>/dev/null; then
			tail -n 30 "$RUN/logs/${NAMES[i]}.log" >&2 || true
			die "${NAMES[i]} exited; stopping the cluster"
		fi
	done
	sleep 1
done
