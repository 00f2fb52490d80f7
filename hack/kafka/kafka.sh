#!/usr/bin/env bash
# kafka.sh — run a single-node Apache Kafka 4.x (KRaft, combined broker and
# controller) on loopback for tests, built from Maven Central artifacts and
# run on the machine's Java 17.
#
# Usage: hack/kafka/kafka.sh fetch|start|stop|status|addr
#
#   fetch   download kafka_2.13 and its runtime dependencies with mvn into
#           $CONCORD_CACHE/kafka-$KAFKA_VERSION/lib (cached; idempotent)
#   start   if nothing answers on $KAFKA_HOST:$KAFKA_PORT: fetch, write the
#           configuration, format the storage once and start the broker in
#           the background, then wait until it answers. Fails loudly (with
#           the log tail) if it does not come up within $KAFKA_START_TIMEOUT.
#   stop    stop the broker this script started (by its pid file)
#   run     like start, but in the foreground: the script becomes the broker
#           (exec), so the caller holds its pid and can kill -9 it (the
#           chaos test's private Kafka)
#   status  exit 0 if a broker answers on $KAFKA_HOST:$KAFKA_PORT
#   addr    print host:port (what CONCORD_KAFKA should be set to)
#
# Environment (defaults in brackets):
#   KAFKA_VERSION [4.2.0]  CONCORD_CACHE [~/.cache/concord]
#   KAFKA_HOST [127.0.0.1] KAFKA_PORT [9092] KAFKA_CONTROLLER_PORT [9093]
#   KAFKA_HEAP [512M]      KAFKA_START_TIMEOUT [120] (seconds)
#   KAFKA_PARTITIONS [8]   (default partitions of auto-created topics)
#   KAFKA_RUN_DIR [$CONCORD_CACHE/kafka-$KAFKA_VERSION/run-$KAFKA_PORT]
#                          (configuration, data and logs of this broker)
#
# One broker of a cluster (hack/replicated.sh starts three this way) also sets:
#   KAFKA_NODE_ID [1]      node.id
#   KAFKA_VOTERS           controller.quorum.voters (id@host:port,…); unset, the
#                          node is a quorum of its own (formatted --standalone)
#   KAFKA_CLUSTER_ID_FILE  the cluster id every broker is formatted with
#                          (written on first use) [a fresh id]
#   KAFKA_CONFIG_EXTRA     a file appended to server.properties (a later line
#                          overrides an earlier one: replication settings)
#   KAFKA_JVM_EXTRA        more JVM flags, space-separated
#   KAFKA_PIDFILE [$KAFKA_RUN_DIR/kafka.pid]
#   KAFKA_NO_WAIT=1        start and return without waiting for the broker
#                          (three brokers wait for each other's quorum)
set -euo pipefail
# Descriptors 3-9 a caller left open (flock FILE CMD holds its lock on 3)
# would be inherited by the servers started here and hold that lock for
# their whole life: close them.
for fd in 3 4 5 6 7 8 9; do eval "exec $fd>&-"; done

KAFKA_VERSION="${KAFKA_VERSION:-4.2.0}"
CONCORD_CACHE="${CONCORD_CACHE:-$HOME/.cache/concord}"
KAFKA_HOST="${KAFKA_HOST:-127.0.0.1}"
KAFKA_PORT="${KAFKA_PORT:-9092}"
KAFKA_CONTROLLER_PORT="${KAFKA_CONTROLLER_PORT:-9093}"
KAFKA_HEAP="${KAFKA_HEAP:-512M}"
KAFKA_START_TIMEOUT="${KAFKA_START_TIMEOUT:-120}"
KAFKA_PARTITIONS="${KAFKA_PARTITIONS:-8}"

home="$CONCORD_CACHE/kafka-$KAFKA_VERSION"
lib="$home/lib"
run="${KAFKA_RUN_DIR:-$home/run-$KAFKA_PORT}"
conf="$run/conf"
data="$run/data"
logs="$run/logs"
pidfile="${KAFKA_PIDFILE:-$run/kafka.pid}"
KAFKA_NODE_ID="${KAFKA_NODE_ID:-1}"

