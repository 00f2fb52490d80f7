#!/usr/bin/env bash
# replicated.sh runs the replicated stores the durability tests need on this
# machine's own loopback addresses: a three-node Apache Cassandra 5.0 ring
# (keyspaces rf=3, Concord reads and writes at LOCAL_QUORUM) and a
# three-broker Apache Kafka 4.x cluster in KRaft mode (every broker also a
# controller voter; topics replicated 3 times, min.insync.replicas=2,
# Concord's producer acks=all). Each node is started by the single-node
# scripts, hack/cassandra/start.sh and hack/kafka/kafka.sh, given its
# address, directory and the ring's or cluster's settings; it never touches
# the single-node servers of hack/test-deps.sh (127.0.0.1:9042,
# 127.0.0.1:9092), and writes the addresses to $REPL_DIR/env.sh:
#
#   export CONCORD_REPL_CASSANDRA=127.0.0.11:9042,127.0.0.12:9042,127.0.0.13:9042
#   export CONCORD_REPL_KAFKA=127.0.0.21:9092,127.0.0.22:9092,127.0.0.23:9092
#   export CONCORD_REPL_DIR=...   (this state directory; the nemesis reads pid files here)
#   export CONCORD_REPL_SCRIPT=... (this script, for restarting one node)
#
# Usage: hack/replicated.sh start|stop|status|env|wipe
#        hack/replicated.sh start-node cassandra-N|kafka-N   (one node; waits until it serves)
#        hack/replicated.sh stop-node cassandra-N|kafka-N    (SIGTERM, then SIGKILL)
#        hack/replicated.sh pid cassandra-N|kafka-N          (print its pid)
#
# Every node is one JVM with a small heap (REPL_CASSANDRA_HEAP [640M],
# REPL_KAFKA_HEAP [384M]) started with setsid so it outlives the caller;
# stop it when done (the machine is shared). Data, logs and configuration
# live in $REPL_DIR [~/.cache/concord/replicated]; `wipe` stops everything
# and removes it. What each setting buys is in docs/operations-cassandra.md
# and docs/operations-kafka.md.
#
# The addresses (127.0.0.11-13 Cassandra, 127.0.0.21-23 Kafka) are part of
# the interface: test/faults partitions the network with iptables rules
# between them. Override with REPL_CASSANDRA_HOSTS / REPL_KAFKA_HOSTS
# (space-separated, three each).
set -euo pipefail
# Descriptors 3-9 a caller left open (flock FILE CMD holds its lock on 3)
# would be inherited by the servers started here and hold that lock for
# their whole life: close them.
for fd in 3 4 5 6 7 8 9; do eval "exec $fd>&-"; done
HACK="$(cd "$(dirname "$0")" && pwd)"
CONCORD_CACHE="${CONCORD_CACHE:-$HOME/.cache/concord}"
REPL_DIR="${REPL_DIR:-$CONCORD_CACHE/replicated}"
read -r -a CHOSTS <<<"${REPL_CASSANDRA_HOSTS:-127.0.0.11 127.0.0.12 127.0.0.13}"
read -r -a KHOSTS <<<"${REPL_KAFKA_HOSTS:-127.0.0.21 127.0.0.22 127.0.0.23}"
CASSANDRA_VERSION="${CASSANDRA_VERSION:-5.0.8}"
KAFKA_VERSION="${KAFKA_VERSION:-4.2.0}"
CHEAP="${REPL_CASSANDRA_HEAP:-640M}"
KHEAP="${REPL_KAFKA_HEAP:-384M}"
TIMEOUT="${REPL_START_TIMEOUT:-300}"
# Tokens spread evenly over Murmur3's range: with one token per node each
# owns a third, and with rf=3 each holds every row anyway.
TOKENS=(-9223372036854775808 -3074457345618258603 3074457345618258602)

