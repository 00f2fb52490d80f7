#!/usr/bin/env bash
# start.sh makes sure an Apache Cassandra node answers CQL on
# $CASSANDRA_HOST:$CASSANDRA_PORT (default 127.0.0.1:9042) and prints that
# address on stdout, so callers can write
#
#   export CONCORD_CASSANDRA="$(hack/cassandra/start.sh)"
#
# When a CQL server already answers there (a node started earlier, or a
# ScyllaDB/Cassandra someone runs), it is reused. Otherwise the jars are
# fetched with mvn (fetch.sh, cached), a cassandra.yaml and logback.xml are
# generated under $CASSANDRA_DATA/conf, and CassandraDaemon is started in
# the background with the machine's Java 17. The script waits until CQL
# answers, or fails after $CASSANDRA_START_TIMEOUT seconds printing the log
# tail. It also writes $CONCORD_CACHE/cassandra.env (export CONCORD_CASSANDRA=…).
# Progress goes to stderr. Stop the node with hack/cassandra/stop.sh.
#
# One node of a ring (hack/replicated.sh starts three this way) sets, besides
# CASSANDRA_HOST, CASSANDRA_DATA and CASSANDRA_HEAP:
#   CASSANDRA_CLUSTER_NAME  cluster_name [concord-test, as cassandra.yaml.in has it]
#   CASSANDRA_SEEDS         the seed list, host:storage_port,… [this node]
#   CASSANDRA_INITIAL_TOKEN the node's token [0]
#   CASSANDRA_YAML_EXTRA    a file appended to the generated cassandra.yaml
#   CASSANDRA_JVM_EXTRA     more JVM flags, space-separated
#   CASSANDRA_FAKETIME      a libfaketime offset (e.g. +45s): the JVM runs skewed
#   CASSANDRA_PIDFILE       the pid file [$CASSANDRA_DATA/cassandra.pid]
#   CASSANDRA_NO_WAIT=1     start and return without waiting for CQL
#   CASSANDRA_ANNOUNCE=0    neither write cassandra.env nor prune keyspaces
#                           (a node that is not the test server)
set -euo pipefail
# Descriptors 3-9 a caller left open (flock FILE CMD holds its lock on 3)
# would be inherited by the servers started here and hold that lock for
# their whole life: close them.
for fd in 3 4 5 6 7 8 9; do eval "exec $fd>&-"; done
source "$(dirname "$0")/env.sh"

addr="$CASSANDRA_HOST:$CASSANDRA_PORT"
announce() {
	[[ "${CASSANDRA_ANNOUNCE:-1}" == 1 ]] || return 0
	mkdir -p "$CONCORD_CACHE"
	printf 'export CONCORD_CASSANDRA=%s\n' "$addr" >"$CONCORD_CACHE/cassandra.env"
	printf '%s\n' "$addr"
}

# prune_stale drops the test keyspaces older than a run (killed tests leave
# theirs, and each costs the node heap: hack/cassandra/prune). Only for the
# node these scripts run, whose data directory dates the keyspaces.
prune_stale() {
	[[ "${CASSANDRA_ANNOUNCE:-1}" == 1 ]] || return 0
	[[ -d "$CASSANDRA_DATA/data" ]] || return 0
	if ! command -v go >/dev/null; then
		log "go not on PATH: not pruning stale test keyspaces"
		return 0
	fi
	(cd "$HACK_DIR/../.." && CASSANDRA_DATA="$CASSANDRA_DATA" go run ./hack/cassandra/prune \
		-addr "$addr" -older "${CASSANDRA_PRUNE_OLDER:-2h}") >&2 ||
		log "pruning stale test keyspaces failed (the node still serves)"
}

if cql_ping "$CASSANDRA_HOST" "$CASSANDRA_PORT"; then
	log "CQL already answers on $addr; reusing it"
	our_pid >/dev/null && prune_stale
	announce
	exit 0
fi

mkdir -p "$CASSANDRA_DATA"/{conf,logs,data,commitlog,hints,saved_caches,cdc_raw,triggers}
# One starter at a time: test packages run in parallel and may all call us.
exec 9>"$CASSANDRA_DATA/.start.lock"
flock 9

pidfile="$CASSANDRA_PIDFILE"
syslog="$CASSANDRA_DATA/logs/system.log"
outlog="$CASSANDRA_DATA/logs/stdout.log"
start=$SECONDS

running_pid() { our_pid; }

