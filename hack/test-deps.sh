#!/usr/bin/env bash
# Installs and starts everything `make test` needs, then writes the
# addresses to $CONCORD_CACHE/test-env.sh for the test run to source.
# Heavy artifacts are cached under $CONCORD_CACHE (default ~/.cache/concord).
# Any failure stops `make test` with the reason: no test skips a real server.
set -euo pipefail
cd "$(dirname "$0")/.."
CACHE=${CONCORD_CACHE:-$HOME/.cache/concord}
mkdir -p "$CACHE"
ENV_FILE="$CACHE/test-env.sh"
: > "$ENV_FILE.tmp"

step() { printf '\n==> %s\n' "$*"; }

# apt_need CMD PACKAGE WHY installs Debian's PACKAGE when CMD is missing.
apt_need() {
	command -v "$1" >/dev/null 2>&1 && return 0
	command -v apt-get >/dev/null || { echo "$1 is missing and apt-get is not available: install $2 ($3)" >&2; exit 1; }
	apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$2" >/dev/null \
		|| { echo "apt-get install $2 failed: $3" >&2; exit 1; }
}

# pyvenv NAME REQUIREMENTS prints the python of a venv with REQUIREMENTS
# installed, cached under $CACHE by the file's hash. It is built in place
# (venvs do not survive a move); .installed marks it complete.
pyvenv() {
	local venv
	venv="$CACHE/$1-$(sha256sum "$2" | cut -c1-16)"
	if [[ -f "$venv/.installed" ]]; then
		echo "reusing $venv" >&2
	else
		rm -rf "$venv"
		python3 -m venv "$venv" >&2 || { echo "python3 -m venv failed: install python3 with the venv module" >&2; exit 1; }
		"$venv/bin/python" -m pip install --disable-pip-version-check --progress-bar off -r "$2" >&2 \
			|| { echo "pip install -r $2 failed" >&2; exit 1; }
		touch "$venv/.installed"
	fi
	echo "$venv/bin/python"
}

step "Go modules"
go mod download

step "Redis (counters, rate limits) on 127.0.0.1:6390"
bash hack/redis/start.sh >> "$ENV_FILE.tmp"

step "S3-compatible object store (moto[server] from PyPI) on 127.0.0.1:9390"
bash hack/s3/start.sh | tail -n 1 >> "$ENV_FILE.tmp"

step "discord.js conformance client (npm ci)"
( cd test/conformance/js && npm ci --no-audit --no-fund --loglevel=error )
echo "export CONCORD_JS_DIR=$PWD/test/conformance/js" >> "$ENV_FILE.tmp"

step "discord.py conformance client (venv from test/conformance/py/requirements.txt, cached)"
PY=$(pyvenv pyvenv test/conformance/py/requirements.txt)
echo "export CONCORD_PY=$PY" >> "$ENV_FILE.tmp"

step "TypeScript compiler and Preact's declarations for the web client's type check (npm ci in web)"
( cd web && npm ci --no-audit --no-fund --loglevel=error )

step "ffmpeg from Debian (voice tests make their Ogg Opus tone files with it)"
apt_need ffmpeg ffmpeg "the voice tests make their Ogg Opus tone files with it"
# Read the list whole first: grep -q would close the pipe early and pipefail
# would report ffmpeg's SIGPIPE as a failure.
FFMPEG_ENCODERS=$(ffmpeg -hide_banner -encoders 2>/dev/null)
grep -q libopus <<<"$FFMPEG_ENCODERS" || { echo "ffmpeg has no libopus encoder" >&2; exit 1; }
grep -q libx264 <<<"$FFMPEG_ENCODERS" || { echo "ffmpeg has no libx264 encoder (the H264 voice test encodes with it)" >&2; exit 1; }

step "discord.js 14 and @discordjs/voice 0.19 with Node 22 for the voice tests (npm ci in test/voice/js)"
( cd test/voice/js && npm ci --no-audit --no-fund --loglevel=error )
echo "export CONCORD_VOICE_JS_DIR=$PWD/test/voice/js" >> "$ENV_FILE.tmp"

step "discord.py[voice] and discord-ext-voice-recv for the voice tests (venv, cached)"
VPY=$(pyvenv pyvenv-voice test/voice/py/requirements.txt)
echo "export CONCORD_VOICE_PY=$VPY" >> "$ENV_FILE.tmp"

step "Chromium (headless, for the web client's browser tests in test/browser)"
apt_need chromium chromium "the browser tests need Debian's chromium"
echo "export CONCORD_CHROMIUM=$(command -v chromium)" >> "$ENV_FILE.tmp"

step "HAProxy from Debian (the load balancer of make run-cluster and its test)"
apt_need haproxy haproxy "make run-cluster needs Debian's haproxy"

step "libfaketime from Debian (the durability suite skews a Cassandra node's clock with it: make test-faults)"
apt_need faketime faketime "make test-faults skews a Cassandra node's clock with Debian's libfaketime"

step "iptables from Debian (the durability suite partitions the network between test processes with it: make test and make test-faults)"
apt_need iptables iptables "make test-faults partitions the network with Debian's iptables"

step "coturn from Debian (the voice relay-only test's TURN server) on 127.0.0.1:3479"
bash hack/coturn/start.sh | tail -n 3 >> "$ENV_FILE.tmp"

step "Apache Kafka (KRaft, single node on loopback)"
bash hack/kafka/kafka.sh start
echo "export CONCORD_KAFKA=$(bash hack/kafka/kafka.sh addr)" >> "$ENV_FILE.tmp"

step "Apache Cassandra 5.0 (single node on loopback)"
CASSANDRA_ADDR=$(bash hack/cassandra/start.sh)
echo "export CONCORD_CASSANDRA=$CASSANDRA_ADDR" >> "$ENV_FILE.tmp"

step "kube-apiserver and etcd for envtest (built from the Go module proxy, cached)"
echo "export KUBEBUILDER_ASSETS=$(bash hack/envtest/build.sh | tail -n 1)" >> "$ENV_FILE.tmp"

step "Prometheus and promtool (built from the Go module proxy, cached; test/observability)"
echo "export CONCORD_PROMETHEUS_DIR=$(bash hack/prometheus/build.sh | tail -n 1)" >> "$ENV_FILE.tmp"

step "OpenTelemetry collector (OTLP receiver and a file exporter, built from the Go module proxy, cached; test/observability)"
echo "export CONCORD_OTELCOL=$(bash hack/otelcol/build.sh | tail -n 1)" >> "$ENV_FILE.tmp"

mv "$ENV_FILE.tmp" "$ENV_FILE"
step "test environment"
cat "$ENV_FILE"
