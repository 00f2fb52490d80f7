#!/usr/bin/env bash
# stop.sh — stop the redis-server hack/redis/start.sh started on
# $REDIS_HOST:$REDIS_PORT (by SHUTDOWN NOSAVE; the server keeps no data).
set -euo pipefail

REDIS_HOST="${REDIS_HOST:-127.0.0.1}"
REDIS_PORT="${REDIS_PORT:-6390}"

if [[ "$(redis-cli -h "$REDIS_HOST" -p "$REDIS_PORT" ping 2>/dev/null || true)" != "PONG" ]]; then
	printf '[redis] nothing answers on %s:%s\n' "$REDIS_HOST" "$REDIS_PORT" >&2
	exit 0
fi
printf '[redis] stopping redis-server on %s:%s\n' "$REDIS_HOST" "$REDIS_PORT" >&2
redis-cli -h "$REDIS_HOST" -p "$REDIS_PORT" shutdown nosave >/dev/null 2>&1 || true