if ! cql_ping "$CASSANDRA_HOST" "$CASSANDRA_PORT" && ! running_pid >/dev/null; then
	"$HACK_DIR/fetch.sh"
	command -v java >/dev/null || { log "java not found: install a Java 17 runtime"; exit 1; }
	ring=()
	[[ -z "${CASSANDRA_CLUSTER_NAME:-}" ]] || ring+=(-e "s|^cluster_name: .*|cluster_name: $CASSANDRA_CLUSTER_NAME|")
	[[ -z "${CASSANDRA_SEEDS:-}" ]] || ring+=(-e "s|- seeds: .*|- seeds: \"$CASSANDRA_SEEDS\"|")
	sed -e "s|@DATA@|$CASSANDRA_DATA|g" -e "s|@HOST@|$CASSANDRA_HOST|g" \
		-e "s|@PORT@|$CASSANDRA_PORT|g" -e "s|@STORAGE_PORT@|$CASSANDRA_STORAGE_PORT|g" "${ring[@]}" \
		"$HACK_DIR/cassandra.yaml.in" >"$CASSANDRA_DATA/conf/cassandra.yaml"
	if [[ -n "${CASSANDRA_YAML_EXTRA:-}" ]]; then
		cat "$CASSANDRA_YAML_EXTRA" >>"$CASSANDRA_DATA/conf/cassandra.yaml"
	fi
	cp "$HACK_DIR/logback.xml" "$CASSANDRA_DATA/conf/logback.xml"

	lib="$CASSANDRA_HOME/lib"
	jamm="$(ls "$lib"/jamm-*.jar | head -n1)"
	# JVM flags from Cassandra's conf/jvm17-server.options (Java 17).
	jvm=(
		-Xms"$CASSANDRA_HEAP" -Xmx"$CASSANDRA_HEAP" -Xss256k
		-XX:+UseG1GC -XX:MaxGCPauseMillis=300 -XX:+ExitOnOutOfMemoryError
		-Dcassandra.triggers_dir="$CASSANDRA_DATA/triggers"
		-Djava.net.preferIPv4Stack=true
		-Djdk.attach.allowAttachSelf=true
		-Dio.netty.tryReflectionSetAccessible=true
		-javaagent:"$jamm"
	)
	# shellcheck disable=SC2206 # split on purpose: a list of flags
	[[ -z "${CASSANDRA_JVM_EXTRA:-}" ]] || jvm+=($CASSANDRA_JVM_EXTRA)
	for m in java.base/jdk.internal.misc java.base/java.lang.ref \
		java.management.rmi/com.sun.jmx.remote.internal.rmi java.rmi/sun.rmi.registry \
		java.rmi/sun.rmi.server java.sql/java.sql jdk.unsupported/sun.misc \
		jdk.compiler/com.sun.tools.javac.file jdk.attach/sun.tools.attach; do
		jvm+=(--add-exports "$m=ALL-UNNAMED")
	done
	for m in java.base/java.lang.module java.base/jdk.internal.loader java.base/jdk.internal.ref \
		java.base/jdk.internal.reflect java.base/jdk.internal.math java.base/jdk.internal.module \
		java.base/jdk.internal.util.jar java.base/sun.nio.ch java.base/java.io \
		java.base/java.lang.reflect java.base/java.lang java.base/java.util \
		jdk.management/com.sun.management.internal jdk.compiler/com.sun.tools.javac; do
		jvm+=(--add-opens "$m=ALL-UNNAMED")
	done
	props=(
		-Dcassandra.config="file://$CASSANDRA_DATA/conf/cassandra.yaml"
		-Dcassandra.storagedir="$CASSANDRA_DATA"
		-Dcassandra.logdir="$CASSANDRA_DATA/logs"
		-Dlogback.configurationFile="$CASSANDRA_DATA/conf/logback.xml"
		-Dcassandra-foreground=yes
		-Dcassandra.skip_wait_for_gossip_to_settle=0
		-Dcassandra.initial_token="${CASSANDRA_INITIAL_TOKEN:-0}"
		-Dcassandra.superuser_setup_delay_ms=0
	)
	# libfaketime (Debian's libfaketime) skews the JVM's clock.
	env=()
	if [[ -n "${CASSANDRA_FAKETIME:-}" ]]; then
		so="$(ls /usr/lib/*/faketime/libfaketime.so.1 2>/dev/null | head -n1)"
		[[ -n "$so" ]] || { log "CASSANDRA_FAKETIME asks for a skewed clock but libfaketime is not installed (apt-get install libfaketime)"; exit 1; }
		env=(env LD_PRELOAD="$so" FAKETIME="$CASSANDRA_FAKETIME" FAKETIME_DONT_RESET=1 FAKETIME_NO_CACHE=1)
	fi
	log "starting Cassandra $CASSANDRA_VERSION on $addr (heap $CASSANDRA_HEAP, data $CASSANDRA_DATA)"
	: >"$outlog"
	# setsid: the node outlives this script and the make/test that ran it.
	setsid nohup "${env[@]}" java "${jvm[@]}" "${props[@]}" -cp "$lib/*" \
		org.apache.cassandra.service.CassandraDaemon >>"$outlog" 2>&1 </dev/null 9>&- &
	echo $! >"$pidfile"
else
	log "a node is already starting (pid $(running_pid || echo '?')); waiting for it"
fi

if [[ "${CASSANDRA_NO_WAIT:-0}" == 1 ]]; then
	exit 0
fi

fail() {
	log "$1"
	log "--- last lines of $syslog ---"
	tail -n 40 "$syslog" >&2 2>/dev/null || true
	log "--- last lines of $outlog ---"
	tail -n 20 "$outlog" >&2 2>/dev/null || true
	exit 1
}

deadline=$((SECONDS + CASSANDRA_START_TIMEOUT))
next_note=$((SECONDS + 10))
until cql_ping "$CASSANDRA_HOST" "$CASSANDRA_PORT"; do
	if ! running_pid >/dev/null; then
		fail "Cassandra exited before CQL answered on $addr"
	fi
	if ((SECONDS >= deadline)); then
		fail "CQL did not answer on $addr within ${CASSANDRA_START_TIMEOUT}s (pid $(running_pid)); stop it with hack/cassandra/stop.sh"
	fi
	if ((SECONDS >= next_note)); then
		log "waiting for CQL on $addr ($((SECONDS - start))s): $(tail -n 1 "$syslog" 2>/dev/null | cut -c1-120)"
		next_note=$((SECONDS + 10))
	fi
	sleep 1
done
log "CQL answers on $addr after $((SECONDS - start))s"
prune_stale
announce