# cql_ping and pidfile_pid come from hack/cassandra/env.sh (which needs
# CASSANDRA_DATA set; no node runs from /nonexistent).
# shellcheck source=cassandra/env.sh
CASSANDRA_DATA=/nonexistent source "$HACK/cassandra/env.sh"
log() { printf 'replicated: %s\n' "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

node_dir() { printf '%s/%s' "$REPL_DIR" "$1"; }

# alive NAME prints NAME's pid when its recorded process is alive and is
# the JVM this script started for that directory (a recycled pid never
# counts).
alive() {
	local dir
	dir="$(node_dir "$1")"
	pidfile_pid "$dir/pid" "-Dconcord.replicated=$dir "
}

# started: the process just started for node $1 (its pid file's pid) has
# not exited. alive also checks that the pid runs this node's JVM, which
# it does only once the starter's fork has exec'd java: on a loaded
# machine the wait can ask before that, and must not take a process
# still starting for one that died.
started() {
	local pid
	pid="$(cat "$(node_dir "$1")/pid" 2>/dev/null)" || return 1
	[[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null
}

index() { # cassandra-2 -> 2 (checked)
	local i="${1##*-}"
	[[ "$i" =~ ^[123]$ ]] || die "no node $1 (cassandra-1..3, kafka-1..3)"
	printf '%s' "$i"
}

# --- Cassandra ---------------------------------------------------------------

# cassandra_start starts node i with hack/cassandra/start.sh (the single
# test node's script), given this ring's address, seed, token and the
# settings below, without waiting for it (cassandra_wait does).
cassandra_start() {
	local i="$1" dir host pid
	dir="$(node_dir "cassandra-$i")"
	host="${CHOSTS[$((i - 1))]}"
	if pid="$(alive "cassandra-$i")"; then
		log "cassandra-$i already running (pid $pid)"
		return 0
	fi
	mkdir -p "$dir/conf"
	cat >"$dir/conf/ring.yaml" <<YAML

# Added by hack/replicated.sh for a three-node ring (docs/operations-cassandra.md).
# A new ring of empty nodes: each takes its token and joins without streaming.
auto_bootstrap: false
# A node that was down gets the writes it missed from the others' hints
# for up to three hours (the default), so a restarted replica catches up
# before read repair has to.
hinted_handoff_enabled: true
max_hint_window: 3h
# Clients get an error after 5 s instead of 10 s: the fault tests want a
# quick, honest "not acknowledged" when a quorum is unreachable.
read_request_timeout: 5000ms
write_request_timeout: 5000ms
range_request_timeout: 5000ms
counter_write_request_timeout: 5000ms
# Phi failure detector: convict a silent peer after ~4 s, not ~10 s.
phi_convict_threshold: 8
YAML
	log "starting cassandra-$i on $host:9042 (heap $CHEAP, $dir)"
	# libfaketime skews the node's clock when its directory holds a
	# faketime file (the nemesis writes it).
	CASSANDRA_HOST="$host" CASSANDRA_PORT=9042 CASSANDRA_STORAGE_PORT=7000 \
		CASSANDRA_DATA="$dir" CASSANDRA_PIDFILE="$dir/pid" CASSANDRA_HEAP="$CHEAP" \
		CASSANDRA_CLUSTER_NAME=concord-replicated CASSANDRA_SEEDS="${CHOSTS[0]}:7000" \
		CASSANDRA_INITIAL_TOKEN="${TOKENS[$((i - 1))]}" CASSANDRA_YAML_EXTRA="$dir/conf/ring.yaml" \
		CASSANDRA_JVM_EXTRA="-Dconcord.replicated=$dir -XX:TieredStopAtLevel=1 -XX:CICompilerCount=2 -Dcassandra.ring_delay_ms=3000 -Dcassandra.consistent.rangemovement=false" \
		CASSANDRA_FAKETIME="$(cat "$dir/faketime" 2>/dev/null || true)" \
		CASSANDRA_NO_WAIT=1 CASSANDRA_ANNOUNCE=0 CASSANDRA_VERSION="$CASSANDRA_VERSION" \
		bash "$HACK/cassandra/start.sh" >/dev/null
}

cassandra_wait() {
	local i="$1" dir host deadline
	dir="$(node_dir "cassandra-$i")"
	host="${CHOSTS[$((i - 1))]}"
	deadline=$((SECONDS + TIMEOUT))
	until cql_ping "$host" 9042; do
		started "cassandra-$i" || {
			tail -n 30 "$dir/logs/system.log" "$dir/logs/stdout.log" >&2 || true
			die "cassandra-$i exited before CQL answered on $host:9042"
		}
		((SECONDS < deadline)) || {
			tail -n 30 "$dir/logs/system.log" >&2 || true
			die "cassandra-$i: no CQL on $host:9042 within ${TIMEOUT}s"
		}
		sleep 1
	done
	log "cassandra-$i answers CQL on $host:9042"
}

# --- Kafka -------------------------------------------------------------------

# kafka_start starts broker i with hack/kafka/kafka.sh (the single test
# broker's script), given this cluster's voters, cluster id and the
# replication settings below, without waiting for it (kafka_wait does:
# a broker is started once two of the three voters answer).
kafka_start() {
	local i="$1" dir host pid voters=""
	dir="$(node_dir "kafka-$i")"
	host="${KHOSTS[$((i - 1))]}"
	if pid="$(alive "kafka-$i")"; then
		log "kafka-$i already running (pid $pid)"
		return 0
	fi
	for j in 1 2 3; do voters+="${voters:+,}$j@${KHOSTS[$((j - 1))]}:9093"; done
	mkdir -p "$dir/conf"
	cat >"$dir/conf/cluster.properties" <<PROPS
# Added by hack/replicated.sh: broker $i of three, each also a KRaft
# controller voter (docs/operations-kafka.md says what each line buys).
# Every partition on all three brokers; a write acknowledged with acks=all
# is on at least two of them (min.insync.replicas), so one broker may be
# lost or partitioned without losing it or refusing writes.
default.replication.factor=3
min.insync.replicas=2
unclean.leader.election.enable=false
offsets.topic.replication.factor=3
transaction.state.log.replication.factor=3
transaction.state.log.min.isr=2
share.coordinator.state.topic.replication.factor=3
share.coordinator.state.topic.min.isr=2
# A follower that fetched nothing for 10 s leaves the ISR (the default is
# 30 s): writes resume sooner when one is partitioned away.
replica.lag.time.max.ms=10000
num.replica.fetchers=1
PROPS
	log "starting kafka-$i on $host:9092 (heap $KHEAP, $dir)"
	KAFKA_HOST="$host" KAFKA_PORT=9092 KAFKA_CONTROLLER_PORT=9093 KAFKA_RUN_DIR="$dir" \
		KAFKA_PIDFILE="$dir/pid" KAFKA_HEAP="$KHEAP" KAFKA_NODE_ID="$i" KAFKA_VOTERS="$voters" \
		KAFKA_CLUSTER_ID_FILE="$REPL_DIR/kafka-cluster-id" KAFKA_CONFIG_EXTRA="$dir/conf/cluster.properties" \
		KAFKA_JVM_EXTRA="-Dconcord.replicated=$dir -XX:CICompilerCount=2" \
		KAFKA_NO_WAIT=1 KAFKA_VERSION="$KAFKA_VERSION" CONCORD_CACHE="$CONCORD_CACHE" \
		bash "$HACK/kafka/kafka.sh" start
}

kafka_wait() {
	local i="$1" dir host deadline
	dir="$(node_dir "kafka-$i")"
	host="${KHOSTS[$((i - 1))]}"
	deadline=$((SECONDS + TIMEOUT))
	until (exec 3<>"/dev/tcp/$host/9092") 2>/dev/null &&
		grep -q "Kafka Server started" "$dir/logs/server.log" "$dir/logs/stdout.log" 2>/dev/null; do
		started "kafka-$i" || {
			tail -n 30 "$dir/logs/server.log" "$dir/logs/stdout.log" >&2 || true
			die "kafka-$i exited during startup"
		}
		((SECONDS < deadline)) || {
			tail -n 30 "$dir/logs/server.log" >&2 || true
			die "kafka-$i: not started within ${TIMEOUT}s"
		}
		sleep 1
	done
	log "kafka-$i serves on $host:9092"
}

# --- Common ------------------------------------------------------------------

stop_node() {
	local name="$1" pid
	if pid="$(alive "$name")"; then
		log "stopping $name (pid $pid)"
		kill -CONT "$pid" 2>/dev/null || true # a paused JVM cannot exit
		kill "$pid"
		for _ in $(seq 1 60); do
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.5
		done
		kill -0 "$pid" 2>/dev/null && { log "$name still alive after 30s: SIGKILL"; kill -9 "$pid"; }
	fi
	rm -f "$(node_dir "$name")/pid"
}

write_env() {
	local c="" k=""
	for h in "${CHOSTS[@]}"; do c+="${c:+,}$h:9042"; done
	for h in "${KHOSTS[@]}"; do k+="${k:+,}$h:9092"; done
	cat >"$REPL_DIR/env.sh" <<ENV
export CONCORD_REPL_CASSANDRA=$c
export CONCORD_REPL_KAFKA=$k
export CONCORD_REPL_DIR=$REPL_DIR
export CONCORD_REPL_SCRIPT=$HACK/replicated.sh
ENV
	log "addresses in $REPL_DIR/env.sh"
	cat "$REPL_DIR/env.sh" >&2
}

start_all() {
	mkdir -p "$REPL_DIR"
	exec 9>"$REPL_DIR/.start.lock"
	flock 9
	bash "$HACK/kafka/kafka.sh" fetch
	local t0=$SECONDS
	# The seed first; the two others join it together (no streaming: the
	# ring is new). Kafka's brokers start meanwhile: its controllers elect
	# a leader once two of three voters answer.
	cassandra_start 1
	for i in 1 2 3; do kafka_start "$i"; done
	cassandra_wait 1
	cassandra_start 2
	cassandra_start 3
	for i in 1 2 3; do kafka_wait "$i"; done
	cassandra_wait 2
	cassandra_wait 3
	write_env
	log "ready after $((SECONDS - t0))s: stop with $0 stop"
}

case "${1:-}" in
start) start_all ;;
stop)
	# The brokers together: the last of three stopped one by one has no
	# controller quorum left for its controlled shutdown and hangs.
	for n in kafka-1 kafka-2 kafka-3; do stop_node "$n" & done
	wait
	for n in cassandra-3 cassandra-2 cassandra-1; do stop_node "$n"; done
	;;
status)
	for n in cassandra-1 cassandra-2 cassandra-3 kafka-1 kafka-2 kafka-3; do
		if pid="$(alive "$n")"; then log "$n running (pid $pid)"; else log "$n stopped"; fi
	done
	;;
env) write_env ;;
wipe)
	"$0" stop
	log "removing $REPL_DIR"
	rm -rf "$REPL_DIR"
	;;
start-node)
	n="${2:-}"
	i="$(index "$n")"
	mkdir -p "$REPL_DIR"
	case "$n" in
	cassandra-*) cassandra_start "$i" && cassandra_wait "$i" ;;
	kafka-*) kafka_start "$i" && kafka_wait "$i" ;;
	*) die "no node $n" ;;
	esac
	;;
stop-node) index "${2:-}" >/dev/null && stop_node "$2" ;;
pid) index "${2:-}" >/dev/null && alive "$2" && echo ;;
*) die "usage: $0 start|stop|status|env|wipe|start-node NODE|stop-node NODE|pid NODE" ;;
esac