log() { printf '[kafka] %s\n' "$*" >&2; }
die() { printf '[kafka] ERROR: %s\n' "$*" >&2; exit 1; }

answers() {
	# A TCP connect is not enough (the socket binds before the broker is
	# ready), so also require the "started" line when we own the process.
	(exec 3<>"/dev/tcp/$KAFKA_HOST/$KAFKA_PORT") 2>/dev/null
}

java_bin() {
	local j="${JAVA:-}"
	if [[ -z "$j" ]]; then
		if [[ -n "${JAVA_HOME:-}" ]]; then j="$JAVA_HOME/bin/java"; else j="$(command -v java || true)"; fi
	fi
	[[ -x "$j" ]] || die "java not found (need Java 17+; set JAVA_HOME)"
	local major
	major="$("$j" -version 2>&1 | sed -n 's/.*version "\([0-9]*\).*/\1/p' | head -1)"
	[[ "${major:-0}" -ge 17 ]] || die "java $major found; Kafka $KAFKA_VERSION needs Java 17+"
	printf '%s' "$j"
}

fetch() {
	if [[ -f "$lib/.complete" ]]; then
		log "using cached Kafka $KAFKA_VERSION in $lib ($(ls "$lib" | wc -l) jars)"
		return
	fi
	command -v mvn >/dev/null || die "mvn not found: install Maven to fetch Kafka"
	log "fetching org.apache.kafka:kafka_2.13:$KAFKA_VERSION and runtime dependencies into $lib"
	local pomdir
	pomdir="$home/pom"
	mkdir -p "$pomdir" "$lib"
	cat >"$pomdir/pom.xml" <<POM
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>dev.concord.hack</groupId>
  <artifactId>kafka-runtime</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency>
      <groupId>org.apache.kafka</groupId>
      <artifactId>kafka_2.13</artifactId>
      <version>$KAFKA_VERSION</version>
    </dependency>
    <dependency>
      <groupId>org.apache.kafka</groupId>
      <artifactId>kafka-tools</artifactId>
      <version>$KAFKA_VERSION</version>
    </dependency>
    <dependency>
      <groupId>org.apache.logging.log4j</groupId>
      <artifactId>log4j-core</artifactId>
      <version>2.24.3</version>
    </dependency>
    <dependency>
      <groupId>org.slf4j</groupId>
      <artifactId>slf4j-api</artifactId>
      <version>2.0.17</version>
    </dependency>
    <dependency>
      <groupId>org.apache.logging.log4j</groupId>
      <artifactId>log4j-slf4j2-impl</artifactId>
      <version>2.24.3</version>
    </dependency>
  </dependencies>
</project>
POM
	local t0=$SECONDS
	mvn -B -f "$pomdir/pom.xml" \
		dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory="$lib" \
		-Dorg.slf4j.simpleLogger.log.org.apache.maven.cli.transfer.Slf4jMavenTransferListener=warn \
		| sed -n 's/^\[INFO\] Copying \([^ ]*\) .*/[kafka]   \1/p; /ERROR/p' >&2 ||
		die "mvn dependency:copy-dependencies failed"
	[[ -n "$(ls "$lib"/kafka_2.13-*.jar 2>/dev/null)" ]] || die "kafka_2.13 jar missing after fetch"
	touch "$lib/.complete"
	log "fetched $(ls "$lib" | wc -l) jars in $((SECONDS - t0))s"
}

