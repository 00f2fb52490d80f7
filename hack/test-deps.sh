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
PY_REQ=test/conformance/py/requirements.txt
PY_VENV="$CACHE/pyvenv-$(sha256sum "$PY_REQ" | cut -c1-16)"
if [[ -f "$PY_VENV/.installed" ]]; then
	echo "reusing $PY_VENV"
else
	# Built in place (venvs do not survive a move); .installed marks it complete.
	rm -rf "$PY_VENV"
	python3 -m venv "$PY_VENV" || { echo "python3 -m venv failed: install python3 with the venv module" >&2; exit 1; }
	"$PY_VENV/bin/python" -m pip install --disable-pip-version-check --progress-bar off -r "$PY_REQ" \
		|| { echo "pip install -r $PY_REQ failed" >&2; exit 1; }
	touch "$PY_VENV/.installed"
fi
echo "export CONCORD_PY=$PY_VENV/bin/python" >> "$ENV_FILE.tmp"

step "ffmpeg from Debian (voice tests make their Ogg Opus tone files with it)"
if ! command -v ffmpeg >/dev/null; then
	command -v apt-get >/dev/null || { echo "ffmpeg is missing and apt-get is not available: install ffmpeg" >&2; exit 1; }
	apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq ffmpeg >/dev/null \
		|| { echo "apt-get install ffmpeg failed" >&2; exit 1; }
fi
# Read the list whole first: grep -q would close the pipe early and pipefail
# would report ffmpeg's SIGPIPE as a failure.
FFMPEG_ENCODERS=$(ffmpeg -hide_banner -encoders 2>/dev/null)
grep -q libopus <<<"$FFMPEG_ENCODERS" || { echo "ffmpeg has no libopus encoder" >&2; exit 1; }

step "discord.js 14 and @discordjs/voice 0.19 with Node 22 for the voice tests (npm ci in test/voice/js)"
( cd test/voice/js && npm ci --no-audit --no-fund --loglevel=error )
echo "export CONCORD_VOICE_JS_DIR=$PWD/test/voice/js" >> "$ENV_FILE.tmp"

step "discord.py[voice] and discord-ext-voice-recv for the voice tests (venv, cached)"
VPY_REQ=test/voice/py/requirements.txt
VPY_VENV="$CACHE/pyvenv-voice-$(sha256sum "$VPY_REQ" | cut -c1-16)"
if [[ -f "$VPY_VENV/.installed" ]]; then
	echo "reusing $VPY_VENV"
else
	rm -rf "$VPY_VENV"
	python3 -m venv "$VPY_VENV" || { echo "python3 -m venv failed: install python3 with the venv module" >&2; exit 1; }
	"$VPY_VENV/bin/python" -m pip install --disable-pip-version-check --progress-bar off -r "$VPY_REQ" \
		|| { echo "pip install -r $VPY_REQ failed" >&2; exit 1; }
	touch "$VPY_VENV/.installed"
fi
echo "export CONCORD_VOICE_PY=$VPY_VENV/bin/python" >> "$ENV_FILE.tmp"

step "Chromium (headless, for the web client's browser tests in test/browser)"
if ! command -v chromium >/dev/null 2>&1; then
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium \
		|| { echo "apt-get install chromium failed: the browser tests need Debian's chromium" >&2; exit 1; }
fi
echo "export CONCORD_CHROMIUM=$(command -v chromium)" >> "$ENV_FILE.tmp"

step "HAProxy from Debian (the load balancer of make run-cluster and its test)"
if ! command -v haproxy >/dev/null 2>&1; then
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq haproxy \
		|| { echo "apt-get install haproxy failed: make run-cluster needs Debian's haproxy" >&2; exit 1; }
fi

step "Apache Kafka (KRaft, single node on loopback)"
bash hack/kafka/kafka.sh start
echo "export CONCORD_KAFKA=$(bash hack/kafka/kafka.sh addr)" >> "$ENV_FILE.tmp"

step "Apache Cassandra 5.0 (single node on loopback)"
CASSANDRA_ADDR=$(bash hack/cassandra/start.sh)
echo "export CONCORD_CASSANDRA=$CASSANDRA_ADDR" >> "$ENV_FILE.tmp"

step "kube-apiserver and etcd for envtest (built from the Go module proxy, cached)"
echo "export KUBEBUILDER_ASSETS=$(bash hack/envtest/build.sh | tail -n 1)" >> "$ENV_FILE.tmp"

mv "$ENV_FILE.tmp" "$ENV_FILE"
step "test environment"
cat "$ENV_FILE"
