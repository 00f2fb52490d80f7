#!/usr/bin/env bash
# start.sh — run moto's S3-compatible server on loopback for the object
# store tests (runtime/adapters/store/objects, attachments through S3).
#
# moto[server] is installed from PyPI into a cached venv; the server is
# started on $S3_HOST:$S3_PORT unless something already answers there. The
# last line on stdout is
#
#   export CONCORD_S3=s3+http://concord:concord-secret@127.0.0.1:9390/concord-test
#
# progress goes to stderr.
#
# Environment (defaults in brackets):
#   S3_HOST [127.0.0.1]  S3_PORT [9390]  S3_START_TIMEOUT [30] (seconds)
#   CONCORD_CACHE [~/.cache/concord]
set -euo pipefail

S3_HOST="${S3_HOST:-127.0.0.1}"
S3_PORT="${S3_PORT:-9390}"
S3_START_TIMEOUT="${S3_START_TIMEOUT:-30}"
CONCORD_CACHE="${CONCORD_CACHE:-$HOME/.cache/concord}"
MOTO_VERSION=5.2.5
venv="$CONCORD_CACHE/pyvenv-moto-$MOTO_VERSION"
run="$CONCORD_CACHE/s3-$S3_PORT"

log() { printf '[s3] %s\n' "$*" >&2; }
die() { printf '[s3] ERROR: %s\n' "$*" >&2; exit 1; }

answers() { curl -fsS -o /dev/null "http://$S3_HOST:$S3_PORT/" 2>/dev/null; }

if ! answers; then
	if [[ ! -f "$venv/.installed" ]]; then
		log "installing moto[server]==$MOTO_VERSION into $venv"
		rm -rf "$venv"
		python3 -m venv "$venv" || die "python3 -m venv failed: install python3 with the venv module"
		"$venv/bin/python" -m pip install --disable-pip-version-check --progress-bar off -q "moto[server]==$MOTO_VERSION" >&2 \
			|| die "pip install moto[server] failed"
		touch "$venv/.installed"
	fi
	mkdir -p "$run"
	log "starting moto_server on $S3_HOST:$S3_PORT"
	nohup "$venv/bin/moto_server" -H "$S3_HOST" -p "$S3_PORT" >"$run/moto.log" 2>&1 &
	echo $! >"$run/pid"
	for _ in $(seq "$S3_START_TIMEOUT"); do
		answers && break
		sleep 1
	done
	answers || die "moto_server did not answer on $S3_HOST:$S3_PORT within ${S3_START_TIMEOUT}s (log: $run/moto.log)"
fi
log "S3 API answering on $S3_HOST:$S3_PORT"
echo "export CONCORD_S3=s3+http://concord:concord-secret@$S3_HOST:$S3_PORT/concord-test"
