#!/usr/bin/env bash
# stop.sh stops the Cassandra node that start.sh started (by the pid it
# recorded) and waits for it to exit. It never touches a server it did not
# start. With --wipe it also deletes the node's data directory.
set -euo pipefail
source "$(dirname "$0")/env.sh"

pidfile="$CASSANDRA_DATA/cassandra.pid"
if pid="$(our_pid)"; then
	log "stopping Cassandra (pid $pid)"
	kill "$pid"
	for _ in $(seq 1 60); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 1
	done
	if kill -0 "$pid" 2>/dev/null; then
		log "still running after 60s; sending SIGKILL"
		kill -9 "$pid"
	fi
	log "stopped"
else
	log "no Cassandra started by start.sh is running"
fi
rm -f "$pidfile"
if [[ "${1:-}" == "--wipe" ]]; then
	log "removing $CASSANDRA_DATA"
	rm -rf "$CASSANDRA_DATA"
fi
