#!/usr/bin/env bash
# up.sh — starts a single-node Kubernetes on this machine, without Docker and
# without downloading an image or a binary (docs/operations.md, "A real node").
#
#   1. binaries: hack/node/build.sh (Go module proxy, cached in ~/.cache/concord);
#      containerd, runc, the CNI plugins, iptables, openssl and socat from Debian;
#   2. images: scratch images holding the static concord and concord-operator
#      binaries, a pause program and CoreDNS, written by hack/node/image.sh and
#      imported into containerd (pods use imagePullPolicy: Never);
#   3. the node: hack/node/inside.sh in its own mount and network namespaces,
#      joined to the host by a veth pair (host ${HOST_IP}, node ${NODE_IP});
#      the host routes the pod and Service ranges through it, so tests and the
#      operator's admin calls reach pods and ClusterIPs directly;
#   4. the databases, outside the cluster as a managed service would be: the
#      tests' Cassandra and Redis (~/.cache/concord/test-env.sh) forwarded onto
#      ${HOST_IP} by socat; a Kafka broker of the node's own listening on
#      ${HOST_IP} (the tests' broker advertises 127.0.0.1, which a pod cannot
#      reach); an etcd for Concord's registry on ${HOST_IP};
#   5. CoreDNS, then it waits until the node and CoreDNS are Ready.
#
# It writes ${NODE_DIR}/env.sh (KUBECONFIG and the addresses above) and prints
# its path last. Idempotent: when the node is up it only prints that path.
# hack/node/down.sh stops everything and removes ${NODE_DIR}.
#
# Environment: CONCORD_NODE_DIR (/tmp/concord-node), CONCORD_CACHE
# (~/.cache/concord), KUBE_VERSION (1.37.2), CONCORD_NODE_BIN (a directory
# of binaries to use instead of hack/node/build.sh's).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "${HERE}/../.." && pwd)"
NODE_DIR="${CONCORD_NODE_DIR:-/tmp/concord-node}"
CACHE_ROOT="${CONCORD_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/concord}"
HOST_IP=10.98.0.1
NODE_IP=10.98.0.2
NODE_NAME=concord-node
POD_CIDR=10.244.0.0/24
SERVICE_CIDR=10.96.0.0/16
API_SERVICE_IP=10.96.0.1
DNS_IP=10.96.0.10
HOST_LINK=cnode0
KAFKA_PORT=9192
ETCD_PORT=2381
IMAGE_TAG=dev

