#!/usr/bin/env bash
# images.sh — builds the concord and concord-operator images from this
# checkout and imports them into the running node's containerd (hack/node/
# up.sh runs it at bring-up; run it again after changing the code, as
# `make cluster-images`). Each image is tagged with the first 12 hex digits
# of its binary's sha256, so a rebuild is a new tag: pods made afterwards
# (and the operator Deployment, whose image the e2e suite's helm upgrade
# sets) run the new code, and imagePullPolicy: Never never mixes two builds
# under one name. It rewrites the image lines of ${NODE_DIR}/env.sh.
#
# The pause and CoreDNS images (fixed tag "dev") are imported only by
# up.sh's first run (IMAGES_INFRA=1).
#
# Environment: CONCORD_NODE_DIR (/tmp/concord-node), CONCORD_NODE_BIN (the
# node binaries, for CoreDNS; from env.sh when unset).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "${HERE}/../.." && pwd)"
D="${CONCORD_NODE_DIR:-/tmp/concord-node}"
log() { printf '[node-images %s] %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

pid="$(cat "${D}/pids/unshare.pid" 2>/dev/null)" || die "no node in ${D}: run hack/node/up.sh (make cluster-up)"
kill -0 "${pid}" 2>/dev/null || die "the node of ${D} is not running: run hack/node/down.sh, then up.sh"
ctr() { nsenter -t "${pid}" -m -n ctr -a /run/containerd/containerd.sock -n k8s.io "$@"; }
for _ in $(seq 1 100); do ctr version >/dev/null 2>&1 && break; sleep 0.1; done

mkdir -p "${D}/images/bin"
log "building concord and concord-operator (static)"
(cd "${ROOT}" && CGO_ENABLED=0 go build -trimpath -o "${D}/images/bin/concord" ./runtime/cmd/concord \
  && CGO_ENABLED=0 go build -trimpath -o "${D}/images/bin/concord-operator" ./operator/cmd/concord-operator)
tag_of() { echo "sha-$(sha256sum "$1" | cut -c1-12)"; }
CONCORD_TAG="$(tag_of "${D}/images/bin/concord")"
OPERATOR_TAG="$(tag_of "${D}/images/bin/concord-operator")"
bash "${HERE}/image.sh" "${D}/images/concord.tar" "concord.local/concord:${CONCORD_TAG}" /concord "${D}/images/bin/concord"
bash "${HERE}/image.sh" "${D}/images/concord-operator.tar" "concord.local/concord-operator:${OPERATOR_TAG}" /concord-operator "${D}/images/bin/concord-operator"
images=(concord concord-operator)

if [[ "${IMAGES_INFRA:-0}" == 1 ]]; then
  (cd "${ROOT}" && CGO_ENABLED=0 go build -trimpath -ldflags=-s -o "${D}/images/bin/pause" ./hack/node/pause)
  bash "${HERE}/image.sh" "${D}/images/pause.tar" "concord.local/pause:dev" /pause "${D}/images/bin/pause"
  images=(pause "${images[@]}")
  BIN="${CONCORD_NODE_BIN:?CONCORD_NODE_BIN (the node binaries) is unset}"
  if [[ -x "${BIN}/coredns" ]]; then
    bash "${HERE}/image.sh" "${D}/images/coredns.tar" "concord.local/coredns:dev" /coredns "${BIN}/coredns"
    images+=(coredns)
  else
    log "WARNING: no ${BIN}/coredns: the node runs without cluster DNS"
  fi
fi

for img in "${images[@]}"; do
  log "importing ${img}"
  ctr images import "${D}/images/${img}.tar" >&2
done

# The tags for the suite and for up.sh's summary.
cat >"${D}/images.env" <<ENV
export CONCORD_NODE_IMAGE=concord.local/concord:${CONCORD_TAG}
export CONCORD_NODE_OPERATOR_IMAGE=concord.local/concord-operator:${OPERATOR_TAG}
ENV
if [[ -f "${D}/env.sh" ]]; then
  grep -v '^export CONCORD_NODE_\(OPERATOR_\)\?IMAGE=' "${D}/env.sh" >"${D}/env.sh.new"
  cat "${D}/images.env" >>"${D}/env.sh.new"
  mv "${D}/env.sh.new" "${D}/env.sh"
fi
log "images: concord ${CONCORD_TAG}, concord-operator ${OPERATOR_TAG}"
