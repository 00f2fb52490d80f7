#!/usr/bin/env bash
# start.sh — run a throwaway coturn TURN server on loopback for the voice
# relay-only test (test/voice: a WebRTC client that may only use relayed
# candidates joins a call through it).
#
# Installs coturn from Debian's packages when turnserver is missing (the
# test scripts run as root), then starts it on $TURN_HOST:$TURN_PORT (UDP
# and TCP) with a static long-term user, relaying on $TURN_HOST (ports
# $TURN_MIN_PORT-$TURN_MAX_PORT) to loopback peers — the SFU under test is
# on 127.0.0.1, which coturn refuses to relay to unless told. No TLS, no
# CLI, no database. If a server already answers on the port (this
# script's, by its pid file) it is reused. The last lines on stdout are
#
#   export CONCORD_TURN=127.0.0.1:3479
#   export CONCORD_TURN_USER=concord
#   export CONCORD_TURN_PASSWORD=...
#
# progress goes to stderr.
#
# Environment (defaults in brackets):
#   TURN_HOST [127.0.0.1]  TURN_PORT [3479]  TURN_MIN_PORT [49400]  TURN_MAX_PORT [49499]
#   TURN_USER [concord]  TURN_PASSWORD [concord-test-turn]  TURN_START_TIMEOUT [20] (seconds)
#   CONCORD_CACHE [~/.cache/concord]  (log, pid and config under coturn-$TURN_PORT/)
set -euo pipefail

TURN_HOST="${TURN_HOST:-127.0.0.1}"
TURN_PORT="${TURN_PORT:-3479}"
TURN_MIN_PORT="${TURN_MIN_PORT:-49400}"
TURN_MAX_PORT="${TURN_MAX_PORT:-49499}"
TURN_USER="${TURN_USER:-concord}"
TURN_PASSWORD="${TURN_PASSWORD:-concord-test-turn}"
TURN_START_TIMEOUT="${TURN_START_TIMEOUT:-20}"
CONCORD_CACHE="${CONCORD_CACHE:-$HOME/.cache/concord}"
run="$CONCORD_CACHE/coturn-$TURN_PORT"

log() { printf '[coturn] %s\n' "$*" >&2; }
die() { printf '[coturn] ERROR: %s\n' "$*" >&2; exit 1; }

# answers: something accepts TCP on the TURN port (coturn listens on TCP
# and UDP on the same port).
answers() { (exec 3<>"/dev/tcp/$TURN_HOST/$TURN_PORT") 2>/dev/null; }

running() { [[ -f "$run/turnserver.pid" ]] && kill -0 "$(cat "$run/turnserver.pid")" 2>/dev/null; }

install() {
	command -v turnserver >/dev/null && return
	[[ "$(id -u)" == 0 ]] || die "turnserver is not installed and this script is not root: apt-get install -y coturn"
	command -v apt-get >/dev/null || die "turnserver is not installed and apt-get is not available"
	log "installing coturn from Debian's packages"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq >&2
	apt-get install -y -qq --no-install-recommends coturn >&2
	command -v turnserver >/dev/null || die "apt-get finished but turnserver is still not on PATH"
}

install

if running && answers; then
	log "reusing turnserver already running on $TURN_HOST:$TURN_PORT (pid $(cat "$run/turnserver.pid"))"
else
	answers && die "something other than this script's turnserver answers on $TURN_HOST:$TURN_PORT"
	mkdir -p "$run"
	# Options in a file so the password is not on the command line.
	cat > "$run/turnserver.conf" <<CONF
listening-ip=$TURN_HOST
listening-port=$TURN_PORT
relay-ip=$TURN_HOST
min-port=$TURN_MIN_PORT
max-port=$TURN_MAX_PORT
realm=concord.test
lt-cred-mech
fingerprint
user=$TURN_USER:$TURN_PASSWORD
allow-loopback-peers
no-tls
no-dtls
no-cli
no-multicast-peers
simple-log
log-file=$run/turnserver.log
pidfile=$run/turnserver.pid
CONF
	chmod 600 "$run/turnserver.conf"
	log "starting $(turnserver --version 2>/dev/null | head -n 1) on $TURN_HOST:$TURN_PORT (log $run/turnserver.log)"
	turnserver -c "$run/turnserver.conf" --daemon --no-stdout-log >&2
	deadline=$((SECONDS + TURN_START_TIMEOUT))
	until running && answers; do
		if ((SECONDS >= deadline)); then
			tail -n 20 "$run/turnserver.log" >&2 || true
			die "turnserver did not listen on $TURN_HOST:$TURN_PORT within ${TURN_START_TIMEOUT}s"
		fi
		sleep 0.2
	done
	log "turnserver is up (pid $(cat "$run/turnserver.pid"))"
fi

echo "export CONCORD_TURN=$TURN_HOST:$TURN_PORT"
echo "export CONCORD_TURN_USER=$TURN_USER"
echo "export CONCORD_TURN_PASSWORD=$TURN_PASSWORD"