log() { printf '[node-up %s] %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

[[ "$(id -u)" == 0 ]] || die "needs root (namespaces, containerd, iptables)"

if [[ -f "${NODE_DIR}/pids/unshare.pid" ]] && kill -0 "$(cat "${NODE_DIR}/pids/unshare.pid")" 2>/dev/null \
  && [[ -f "${NODE_DIR}/env.sh" ]]; then
  log "already up: ${NODE_DIR}"
  echo "${NODE_DIR}/env.sh"
  exit 0
fi
[[ -e "${NODE_DIR}" ]] && die "${NODE_DIR} exists but no node runs: run hack/node/down.sh first"

# --- 1. binaries --------------------------------------------------------------
need=()
for c in containerd:containerd runc:runc iptables:iptables openssl:openssl socat:socat ip:iproute2; do
  command -v "${c%%:*}" >/dev/null || need+=("${c#*:}")
done
[[ -x /usr/lib/cni/bridge ]] || need+=(containernetworking-plugins)
if ((${#need[@]})); then
  log "apt-get install ${need[*]}"
  apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >&2
fi
BIN="${CONCORD_NODE_BIN:-$(bash "${HERE}/build.sh" | tail -n1)}"
[[ -f "${CACHE_ROOT}/test-env.sh" ]] || die "no ${CACHE_ROOT}/test-env.sh: run \`make test-deps\` (hack/test-deps.sh) first"
# shellcheck disable=SC1091
source "${CACHE_ROOT}/test-env.sh"
[[ -n "${CONCORD_CASSANDRA:-}" && -n "${CONCORD_TEST_REDIS:-}" ]] || die "test-env.sh names no Cassandra or Redis"

mkdir -p "${NODE_DIR}"/{pki,logs,pids,images,cni,var,kubelet-pki}
D="${NODE_DIR}"
cat >"${D}/node.env" <<ENV
HOST_IP=${HOST_IP}
NODE_IP=${NODE_IP}
NODE_NAME=${NODE_NAME}
SERVICE_CIDR=${SERVICE_CIDR}
ENV

# --- 2. certificates ----------------------------------------------------------
P="${D}/pki"
log "certificates"
openssl_quiet() { openssl "$@" 2>/dev/null; }
openssl_quiet req -x509 -newkey rsa:2048 -nodes -days 30 -keyout "${P}/ca.key" -out "${P}/ca.crt" -subj "/CN=concord-node-ca"
cert() { # cert NAME SUBJECT [SAN]
  openssl_quiet req -newkey rsa:2048 -nodes -keyout "${P}/$1.key" -out "${P}/$1.csr" -subj "$2"
  local ext="${P}/$1.ext"
  { echo "basicConstraints=CA:FALSE"; echo "keyUsage=digitalSignature,keyEncipherment"
    if [[ -n "${3:-}" ]]; then echo "extendedKeyUsage=serverAuth"; echo "subjectAltName=$3"
    else echo "extendedKeyUsage=clientAuth"; fi; } >"${ext}"
  openssl_quiet x509 -req -in "${P}/$1.csr" -CA "${P}/ca.crt" -CAkey "${P}/ca.key" -CAcreateserial \
    -days 30 -extfile "${ext}" -out "${P}/$1.crt"
}
cert apiserver "/CN=kube-apiserver" \
  "IP:${NODE_IP},IP:${API_SERVICE_IP},IP:127.0.0.1,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local,DNS:localhost"
# The cluster administrator: also the identity of the controller manager,
# the scheduler and kube-proxy (one node, one operator of it).
cert admin "/O=system:masters/CN=concord-node-admin"
cert kubelet "/O=system:nodes/CN=system:node:${NODE_NAME}"
openssl_quiet genrsa -out "${P}/sa.key" 2048
openssl_quiet rsa -in "${P}/sa.key" -pubout -out "${P}/sa.pub"
kubeconfig() { # kubeconfig FILE CERT SERVER
  cat >"$1" <<KC
apiVersion: v1
kind: Config
clusters:
- name: concord-node
  cluster: {server: "$3", certificate-authority: "${P}/ca.crt"}
users:
- name: $2
  user: {client-certificate: "${P}/$2.crt", client-key: "${P}/$2.key"}
contexts:
- name: concord-node
  context: {cluster: concord-node, user: $2}
current-context: concord-node
KC
}
kubeconfig "${D}/admin.kubeconfig" admin "https://${NODE_IP}:6443"
kubeconfig "${D}/kubelet.kubeconfig" kubelet "https://${NODE_IP}:6443"

# --- configuration ------------------------------------------------------------
cat >"${D}/containerd.toml" <<TOML
version = 2
root = "${D}/containerd"
state = "/run/containerd"
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.devmapper"]
[grpc]
  address = "/run/containerd/containerd.sock"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "concord.local/pause:${IMAGE_TAG}"
  # runc would set oom_score_adj=-998 on the sandbox, which needs
  # CAP_SYS_RESOURCE; root here lacks it, and every sandbox would fail.
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        BinaryName = "$(command -v runc)"
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "${D}/cni"
TOML
cat >"${D}/cni/10-concord.conflist" <<CNI
{
  "cniVersion": "0.4.0",
  "name": "concord-node",
  "plugins": [
    {"type": "bridge", "bridge": "cni0", "isGateway": true, "ipMasq": true, "hairpinMode": true,
     "ipam": {"type": "host-local", "ranges": [[{"subnet": "${POD_CIDR}"}]], "routes": [{"dst": "0.0.0.0/0"}], "dataDir": "/var/lib/cni/networks"}},
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
CNI
# Pods with dnsPolicy Default get this; the node has no upstream resolver.
echo "nameserver ${DNS_IP}" >"${D}/resolv.conf"
cat >"${D}/kubelet.yaml" <<YAML
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
# 1.37 refuses cgroup v1 hosts unless told; this machine's cgroups are v1.
failCgroupV1: false
cgroupDriver: cgroupfs
containerRuntimeEndpoint: unix:///run/containerd/containerd.sock
address: ${NODE_IP}
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: "${P}/ca.crt"}
authorization: {mode: Webhook}
clusterDNS: [${DNS_IP}]
clusterDomain: cluster.local
resolvConf: "${D}/resolv.conf"
failSwapOn: false
protectKernelDefaults: false
serializeImagePulls: false
evictionHard: {memory.available: 100Mi, nodefs.available: 1%, imagefs.available: 1%, nodefs.inodesFree: 1%}
imageGCHighThresholdPercent: 99
imageGCLowThresholdPercent: 98
maxPods: 200
YAML
cat >"${D}/kube-proxy.yaml" <<YAML
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: {kubeconfig: "${D}/admin.kubeconfig"}
hostnameOverride: ${NODE_NAME}
mode: iptables
clusterCIDR: ${POD_CIDR}
metricsBindAddress: 127.0.0.1:10249
healthzBindAddress: 127.0.0.1:10256
# nf_conntrack_max is host-wide: leave it alone.
conntrack: {maxPerCore: 0, min: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}
YAML

# --- images ---------------------------------------------------------------------
# Built and imported by hack/node/images.sh once containerd runs (below).
images=(pause concord concord-operator)
[[ -x "${BIN}/coredns" ]] && images+=(coredns)

# --- 3. the node --------------------------------------------------------------
log "starting the node's namespaces"
setsid unshare --mount --net --propagation private -- bash "${HERE}/inside.sh" "${D}" "${BIN}" \
  >"${D}/logs/node.log" 2>&1 </dev/null &
NODE_PID=$!
echo "${NODE_PID}" >"${D}/pids/unshare.pid"
# unshare execs inside.sh, so the pid is the node's first process; wait until
# it is in its own network namespace before moving the veth's peer in.
for _ in $(seq 1 100); do
  [[ "$(readlink "/proc/${NODE_PID}/ns/net" 2>/dev/null)" != "$(readlink /proc/self/ns/net)" ]] && break
  sleep 0.05
done
ip link add "${HOST_LINK}" type veth peer name eth0 netns "${NODE_PID}"
ip addr add "${HOST_IP}/24" dev "${HOST_LINK}"
ip link set "${HOST_LINK}" up
# Routes live on the veth: they disappear with it.
ip route add 10.244.0.0/16 via "${NODE_IP}" dev "${HOST_LINK}"
ip route add "${SERVICE_CIDR}" via "${NODE_IP}" dev "${HOST_LINK}"

# --- 4. the databases, outside the cluster ---------------------------------------
forward() { # forward PORT TARGET
  setsid socat "TCP-LISTEN:$1,bind=${HOST_IP},fork,reuseaddr" "TCP:$2" </dev/null >"${D}/logs/socat-$1.log" 2>&1 &
  echo $! >"${D}/pids/socat-$1.pid"
}
CASS_PORT="${CONCORD_CASSANDRA##*:}"
REDIS_PORT="${CONCORD_TEST_REDIS##*:}"
forward "${CASS_PORT}" "${CONCORD_CASSANDRA}"
forward "${REDIS_PORT}" "${CONCORD_TEST_REDIS}"
setsid "${BIN}/etcd" --name concord --data-dir "${D}/concord-etcd" \
  --listen-client-urls "http://${HOST_IP}:${ETCD_PORT}" --advertise-client-urls "http://${HOST_IP}:${ETCD_PORT}" \
  --listen-peer-urls http://127.0.0.1:2391 --initial-advertise-peer-urls http://127.0.0.1:2391 \
  --initial-cluster concord=http://127.0.0.1:2391 --unsafe-no-fsync --log-level warn \
  </dev/null >"${D}/logs/concord-etcd.log" 2>&1 &
echo $! >"${D}/pids/concord-etcd.pid"
log "Kafka for the node on ${HOST_IP}:${KAFKA_PORT}"
KAFKA_HOST="${HOST_IP}" KAFKA_PORT="${KAFKA_PORT}" KAFKA_CONTROLLER_PORT=$((KAFKA_PORT + 1)) \
  KAFKA_RUN_DIR="${D}/kafka" bash "${ROOT}/hack/kafka/kafka.sh" start >"${D}/logs/kafka-start.log" 2>&1 \
  || { tail -20 "${D}/logs/kafka-start.log" >&2; die "Kafka did not start"; }
cp "${D}/kafka/kafka.pid" "${D}/pids/kafka.pid"

# --- 5. cluster add-ons ------------------------------------------------------------
export KUBECONFIG="${D}/admin.kubeconfig"
K="${BIN}/kubectl"
log "waiting for kube-apiserver"
for _ in $(seq 1 600); do "${K}" get --raw /readyz >/dev/null 2>&1 && break; kill -0 "${NODE_PID}" || break; sleep 0.2; done
"${K}" get --raw /readyz >/dev/null || { tail -30 "${D}/logs/node.log" "${D}/logs/kube-apiserver.log" >&2; die "kube-apiserver is not ready"; }

log "images (hack/node/images.sh)"
CONCORD_NODE_DIR="${D}" CONCORD_NODE_BIN="${BIN}" IMAGES_INFRA=1 bash "${HERE}/images.sh"

log "waiting for the node"
"${K}" wait --for=condition=Ready "node/${NODE_NAME}" --timeout=120s >&2
if [[ " ${images[*]} " == *" coredns "* ]]; then
  log "CoreDNS"
  sed -e "s/@DNS_IP@/${DNS_IP}/g" -e "s/@TAG@/${IMAGE_TAG}/g" "${HERE}/coredns.yaml" | "${K}" apply -f - >&2
  "${K}" -n kube-system rollout status deploy/coredns --timeout=120s >&2
fi

cat >"${D}/env.sh" <<ENV
# Written by hack/node/up.sh: the local node and the databases its pods reach.
export KUBECONFIG=${D}/admin.kubeconfig
export CONCORD_NODE_DIR=${D}
export CONCORD_NODE_BIN=${BIN}
export CONCORD_NODE_CASSANDRA=${HOST_IP}:${CASS_PORT}
export CONCORD_NODE_REDIS=${HOST_IP}:${REDIS_PORT}
export CONCORD_NODE_KAFKA=${HOST_IP}:${KAFKA_PORT}
export CONCORD_NODE_ETCD=http://${HOST_IP}:${ETCD_PORT}
export CONCORD_NODE_HOST_IP=${HOST_IP}
export CONCORD_NODE_IP=${NODE_IP}
export PATH=${BIN}:\$PATH
ENV
cat "${D}/images.env" >>"${D}/env.sh"
log "up: . ${D}/env.sh && kubectl get pods -A"
echo "${D}/env.sh"
