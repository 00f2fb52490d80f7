#!/usr/bin/env bash
# Builds Prometheus and promtool from the Go module proxy and caches them
# outside the repository, keyed by version. The observability test
# (test/observability) scrapes concord with this Prometheus and evaluates
# every alert and dashboard query through its HTTP API; promtool runs the
# alert rule unit tests.
#
# Nothing pre-built is downloaded: `go install` compiles the commands. The
# web UI's assets are not built (they need npm): without the builtinassets
# tag Prometheus serves the UI from disk, which the tests never ask for —
# only the HTTP API matters. remove_all_sd leaves the cloud service
# discoveries out (the tests use static targets), which halves the build.
#
# Idempotent: when both binaries exist it returns at once. The last line of
# stdout is the directory holding prometheus and promtool; progress goes to
# stderr.
#
# Environment:
#   PROMETHEUS_MODULE_VERSION  the Go module version (default v0.316.0, Prometheus 3.16.0)
#   CONCORD_CACHE              cache root (default ~/.cache/concord)
set -euo pipefail

VERSION="${PROMETHEUS_MODULE_VERSION:-v0.316.0}"
CACHE_ROOT="${CONCORD_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/concord}"
DIR="${CACHE_ROOT}/prometheus-${VERSION}"

log() { printf '[prometheus-build %s] %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }

if [[ -x "${DIR}/prometheus" && -x "${DIR}/promtool" ]]; then
  log "cached: ${DIR}"
  echo "${DIR}"
  exit 0
fi
mkdir -p "${DIR}"
# Serialise concurrent builds (two test runs starting together).
exec 9>"${DIR}.lock"
flock 9
if [[ -x "${DIR}/prometheus" && -x "${DIR}/promtool" ]]; then
  log "cached (built by a concurrent run): ${DIR}"
  echo "${DIR}"
  exit 0
fi

export GOWORK=off GOFLAGS="-buildvcs=false" GOBIN="${DIR}/.bin"
start=$SECONDS
log "go install prometheus and promtool ${VERSION} (several minutes cold on 2 cores)"
( while sleep 60 </dev/null >/dev/null 2>&1; do log "still compiling ($((SECONDS - start))s)"; done ) &
hb=$!
rc=0
go install -trimpath -tags remove_all_sd -ldflags="-s -w" \
  "github.com/prometheus/prometheus/cmd/prometheus@${VERSION}" \
  "github.com/prometheus/prometheus/cmd/promtool@${VERSION}" >&2 || rc=$?
kill "${hb}" 2>/dev/null || true
wait "${hb}" 2>/dev/null || true
[[ ${rc} -eq 0 ]] || { log "go install failed (rc=${rc})"; exit "${rc}"; }
mv "${GOBIN}/prometheus" "${GOBIN}/promtool" "${DIR}/"
rmdir "${GOBIN}" 2>/dev/null || true
log "built in $((SECONDS - start))s: ${DIR}"
echo "${DIR}"