write_config() {
	mkdir -p "$conf" "$data" "$logs"
	cat >"$conf/server.properties" <<PROPS
# Written by hack/kafka/kafka.sh: one combined KRaft node on loopback.
process.roles=broker,controller
node.id=$KAFKA_NODE_ID
$(quorum)
listeners=PLAINTEXT://$KAFKA_HOST:$KAFKA_PORT,CONTROLLER://$KAFKA_HOST:$KAFKA_CONTROLLER_PORT
advertised.listeners=$(advertised)
inter.broker.listener.name=PLAINTEXT
controller.listener.names=CONTROLLER
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT
log.dirs=$data
num.partitions=$KAFKA_PARTITIONS
default.replication.factor=1
min.insync.replicas=1
offsets.topic.replication.factor=1
offsets.topic.num.partitions=4
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
auto.create.topics.enable=true
num.network.threads=2
num.io.threads=2
background.threads=2
log.retention.hours=24
log.segment.bytes=67108864
PROPS
	cat >"$conf/log4j2.properties" <<L4J
status = warn
appender.file.type = File
appender.file.name = FILE
appender.file.fileName = $logs/server.log
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.file.ref = FILE
logger.kafka.name = kafka
logger.kafka.level = INFO
logger.apache.name = org.apache.kafka
logger.apache.level = INFO
logger.zk.name = org.apache.kafka.raft
logger.zk.level = WARN
L4J
	if [[ -n "${KAFKA_CONFIG_EXTRA:-}" ]]; then
		cat "$KAFKA_CONFIG_EXTRA" >>"$conf/server.properties"
	fi
}

# quorum is the controller quorum line: the voters of a cluster, or this
# node alone.
quorum() {
	if [[ -n "${KAFKA_VOTERS:-}" ]]; then
		printf 'controller.quorum.voters=%s' "$KAFKA_VOTERS"
	else
		printf 'controller.quorum.bootstrap.servers=%s:%s' "$KAFKA_HOST" "$KAFKA_CONTROLLER_PORT"
	fi
}

# advertised is what clients are told: a broker of a static quorum
# advertises its broker listener only (the voters are configured).
advertised() {
	if [[ -n "${KAFKA_VOTERS:-}" ]]; then
		printf 'PLAINTEXT://%s:%s' "$KAFKA_HOST" "$KAFKA_PORT"
	else
		printf 'PLAINTEXT://%s:%s,CONTROLLER://%s:%s' "$KAFKA_HOST" "$KAFKA_PORT" "$KAFKA_HOST" "$KAFKA_CONTROLLER_PORT"
	fi
}

java_opts() {
	printf '%s\n' "-Xms$KAFKA_HEAP" "-Xmx$KAFKA_HEAP" -XX:+UseG1GC -XX:MaxGCPauseMillis=20 \
		-XX:TieredStopAtLevel=1 -Xss512k -XX:ReservedCodeCacheSize=64m \
		-Djava.awt.headless=true "-Dlog4j2.configurationFile=file:$conf/log4j2.properties" \
		"-Dkafka.logs.dir=$logs"
	# shellcheck disable=SC2086 # split on purpose: a list of flags
	[[ -z "${KAFKA_JVM_EXTRA:-}" ]] || printf '%s\n' $KAFKA_JVM_EXTRA
	printf '%s\n' -cp "$lib/*"
}

format() {
	if [[ -f "$data/meta.properties" ]]; then
		log "storage already formatted in $data"
		return
	fi
	local j cid
	j="$(java_bin)"
	mapfile -t opts < <(java_opts)
	local idfile="${KAFKA_CLUSTER_ID_FILE:-}"
	if [[ -n "$idfile" && -s "$idfile" ]]; then
		cid="$(cat "$idfile")"
	else
		cid="$("$j" "${opts[@]}" kafka.tools.StorageTool random-uuid)"
		[[ -z "$idfile" ]] || printf '%s\n' "$cid" >"$idfile"
	fi
	local standalone=(--standalone -g)
	[[ -z "${KAFKA_VOTERS:-}" ]] || standalone=()
	log "formatting storage in $data (cluster $cid)"
	"$j" "${opts[@]}" kafka.tools.StorageTool format -t "$cid" -c "$conf/server.properties" "${standalone[@]}" \
		>"$logs/format.out" 2>&1 || { cat "$logs/format.out" >&2; die "storage format failed"; }
}

