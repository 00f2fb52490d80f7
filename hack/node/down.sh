#!/usr/bin/env bash
# down.sh — stops the node hack/node/up.sh started and leaves nothing behind:
# every process of the node (found by its mount and network namespaces and
# by the pods' cgroups, so containers count too), the databases' forwarders,
# the node's Kafka and etcd; then the pods' cgroups (/kubepods in each
# hierarchy) and the node directory. The host's veth end and its routes go
# with the node's network namespace. Safe to run when nothing is up.
set -uo pipefail

NODE_DIR="${CONCORD_NODE_DIR:-/tmp/concord-node}"
D="${NODE_DIR}"
log() { printf '[node-down %s] %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }

# node_pids MNT NET: every process whose mount or network namespace is the
# node's, or that lives in a pod cgroup.
node_pids() {
  local p
  for p in /proc/[0-9]*; do
    p="${p#/proc/}"
    [[ "$p" == "$$" ]] && continue
    if [[ -n "$1" && "$(readlink "/proc/$p/ns/mnt" 2>/dev/null)" == "$1" ]] \
      || [[ -n "$2" && "$(readlink "/proc/$p/ns/net" 2>/dev/null)" == "$2" ]] \
      || grep -qs ':/kubepods' "/proc/$p/cgroup"; then
      echo "$p"
    fi
  done
}

mnt="" net=""
if [[ -f "${D}/pids/unshare.pid" ]]; then
  pid="$(cat "${D}/pids/unshare.pid")"
  mnt="$(readlink "/proc/${pid}/ns/mnt" 2>/dev/null || true)"
  net="$(readlink "/proc/${pid}/ns/net" 2>/dev/null || true)"
  [[ "${mnt}" == "$(readlink /proc/self/ns/mnt)" ]] && mnt=""
  [[ "${net}" == "$(readlink /proc/self/ns/net)" ]] && net=""
fi

# kubelet first, so it restarts nothing while the rest goes.
[[ -f "${D}/pids/node-kubelet.pid" ]] && kill -9 "$(cat "${D}/pids/node-kubelet.pid")" 2>/dev/null
for round in 1 2 3 4 5 6 7 8 9 10; do
  mapfile -t ps < <(node_pids "${mnt}" "${net}")
  ((${#ps[@]})) || break
  ((round == 1)) && log "stopping ${#ps[@]} node processes"
  kill -9 "${ps[@]}" 2>/dev/null
  sleep 0.3
done
((${#ps[@]})) && log "WARNING: processes still alive: ${ps[*]}"

# Host-side helpers: the forwarders, the node's etcd and Kafka.
for f in "${D}"/pids/socat-*.pid "${D}/pids/concord-etcd.pid" "${D}/pids/kafka.pid"; do
  [[ -f "$f" ]] || continue
  p="$(cat "$f")"
  kill "$p" 2>/dev/null && log "stopped $(basename "$f" .pid) (pid $p)"
done
for f in "${D}/pids/concord-etcd.pid" "${D}/pids/kafka.pid"; do
  [[ -f "$f" ]] || continue
  p="$(cat "$f")"
  for _ in $(seq 1 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.2; done
  kill -9 "$p" 2>/dev/null
done

# Pod cgroups, deepest first, in every hierarchy.
while read -r _ mp type _; do
  [[ "${type}" == cgroup || "${type}" == cgroup2 ]] || continue
  [[ -d "${mp}/kubepods" ]] || continue
  find "${mp}/kubepods" -depth -type d -exec rmdir {} \; 2>/dev/null
  [[ -d "${mp}/kubepods" ]] && log "WARNING: ${mp}/kubepods remains"
done </proc/mounts

ip link del cnode0 2>/dev/null && log "removed cnode0"
if [[ -d "${D}" ]]; then
  rm -rf "${D}" && log "removed ${D}"
fi
exit 0
