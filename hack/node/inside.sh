#!/usr/bin/env bash
# inside.sh NODE_DIR BIN_DIR — the node itself. up.sh runs it as
# `unshare --mount --net --propagation private`, so everything here happens
# in the node's own mount and network namespaces: a tmpfs over /run, the
# node directory's var/ over /var, read-only sysctl files over the three
# /proc/sys entries kubelet would otherwise write host-wide, and then etcd,
# kube-apiserver, containerd, kubelet, kube-controller-manager,
# kube-scheduler and kube-proxy as children. It waits until one of them
# exits (down.sh kills them all) and says which.
set -euo pipefail

D="$1" BIN="$2"
source "${D}/node.env"
log() { printf '[node %s] %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }

# Mounts. Nothing here propagates to the host (private propagation).
mount -t tmpfs -o mode=755 tmpfs /run
mkdir -p "${D}/var"
mount --bind "${D}/var" /var
mkdir -p /var/lib/kubelet /var/log/pods /var/lib/cni /run/containerd
# kubelet sets vm.overcommit_memory=1, kernel.panic=10 and
# kernel.panic_on_oops=1 when they differ; those are host-wide, so the node
# sees read-only files already holding kubelet's values.
mkdir -p "${D}/sysctl"
for kv in vm/overcommit_memory=1 kernel/panic=10 kernel/panic_on_oops=1; do
  k="${kv%%=*}" v="${kv#*=}" f="${D}/sysctl/${kv%%=*}"
  mkdir -p "$(dirname "${f}")"
  echo "${v}" >"${f}"
  mount --bind "${f}" "/proc/sys/${k}"
  mount -o remount,bind,ro "/proc/sys/${k}"
done

# Network: up.sh moves the peer of its veth in as eth0.
ip link set lo up
log "waiting for eth0 from the host"
for _ in $(seq 1 200); do ip link show eth0 >/dev/null 2>&1 && break; sleep 0.05; done
ip link show eth0 >/dev/null
ip addr add "${NODE_IP}/24" dev eth0
ip link set eth0 up
ip route add default via "${HOST_IP}"
# Per network namespace since Linux 5.3: these change only the node.
sysctl -qw net.ipv4.ip_forward=1 net.bridge.bridge-nf-call-iptables=1 \
  net.bridge.bridge-nf-call-ip6tables=1

pids=()
start() { # start NAME CMD...
  local name="$1"; shift
  "$@" >"${D}/logs/${name}.log" 2>&1 &
  pids+=("$!")
  echo "$!" >"${D}/pids/node-${name}.pid"
  log "started ${name} (pid $!)"
}
trap 'kill "${pids[@]}" 2>/dev/null; wait' TERM INT

start etcd "${BIN}/etcd" --name node --data-dir "${D}/etcd" \
  --listen-client-urls http://127.0.0.1:2379 --advertise-client-urls http://127.0.0.1:2379 \
  --listen-peer-urls http://127.0.0.1:2380 --initial-advertise-peer-urls http://127.0.0.1:2380 \
  --initial-cluster node=http://127.0.0.1:2380 --unsafe-no-fsync --log-level warn

P="${D}/pki"
start kube-apiserver "${BIN}/kube-apiserver" \
  --etcd-servers=http://127.0.0.1:2379 \
  --bind-address=0.0.0.0 --secure-port=6443 --advertise-address="${NODE_IP}" \
  --service-cluster-ip-range="${SERVICE_CIDR}" \
  --client-ca-file="${P}/ca.crt" \
  --tls-cert-file="${P}/apiserver.crt" --tls-private-key-file="${P}/apiserver.key" \
  --kubelet-client-certificate="${P}/admin.crt" --kubelet-client-key="${P}/admin.key" \
  --kubelet-preferred-address-types=InternalIP \
  --service-account-key-file="${P}/sa.pub" --service-account-signing-key-file="${P}/sa.key" \
  --service-account-issuer=https://kubernetes.default.svc.cluster.local \
  --authorization-mode=Node,RBAC --enable-admission-plugins=NodeRestriction \
  --allow-privileged=true --profiling=false

start containerd containerd --config "${D}/containerd.toml"

until "${BIN}/kubectl" --kubeconfig "${D}/admin.kubeconfig" get --raw /readyz >/dev/null 2>&1; do
  kill -0 "${pids[1]}" 2>/dev/null || { log "kube-apiserver exited; see ${D}/logs/kube-apiserver.log"; exit 1; }
  sleep 0.2
done
log "kube-apiserver ready"

start kubelet "${BIN}/kubelet" --config="${D}/kubelet.yaml" \
  --kubeconfig="${D}/kubelet.kubeconfig" --node-ip="${NODE_IP}" \
  --hostname-override="${NODE_NAME}" --root-dir=/var/lib/kubelet --cert-dir="${D}/kubelet-pki"

start kube-controller-manager "${BIN}/kube-controller-manager" \
  --kubeconfig="${D}/admin.kubeconfig" --authentication-kubeconfig="${D}/admin.kubeconfig" \
  --authorization-kubeconfig="${D}/admin.kubeconfig" \
  --service-account-private-key-file="${P}/sa.key" --root-ca-file="${P}/ca.crt" \
  --cluster-signing-cert-file="${P}/ca.crt" --cluster-signing-key-file="${P}/ca.key" \
  --use-service-account-credentials=true --leader-elect=false \
  --service-cluster-ip-range="${SERVICE_CIDR}" --bind-address=127.0.0.1

start kube-scheduler "${BIN}/kube-scheduler" --kubeconfig="${D}/admin.kubeconfig" \
  --authentication-kubeconfig="${D}/admin.kubeconfig" --authorization-kubeconfig="${D}/admin.kubeconfig" \
  --leader-elect=false --bind-address=127.0.0.1

start kube-proxy "${BIN}/kube-proxy" --config="${D}/kube-proxy.yaml"

names=(etcd kube-apiserver containerd kubelet kube-controller-manager kube-scheduler kube-proxy)
set +e
wait -n -p done "${pids[@]}"
rc=$?
for i in "${!pids[@]}"; do
  [[ "${pids[$i]}" == "${done:-}" ]] && log "${names[$i]} exited (rc=${rc}); see ${D}/logs/${names[$i]}.log"
done
exit 1