# shellcheck source=../pidfile.sh
source "$(dirname "${BASH_SOURCE[0]}")/../pidfile.sh"

# our_pid prints the broker's pid when the pid file's process is alive and
# is the broker of this configuration (never a recycled pid).
our_pid() { pidfile_pid "$pidfile" "kafka.Kafka $conf/server.properties"; }

start() {
	if answers; then
		log "a broker already answers on $KAFKA_HOST:$KAFKA_PORT; not starting another"
		return
	fi
	local t0=$SECONDS pid deadline
	if pid="$(our_pid)"; then
		log "Kafka (pid $pid) is already starting; waiting for it"
	else
		fetch
		write_config
		format
		local j
		j="$(java_bin)"
		mapfile -t opts < <(java_opts)
		: >"$logs/server.log"
		log "starting Kafka $KAFKA_VERSION on $KAFKA_HOST:$KAFKA_PORT (heap $KAFKA_HEAP, logs $logs)"
		# setsid: the broker outlives this script and the make/test that
		# ran it; fd 9 (a caller's start lock) is not handed on.
		setsid nohup "$j" "${opts[@]}" kafka.Kafka "$conf/server.properties" >"$logs/stdout.log" 2>&1 </dev/null 9>&- &
		echo $! >"$pidfile"
		pid="$(cat "$pidfile")"
	fi
	if [[ "${KAFKA_NO_WAIT:-0}" == 1 ]]; then
		return
	fi
	deadline=$((SECONDS + KAFKA_START_TIMEOUT))
	until answers && grep -q "Kafka Server started" "$logs/server.log" "$logs/stdout.log" 2>/dev/null; do
		if ! kill -0 "$pid" 2>/dev/null; then
			tail -n 40 "$logs/server.log" "$logs/stdout.log" >&2 || true
			die "Kafka exited during startup (see $logs)"
		fi
		if ((SECONDS >= deadline)); then
			tail -n 40 "$logs/server.log" "$logs/stdout.log" >&2 || true
			kill "$pid" 2>/dev/null || true
			die "Kafka did not answer on $KAFKA_HOST:$KAFKA_PORT within ${KAFKA_START_TIMEOUT}s"
		fi
		printf '.' >&2
		sleep 1
	done
	printf '\n' >&2
	log "Kafka ready on $KAFKA_HOST:$KAFKA_PORT (pid $pid) after $((SECONDS - t0))s; export CONCORD_KAFKA=$KAFKA_HOST:$KAFKA_PORT"
}

# run_foreground prepares the broker like start and then becomes it, its
# log on stdout.
run_foreground() {
	fetch
	write_config
	format
	local j
	j="$(java_bin)"
	mapfile -t opts < <(java_opts)
	log "running Kafka $KAFKA_VERSION on $KAFKA_HOST:$KAFKA_PORT in the foreground (heap $KAFKA_HEAP, logs $logs)"
	exec "$j" "${opts[@]}" kafka.Kafka "$conf/server.properties"
}

stop() {
	if [[ ! -f "$pidfile" ]]; then
		log "no pid file at $pidfile; nothing to stop"
		return
	fi
	local pid
	if pid="$(our_pid)"; then
		log "stopping Kafka (pid $pid)"
		kill "$pid"
		for _ in $(seq 1 60); do
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.5
		done
		if kill -0 "$pid" 2>/dev/null; then
			log "pid $pid still alive after 30s; sending SIGKILL"
			kill -9 "$pid" 2>/dev/null || true
		fi
	fi
	rm -f "$pidfile"
	log "stopped"
}

case "${1:-}" in
fetch) fetch ;;
start) start ;;
stop) stop ;;
run) run_foreground ;;
status) if answers; then log "answers on $KAFKA_HOST:$KAFKA_PORT"; else die "nothing answers on $KAFKA_HOST:$KAFKA_PORT"; fi ;;
addr) printf '%s:%s\n' "$KAFKA_HOST" "$KAFKA_PORT" ;;
*) die "usage: $0 fetch|start|stop|run|status|addr" ;;
esac
