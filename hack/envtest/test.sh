#!/usr/bin/env bash
# Runs the operator's, the chart's and the plugin's tests, the envtest suites
# included, against the kube-apiserver and etcd that build.sh compiles (or
# finds in its cache). `make test` calls this for the operator side.
#
#   hack/envtest/test.sh            # everything below
#   hack/envtest/test.sh -run Drain # extra go test flags
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "${ROOT}"
log() { printf '[envtest-test %s] %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }

log "control plane binaries (built once, then cached)"
KUBEBUILDER_ASSETS="$(hack/envtest/build.sh | tail -n 1)"
export KUBEBUILDER_ASSETS
log "KUBEBUILDER_ASSETS=${KUBEBUILDER_ASSETS}"

PKGS=(./apis/... ./operator/... ./cli/... ./charts/...)
log "go test -tags integration ${PKGS[*]}"
go test -tags integration -count=1 "$@" "${PKGS[@]}"
log "done"
