#!/usr/bin/env bash
# stop.sh — stop the turnserver hack/coturn/start.sh started on $TURN_PORT
# (by its pid file).
set -euo pipefail

TURN_PORT="${TURN_PORT:-3479}"
CONCORD_CACHE="${CONCORD_CACHE:-$HOME/.cache/concord}"
pidfile="$CONCORD_CACHE/coturn-$TURN_PORT/turnserver.pid"

# Only this script's turnserver: a pid file outlives a killed server and
# its pid is recycled.
# shellcheck source=../pidfile.sh
source "$(dirname "${BASH_SOURCE[0]}")/../pidfile.sh"
if ! pid="$(pidfile_pid "$pidfile" "turnserver -c $CONCORD_CACHE/coturn-$TURN_PORT/turnserver.conf")"; then
	printf '[coturn] no turnserver of ours runs on port %s\n' "$TURN_PORT" >&2
	exit 0
fi
printf '[coturn] stopping turnserver (pid %s)\n' "$pid" >&2
kill "$pid"
