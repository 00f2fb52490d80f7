#!/usr/bin/env bash
# start.sh — run a throwaway redis-server on loopback for the counters and
# rate-limit tests (runtime/adapters/counters/redis, runtime/edge/ratelimit).
#
# Installs redis-server from Debian's packages when it is missing (the test
# scripts run as root), then starts it on $REDIS_HOST:$REDIS_PORT with no
# persistence (no RDB snapshots, no AOF): counters are approximate state and
# the tests want a clean, fast server. If a server already answers PING on
# that port it is reused. The last line on stdout is
#
#   export CONCORD_TEST_REDIS=127.0.0.1:6390
#
# so callers can `eval "$(hack/redis/start.sh | tail -1)"`; progress goes to
# stderr.
#
# Environment (defaults in brackets):
#   REDIS_HOST [127.0.0.1]  REDIS_PORT [6390]  REDIS_START_TIMEOUT [20] (seconds)
#   CONCORD_CACHE [~/.cache/concord]  (log and pid file under redis-$REDIS_PORT/)
set -euo pipefail

REDIS_HOST="${REDIS_HOST:-127.0.0.1}"
REDIS_PORT="${REDIS_PORT:-6390}"
REDIS_START_TIMEOUT="${REDIS_START_TIMEOUT:-20}"
CONCORD_CACHE="${CONCORD_CACHE:-$HOME/.cache/concord}"
run="$CONCORD_CACHE/redis-$REDIS_PORT"

log() { printf '[redis] %s\n' "$*" >&2; }
die() { printf '[redis] ERROR: %s\n' "$*" >&2; exit 1; }

answers() {
	[[ "$(redis-cli -h "$REDIS_HOST" -p "$REDIS_PORT" ping 2>/dev/null || true)" == "PONG" ]]
}

install() {
	if command -v redis-server >/dev/null && command -v redis-cli >/dev/null; then
		return
	fi
	[[ "$(id -u)" == 0 ]] || die "redis-server is not installed and this script is not root: apt-get install -y redis-server"
	command -v apt-get >/dev/null || die "redis-server is not installed and apt-get is not available"
	log "installing redis-server from Debian's packages"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq >&2
	apt-get install -y -qq --no-install-recommends redis-server redis-tools >&2
	command -v redis-server >/dev/null || die "apt-get finished but redis-server is still not on PATH"
}

install

if answers; then
	log "reusing redis-server already answering on $REDIS_HOST:$REDIS_PORT ($(redis-server --version | awk '{print $3}'))"
else
	mkdir -p "$run"
	log "starting $(redis-server --version | awk '{print $1, $2, $3}') on $REDIS_HOST:$REDIS_PORT (log $run/redis.log)"
	redis-server \
		--bind "$REDIS_HOST" \
		--port "$REDIS_PORT" \
		--save "" \
		--appendonly no \
		--daemonize yes \
		--dir "$run" \
		--pidfile "$run/redis.pid" \
		--logfile "$run/redis.log" >&2
	deadline=$((SECONDS + REDIS_START_TIMEOUT))
	until answers; do
		if ((SECONDS >= deadline)); then
			tail -n 20 "$run/redis.log" >&2 || true
			die "redis-server did not answer PING on $REDIS_HOST:$REDIS_PORT within ${REDIS_START_TIMEOUT}s"
		fi
		sleep 0.2
	done
	log "redis-server is up (pid $(cat "$run/redis.pid" 2>/dev/null || echo '?'))"
fi

echo "export CONCORD_TEST_REDIS=$REDIS_HOST:$REDIS_PORT"
