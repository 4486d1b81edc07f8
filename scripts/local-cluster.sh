#!/usr/bin/env bash
# Runs a multi-node hpu-train job on this machine: one process per "node",
# each started exactly as on a real cluster, with MASTER_ADDR=127.0.0.1,
# MASTER_PORT, NODE_RANK and WORLD_SIZE (= nodes x devices) in its
# environment; each node then launches its own local ranks.
#
#   scripts/local-cluster.sh --nodes 2 --devices 2 -- fit --config configs/fashion_mnist_mlp.yaml
#
# Options: --nodes K (default 2), --devices D per node (default 2), --port P
# (default: a free one), --bin PATH (default: this checkout's build/hpu-train). Every node's
# output is prefixed with "[node i]". A shared random job token (HPU_JOB_TOKEN)
# authenticates the ranks. The script exits with the first failing node's
# code; Ctrl-C stops every node.
set -euo pipefail

# Nodes run in the current directory (relative config paths, lightning_logs/
# and checkpoints are where the user is), as when launched by hand.
nodes=2 devices=2 port="" bin="$(dirname "$0")/../build/hpu-train"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --nodes) nodes="$2"; shift 2 ;;
    --devices) devices="$2"; shift 2 ;;
    --port) port="$2"; shift 2 ;;
    --bin) bin="$2"; shift 2 ;;
    --) shift; break ;;
    *) echo "local-cluster.sh: unknown option '$1' (see the header of $0)" >&2; exit 2 ;;
  esac
done
[[ $# -gt 0 ]] || { echo "local-cluster.sh: give the hpu-train command after --, e.g. -- fit --config FILE" >&2; exit 2; }
[[ -x "$bin" ]] || { echo "local-cluster.sh: $bin is not built; run scripts/build.sh hpu-train" >&2; exit 2; }
if [[ -z "$port" ]]; then
  # A free port below the kernel's ephemeral range, as hpu-train picks one
  # (comm/free_port.h): outgoing connections cannot take it in the meantime.
  read -r low _ </proc/sys/net/ipv4/ip_local_port_range
  for _ in $(seq 64); do
    candidate=$((10000 + RANDOM % (low - 10000)))
    if /usr/bin/python3 -c "import socket,sys; s=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(('127.0.0.1', $candidate))" 2>/dev/null; then
      port=$candidate
      break
    fi
  done
  [[ -n "$port" ]] || { echo "local-cluster.sh: no free port on 127.0.0.1; pass --port" >&2; exit 1; }
fi

token=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')
# Each node runs in its own process group (job control), so stopping a node
# reaches hpu-train itself (which stops its local ranks), not just its shell.
set -m
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill -TERM -- "-$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
}
trap 'cleanup; exit 130' INT TERM

for ((rank = 0; rank < nodes; rank++)); do
  (
    export MASTER_ADDR=127.0.0.1 MASTER_PORT="$port" NODE_RANK="$rank" WORLD_SIZE=$((nodes * devices))
    export HPU_JOB_TOKEN="$token"
    exec "$bin" "$@" --trainer.devices="$devices" --trainer.num_nodes="$nodes" 2>&1 | sed -u "s/^/[node $rank] /"
  ) &
  pids+=($!)
done

# The first node to fail (in time) stops the others and sets the exit code.
code=0
for ((left = nodes; left > 0; left--)); do
  status=0
  wait -n || status=$?
  if ((status != 0)); then code=$status; cleanup; break; fi
done
exit "$code"
