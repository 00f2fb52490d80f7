#!/usr/bin/env bash
# Builds concord-otelcol, a minimal OpenTelemetry Collector (the
# collector's OTLP receiver in front of a file exporter; main.go.txt) from
# the Go module proxy and caches it outside the repository, keyed by
# version. The trace test (test/observability TestOneTracePerSend) sends
# the split topology's spans to it.
#
# Idempotent: returns at once when the binary exists. The last line of
# stdout is the binary's path; progress goes to stderr.
#
# Environment:
#   OTELCOL_RECEIVER_VERSION  go.opentelemetry.io/collector/receiver/otlpreceiver (default v0.165.0)
#   CONCORD_CACHE             cache root (default ~/.cache/concord)
set -euo pipefail

VERSION="${OTELCOL_RECEIVER_VERSION:-v0.165.0}"
CACHE_ROOT="${CONCORD_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/concord}"
SRC="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/main.go.txt"
# The binary is keyed by the receiver version and the main's hash.
BIN="${CACHE_ROOT}/otelcol-${VERSION}-$(sha256sum "${SRC}" | cut -c1-12)/concord-otelcol"

log() { printf '[otelcol-build %s] %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }

if [[ -x "${BIN}" ]]; then
  log "cached: ${BIN}"
  echo "${BIN}"
  exit 0
fi
mkdir -p "$(dirname "${BIN}")"
exec 9>"${BIN}.lock"
flock 9
if [[ -x "${BIN}" ]]; then
  echo "${BIN}"
  exit 0
fi
WORK="$(mktemp -d "${TMPDIR:-/tmp}/concord-otelcol.XXXXXX")"
trap 'rm -rf "${WORK}"' EXIT
export GOWORK=off GOFLAGS="-mod=mod -buildvcs=false"
cp "${SRC}" "${WORK}/main.go"
cat >"${WORK}/go.mod" <<MOD
module concord.local/otelcol

go 1.26
MOD
start=$SECONDS
log "resolving go.opentelemetry.io/collector/receiver/otlpreceiver@${VERSION}"
(cd "${WORK}" && go get "go.opentelemetry.io/collector/receiver/otlpreceiver@${VERSION}" >&2 && go mod tidy >&2)
log "compiling"
(cd "${WORK}" && go build -trimpath -ldflags="-s -w" -o "${BIN}.tmp" . >&2)
mv "${BIN}.tmp" "${BIN}"
log "built in $((SECONDS - start))s: ${BIN}"
echo "${BIN}"
