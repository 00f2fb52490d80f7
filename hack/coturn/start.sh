#!/usr/bin/env bash
# start.sh — run a throwaway coturn TURN server on loopback for the voice
# relay-only tests (test/voice: a WebRTC client that may only use relayed
# candidates joins a call through it).
#
# Installs coturn from Debian's packages when turnserver is missing (the
# test scripts run as root), then starts it on $TURN_HOST:$TURN_PORT (UDP
# and TCP), relaying on $TURN_HOST (ports $TURN_MIN_PORT-$TURN_MAX_PORT) to
# loopback peers — the SFU under test is on 127.0.0.1, which coturn
# refuses to relay to unless told. No TLS, no CLI, no database.
#
# Credentials are coturn's time-limited ones (use-auth-secret,
# static-auth-secret=$TURN_SECRET): username "<expiry unix>:<user>",
# credential base64(HMAC-SHA1(secret, username)), what the SFU mints for
# each session when CONCORD_VOICE_ICE_SECRET is set. coturn cannot mix
# them with static users, so the fixed user the static-credential test
# configures is one such pair for $TURN_USER, minted here, expiring at the
# start of 2038 (coturn reads the expiry as a signed 32-bit number).
#
# If this script's server (by its pid file) already answers on the port
# with the same configuration it is reused; with another, restarted. The
# last three lines on stdout are
#
#   export CONCORD_TURN=127.0.0.1:3479
#   export CONCORD_TURN_USER=2145916800:concord
#   export CONCORD_TURN_PASSWORD=... CONCORD_TURN_SECRET=...
#
# (the secret shares the last line: callers keep the last three lines);
# progress goes to stderr.
#
# Environment (defaults in brackets):
#   TURN_HOST [127.0.0.1]  TURN_PORT [3479]  TURN_MIN_PORT [49400]  TURN_MAX_PORT [49499]
#   TURN_USER [concord]  TURN_SECRET [concord-test-turn-secret]
#   TURN_START_TIMEOUT [20] (seconds)
#   CONCORD_CACHE [~/.cache/concord]  (log, pid and config under coturn-$TURN_PORT/)
set -euo pipefail

TURN_HOST="${TURN_HOST:-127.0.0.1}"
TURN_PORT="${TURN_PORT:-3479}"
TURN_MIN_PORT="${TURN_MIN_PORT:-49400}"
TURN_MAX_PORT="${TURN_MAX_PORT:-49499}"
TURN_USER="${TURN_USER:-concord}"
TURN_SECRET="${TURN_SECRET:-concord-test-turn-secret}"
TURN_START_TIMEOUT="${TURN_START_TIMEOUT:-20}"
CONCORD_CACHE="${CONCORD_CACHE:-$HOME/.cache/concord}"
run="$CONCORD_CACHE/coturn-$TURN_PORT"

log() { printf '[coturn] %s\n' "$*" >&2; }
die() { printf '[coturn] ERROR: %s\n' "$*" >&2; exit 1; }

# answers: something accepts TCP on the TURN port (coturn listens on TCP
# and UDP on the same port).
answers() { (exec 3<>"/dev/tcp/$TURN_HOST/$TURN_PORT") 2>/dev/null; }

# shellcheck source=../pidfile.sh
source "$(dirname "${BASH_SOURCE[0]}")/../pidfile.sh"
# running: the pid file's process is alive and is this script's
# turnserver (a pid file outlives a killed server, and its pid is recycled:
# a stranger must not be reused, or killed on a restart).
running() { pidfile_pid "$run/turnserver.pid" "turnserver -c $run/turnserver.conf" >/dev/null; }

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
command -v openssl >/dev/null || die "openssl is needed to mint the static TURN credential: apt-get install -y openssl"

# The fixed credential: a time-limited one lasting until 2038, about the
# latest expiry coturn reads.
TURN_USERNAME="2145916800:$TURN_USER"
TURN_PASSWORD="$(printf '%s' "$TURN_USERNAME" | openssl dgst -sha1 -hmac "$TURN_SECRET" -binary | base64)"

# Options in a file so the secret is not on the command line.
conf="listening-ip=$TURN_HOST
listening-port=$TURN_PORT
relay-ip=$TURN_HOST
min-port=$TURN_MIN_PORT
max-port=$TURN_MAX_PORT
realm=concord.test
lt-cred-mech
use-auth-secret
static-auth-secret=$TURN_SECRET
fingerprint
allow-loopback-peers
no-tls
no-dtls
no-cli
no-multicast-peers
simple-log
log-file=$run/turnserver.log
pidfile=$run/turnserver.pid"

if running && answers && [[ "$(cat "$run/turnserver.conf" 2>/dev/null)" == "$conf" ]]; then
	log "reusing turnserver already running on $TURN_HOST:$TURN_PORT (pid $(cat "$run/turnserver.pid"))"
else
	if running; then
		pid="$(cat "$run/turnserver.pid")"
		log "restarting this script's turnserver (pid $pid): its configuration changed"
		kill "$pid"
		deadline=$((SECONDS + TURN_START_TIMEOUT))
		while kill -0 "$pid" 2>/dev/null || answers; do
			((SECONDS >= deadline)) && die "turnserver (pid $pid) did not stop within ${TURN_START_TIMEOUT}s"
			sleep 0.2
		done
	fi
	answers && die "something other than this script's turnserver answers on $TURN_HOST:$TURN_PORT"
	mkdir -p "$run"
	printf '%s\n' "$conf" > "$run/turnserver.conf"
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
echo "export CONCORD_TURN_USER=$TURN_USERNAME"
echo "export CONCORD_TURN_PASSWORD=$TURN_PASSWORD CONCORD_TURN_SECRET=$TURN_SECRET"
