# shellcheck shell=bash
# Shared settings for the hack/cassandra scripts. Every value can be
# overridden from the environment.

CASSANDRA_VERSION="${CASSANDRA_VERSION:-5.0.8}"
CONCORD_CACHE="${CONCORD_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/concord}"
# Where the jars live (fetched once per version).
CASSANDRA_HOME="${CASSANDRA_HOME:-$CONCORD_CACHE/cassandra-$CASSANDRA_VERSION}"
# Where the running node keeps its data, logs, generated config and pid.
CASSANDRA_DATA="${CASSANDRA_DATA:-$CONCORD_CACHE/cassandra-data}"
CASSANDRA_HOST="${CASSANDRA_HOST:-127.0.0.1}"
CASSANDRA_PORT="${CASSANDRA_PORT:-9042}"
CASSANDRA_STORAGE_PORT="${CASSANDRA_STORAGE_PORT:-7000}"
# 1.5 GiB: a full make test keeps a few dozen keyspaces of ~40 tables
# each alive at once, and every table costs heap (768M ran out).
CASSANDRA_HEAP="${CASSANDRA_HEAP:-1536M}"
# Seconds to wait for CQL to answer after starting the JVM.
CASSANDRA_START_TIMEOUT="${CASSANDRA_START_TIMEOUT:-180}"
# The node's pid file.
CASSANDRA_PIDFILE="${CASSANDRA_PIDFILE:-$CASSANDRA_DATA/cassandra.pid}"

HACK_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=../pidfile.sh
source "$HACK_DIR/../pidfile.sh"

log() { printf 'cassandra: %s\n' "$*" >&2; }

# cql_ping HOST PORT succeeds when a CQL native-protocol server answers an
# OPTIONS request (protocol v4) with SUPPORTED. A bare open port is not
# enough: Cassandra binds the port before it can serve queries.
cql_ping() {
	local host="$1" port="$2" reply
	reply="$(
		timeout 3 bash -c '
			exec 3<>"/dev/tcp/$0/$1" || exit 1
			printf "\x04\x00\x00\x00\x05\x00\x00\x00\x00" >&3
			head -c 9 <&3 | od -An -tx1
		' "$host" "$port" 2>/dev/null
	)" || return 1
	# Response header: version 0x84, flags, stream (2 bytes), opcode 0x06.
	read -r -a b <<<"$reply"
	[[ ${#b[@]} -ge 5 && "${b[0]}" == "84" && "${b[4]}" == "06" ]]
}

# our_pid prints the pid recorded in $CASSANDRA_DATA/cassandra.pid when
# that process is alive and is a CassandraDaemon using this data directory
# (a recycled pid is never taken for our node).
our_pid() {
	pidfile_pid "${CASSANDRA_PIDFILE:-$CASSANDRA_DATA/cassandra.pid}" "-Dcassandra.storagedir=$CASSANDRA_DATA .*CassandraDaemon"
}
