#!/usr/bin/env bash
# Builds the envtest control plane (kube-apiserver and etcd) from the Go module
# proxy and caches the binaries outside the repository, keyed by version.
#
# Nothing pre-built can be downloaded in Concord's CI, so instead of
# setup-envtest this script compiles:
#   - kube-apiserver from k8s.io/kubernetes (a throwaway module that replaces
#     every k8s.io/<staging> module with the published v0.<minor>.<patch>);
#   - etcd from go.etcd.io/etcd/server/v3/etcdmain.
#
# It is idempotent: when both binaries exist it returns at once. The last line
# of stdout is the directory to export as KUBEBUILDER_ASSETS; progress goes to
# stderr.
#
# Environment:
#   KUBE_VERSION   kube-apiserver version (default 1.37.2)
#   ETCD_VERSION   etcd server version    (default 3.6.16)
#   CONCORD_CACHE  cache root             (default ~/.cache/concord)
set -euo pipefail

KUBE_VERSION="${KUBE_VERSION:-1.37.2}"
ETCD_VERSION="${ETCD_VERSION:-3.6.16}"
CACHE_ROOT="${CONCORD_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/concord}"
ASSETS="${CACHE_ROOT}/k8s-${KUBE_VERSION}"
STAGING_VERSION="v0.${KUBE_VERSION#*.}"   # 1.37.2 -> v0.37.2

log() { printf '[envtest-build %s] %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }

# heartbeat LABEL CMD...: runs CMD, logging every 30s that LABEL is still running.
heartbeat() {
  local label="$1"; shift
  local start=$SECONDS
  # sleep gets no inherited output: a pipe reading our stderr must not wait for it.
  ( while sleep 30 </dev/null >/dev/null 2>&1; do log "${label}: still compiling ($((SECONDS - start))s)"; done ) &
  local hb=$!
  local rc=0
  "$@" || rc=$?
  kill "${hb}" 2>/dev/null || true
  wait "${hb}" 2>/dev/null || true
  return "${rc}"
}

if [[ -x "${ASSETS}/kube-apiserver" && -x "${ASSETS}/etcd" ]]; then
  log "cached: ${ASSETS}"
  echo "${ASSETS}"
  exit 0
fi

mkdir -p "${ASSETS}"
# Serialise concurrent builds (two test runs starting together).
exec 9>"${ASSETS}.lock"
flock 9
if [[ -x "${ASSETS}/kube-apiserver" && -x "${ASSETS}/etcd" ]]; then
  log "cached (built by a concurrent run): ${ASSETS}"
  echo "${ASSETS}"
  exit 0
fi

WORK="$(mktemp -d "${TMPDIR:-/tmp}/concord-envtest.XXXXXX")"
trap 'rm -rf "${WORK}"' EXIT
export GOFLAGS="-mod=mod -buildvcs=false"
export GOWORK=off

build_etcd() {
  if [[ -x "${ASSETS}/etcd" ]]; then log "etcd ${ETCD_VERSION}: cached"; return; fi
  local dir="${WORK}/etcd"
  mkdir -p "${dir}"
  log "etcd ${ETCD_VERSION}: preparing module"
  cat >"${dir}/go.mod" <<MOD
module concord.local/envtest/etcd

go 1.26
MOD
  cat >"${dir}/main.go" <<'GO'
// Command etcd is the etcd server, built from go.etcd.io/etcd/server/v3.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
GO
  (cd "${dir}" && go get "go.etcd.io/etcd/server/v3@v${ETCD_VERSION}" >&2)
  log "etcd ${ETCD_VERSION}: compiling"
  local start=$SECONDS
  heartbeat "etcd ${ETCD_VERSION}" \
    bash -c 'cd "$1" && go build -trimpath -ldflags="-s -w" -o "$2" . >&2' _ "${dir}" "${ASSETS}/etcd.tmp"
  mv "${ASSETS}/etcd.tmp" "${ASSETS}/etcd"
  log "etcd ${ETCD_VERSION}: built in $((SECONDS - start))s"
}

build_apiserver() {
  if [[ -x "${ASSETS}/kube-apiserver" ]]; then log "kube-apiserver ${KUBE_VERSION}: cached"; return; fi
  local dir="${WORK}/kube"
  mkdir -p "${dir}"
  log "kube-apiserver ${KUBE_VERSION}: resolving k8s.io/kubernetes go.mod"
  local modfile
  modfile="$(cd "${dir}" && go mod download -json "k8s.io/kubernetes@v${KUBE_VERSION}" \
    | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",$/\1/p')"
  [[ -f "${modfile}" ]] || { log "cannot find go.mod of k8s.io/kubernetes v${KUBE_VERSION}"; exit 1; }
  # Every staging module that k8s.io/kubernetes replaces with ./staging/src/...
  local staging
  staging="$(sed -n 's#^[[:space:]]*\(k8s\.io/[a-z0-9-]*\) => \./staging/.*#\1#p' "${modfile}")"
  [[ -n "${staging}" ]] || { log "no staging replaces found in ${modfile}"; exit 1; }
  {
    echo "module concord.local/envtest/kube"
    echo
    echo "go 1.26"
    echo
    echo "require k8s.io/kubernetes v${KUBE_VERSION}"
    echo
    echo "replace ("
    for m in ${staging}; do echo "	${m} => ${m} ${STAGING_VERSION}"; done
    echo ")"
  } >"${dir}/go.mod"
  log "kube-apiserver ${KUBE_VERSION}: $(echo "${staging}" | wc -l) staging modules replaced at ${STAGING_VERSION}"
  local minor="${KUBE_VERSION#*.}"; minor="${minor%%.*}"
  local ldflags="-s -w"
  ldflags+=" -X k8s.io/component-base/version.gitVersion=v${KUBE_VERSION}"
  ldflags+=" -X k8s.io/component-base/version.gitMajor=1"
  ldflags+=" -X k8s.io/component-base/version.gitMinor=${minor}"
  ldflags+=" -X k8s.io/component-base/version.gitTreeState=clean"
  log "kube-apiserver ${KUBE_VERSION}: compiling (about 5 min cold on 2 cores)"
  local start=$SECONDS
  heartbeat "kube-apiserver ${KUBE_VERSION}" \
    bash -c 'cd "$1" && go build -trimpath -ldflags="$2" -o "$3" k8s.io/kubernetes/cmd/kube-apiserver >&2' \
    _ "${dir}" "${ldflags}" "${ASSETS}/kube-apiserver.tmp"
  mv "${ASSETS}/kube-apiserver.tmp" "${ASSETS}/kube-apiserver"
  log "kube-apiserver ${KUBE_VERSION}: built in $((SECONDS - start))s"
}

build_etcd
build_apiserver
log "ready: ${ASSETS}"
echo "${ASSETS}"
