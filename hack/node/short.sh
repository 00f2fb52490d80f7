#!/usr/bin/env bash
# short.sh — the short form of the end-to-end suite on a real node, the
# part of `make test` that runs test/kube (docs/operations.md, "The short
# form in make test").
#
# It needs the node's binaries cached (hack/node/build.sh: kubelet and the
# rest of the control plane from the Go module proxy, ~20 min cold, a few
# seconds warm). make test's budget (CI ≤ 75 min cold, ≤ 45 warm) has no room
# for the cold build, so when the cache is cold this FAILS and says how to
# warm it; it never skips. CI keeps ~/.cache/concord between runs.
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
RUN="${E2E_SHORT_RUN:-^(TestEverythingReady|TestGatewayThroughService|TestDiscordPyBot|TestEvictionDrains|TestLiveStream)$}"
log() { printf '[e2e-short %s] %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }

missing=()
for b in kubelet kube-apiserver kube-controller-manager kube-scheduler kube-proxy kubectl etcd coredns; do
  [[ -x "${BIN}/${b}" ]] || missing+=("${b}")
done
if ((${#missing[@]})); then
  cat >&2 <<MSG
[e2e-short] FAIL: the real-node suite's binaries are not cached in ${BIN}
  (missing: ${missing[*]}). Building them cold takes ~20 minutes, more than
  make test's budget leaves, so make test does not build them. Warm the cache
  once (CI: keep ~/.cache/concord between runs):

      bash hack/node/build.sh        # or: make cluster-up && make cluster-down

  then run make test again. docs/operations.md, "The short form in make test".
MSG
  exit 1
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
