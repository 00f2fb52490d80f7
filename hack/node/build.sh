#!/usr/bin/env bash
# Builds the binaries of a single-node Kubernetes from the Go module proxy and
# caches them outside the repository, keyed by version, the way
# hack/envtest/build.sh caches kube-apiserver and etcd (which this script
# reuses: it runs that script first).
#
# Built here, one at a time (each is a large link; two at once would starve
# the machine):
#   - kubelet, kube-controller-manager, kube-scheduler, kube-proxy and kubectl
#     from k8s.io/kubernetes, in the same throwaway module envtest uses (every
#     k8s.io/<staging> module replaced with the published v0.<minor>.<patch>);
#   - CoreDNS from github.com/coredns/coredns.
#
# Idempotent: when every binary exists it returns at once. The last line of
# stdout is the directory holding all of them; progress goes to stderr.
#
# Environment:
#   KUBE_VERSION     Kubernetes version (default 1.37.2)
#   COREDNS_VERSION  CoreDNS version    (default 1.15.0)
#   CONCORD_CACHE    cache root         (default ~/.cache/concord)
set -euo pipefail

KUBE_VERSION="${KUBE_VERSION:-1.37.2}"
COREDNS_VERSION="${COREDNS_VERSION:-1.15.0}"
CACHE_ROOT="${CONCORD_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/concord}"
OUT="${CACHE_ROOT}/node-${KUBE_VERSION}"
STAGING_VERSION="v0.${KUBE_VERSION#*.}"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
KUBE_BINS=(kubelet kube-controller-manager kube-scheduler kube-proxy kubectl)

log() { printf '[node-build %s] %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }

heartbeat() {
  local label="$1"; shift
  local start=$SECONDS
  ( while sleep 60 </dev/null >/dev/null 2>&1; do log "${label}: still compiling ($((SECONDS - start))s)"; done ) &
  local hb=$!
  local rc=0
  "$@" || rc=$?
  kill "${hb}" 2>/dev/null || true
  wait "${hb}" 2>/dev/null || true
  return "${rc}"
}

complete() {
  local b
  for b in kube-apiserver etcd "${KUBE_BINS[@]}" coredns; do
    [[ -x "${OUT}/${b}" ]] || return 1
  done
}

if complete; then log "cached: ${OUT}"; echo "${OUT}"; exit 0; fi

mkdir -p "${OUT}"
exec 9>"${OUT}.lock"
flock 9
if complete; then log "cached (built by a concurrent run): ${OUT}"; echo "${OUT}"; exit 0; fi

WORK="$(mktemp -d "${TMPDIR:-/tmp}/concord-node.XXXXXX")"
trap 'rm -rf "${WORK}"' EXIT
export GOFLAGS="-mod=mod -buildvcs=false"
export GOWORK=off

build_kube() {
  local dir="${WORK}/kube"
  mkdir -p "${dir}"
  local modfile
  modfile="$(cd "${dir}" && go mod download -json "k8s.io/kubernetes@v${KUBE_VERSION}" \
    | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",$/\1/p')"
  [[ -f "${modfile}" ]] || { log "cannot find go.mod of k8s.io/kubernetes v${KUBE_VERSION}"; exit 1; }
  local staging
  staging="$(sed -n 's#^[[:space:]]*\(k8s\.io/[a-z0-9-]*\) => \./staging/.*#\1#p' "${modfile}")"
  {
    echo "module concord.local/node/kube"
    echo
    echo "go 1.26"
    echo
    echo "require k8s.io/kubernetes v${KUBE_VERSION}"
    echo
    echo "replace ("
    for m in ${staging}; do echo "	${m} => ${m} ${STAGING_VERSION}"; done
    echo ")"
  } >"${dir}/go.mod"
  local minor="${KUBE_VERSION#*.}"; minor="${minor%%.*}"
  local ldflags="-s -w"
  ldflags+=" -X k8s.io/component-base/version.gitVersion=v${KUBE_VERSION}"
  ldflags+=" -X k8s.io/component-base/version.gitMajor=1"
  ldflags+=" -X k8s.io/component-base/version.gitMinor=${minor}"
  ldflags+=" -X k8s.io/component-base/version.gitTreeState=clean"
  local b
  for b in "${KUBE_BINS[@]}"; do
    if [[ -x "${OUT}/${b}" ]]; then log "${b} ${KUBE_VERSION}: cached"; continue; fi
    log "${b} ${KUBE_VERSION}: compiling (kubelet ~15 min cold on 2 cores, the rest a few minutes)"
    local start=$SECONDS
    heartbeat "${b}" bash -c 'cd "$1" && go build -trimpath -ldflags="$2" -o "$3" "k8s.io/kubernetes/cmd/$4" >&2' \
      _ "${dir}" "${ldflags}" "${OUT}/${b}.tmp" "${b}"
    mv "${OUT}/${b}.tmp" "${OUT}/${b}"
    log "${b} ${KUBE_VERSION}: built in $((SECONDS - start))s"
  done
}

build_coredns() {
  if [[ -x "${OUT}/coredns" ]]; then log "coredns ${COREDNS_VERSION}: cached"; return; fi
  log "coredns ${COREDNS_VERSION}: compiling"
  local start=$SECONDS
  heartbeat coredns env GOBIN="${WORK}/bin" CGO_ENABLED=0 \
    go install -trimpath -ldflags="-s -w" "github.com/coredns/coredns@v${COREDNS_VERSION}" >&2
  mv "${WORK}/bin/coredns" "${OUT}/coredns"
  log "coredns ${COREDNS_VERSION}: built in $((SECONDS - start))s"
}

build_kube
build_coredns
# kube-apiserver and etcd: the envtest build, linked into this directory.
ENVTEST="$(bash "${HERE}/../envtest/build.sh" | tail -n1)"
ln -sf "${ENVTEST}/kube-apiserver" "${OUT}/kube-apiserver"
ln -sf "${ENVTEST}/etcd" "${OUT}/etcd"
log "ready: ${OUT}"
echo "${OUT}"
