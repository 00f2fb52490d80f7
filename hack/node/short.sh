#!/usr/bin/env bash
# short.sh — the short form of the end-to-end suite on a real node, the
# part of `make test` that runs test/kube (docs/operations.md, "The short
# form in make test").
#
# It needs the node's binaries cached (hack/node/build.sh: kubelet and the
# rest of the control plane from the Go module proxy, ~20 min cold on two
# loaded cores, a few seconds warm). When the cache is cold it builds them
# first, with build.sh's progress, as make test installs everything else it
# needs: a fresh machine pays the build once, and ~/.cache/concord keeps it.
#
# With a node already up in CONCORD_NODE_DIR it uses that node (after
# rebuilding the images) and leaves it up; otherwise it starts one, runs the
# suite and stops it, whatever the result.
#
# Environment: CONCORD_NODE_DIR (/tmp/concord-node), KUBE_VERSION (1.37.2),
# CONCORD_CACHE (~/.cache/concord), E2E_SHORT_RUN (the -run regex).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "${HERE}/../.." && pwd)"
D="${CONCORD_NODE_DIR:-/tmp/concord-node}"
CACHE_ROOT="${CONCORD_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/concord}"
BIN="${CACHE_ROOT}/node-${KUBE_VERSION:-1.37.2}"
RUN="${E2E_SHORT_RUN:-^(TestEverythingReady|TestGatewayThroughService|TestDiscordPyBot|TestEvictionDrains|TestLiveStream|TestLiveModeration)$}"
log() { printf '[e2e-short %s] %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }

missing=()
for b in kubelet kube-apiserver kube-controller-manager kube-scheduler kube-proxy kubectl etcd coredns; do
  [[ -x "${BIN}/${b}" ]] || missing+=("${b}")
done
if ((${#missing[@]})); then
  log "node binaries not cached in ${BIN} (missing: ${missing[*]}): building them (hack/node/build.sh, ~20 min cold)"
  bash "${HERE}/build.sh"
fi

started=0
if [[ -f "${D}/pids/unshare.pid" ]] && kill -0 "$(cat "${D}/pids/unshare.pid")" 2>/dev/null; then
  log "using the node already up in ${D}"
  CONCORD_NODE_DIR="${D}" bash "${HERE}/images.sh"
else
  [[ -e "${D}" ]] && CONCORD_NODE_DIR="${D}" bash "${HERE}/down.sh"
  started=1
  trap 'CONCORD_NODE_DIR="${D}" bash "${HERE}/down.sh"' EXIT
  CONCORD_NODE_DIR="${D}" CONCORD_NODE_BIN="${BIN}" bash "${HERE}/up.sh" >/dev/null
fi
# shellcheck disable=SC1091
source "${CACHE_ROOT}/test-env.sh"
# shellcheck disable=SC1091
source "${D}/env.sh"
log "suite: -run '${RUN}' (node started here: ${started})"
cd "${ROOT}"
go test -tags e2e -count=1 -timeout 25m -run "${RUN}" ./test/kube/
