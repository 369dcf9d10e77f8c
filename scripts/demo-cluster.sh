#!/usr/bin/env bash
# The cluster part of `make demo` (scripts/demo.sh runs it): a master
# (kvd --role master) and two kvds as two nodes on this machine, each
# registering with the master; an engine on node-a (Python's nanokv.Cluster)
# puts an object on its own node, then one the master places on the other
# node, node-b, whose bytes go over UCX to node-b's transfer agent and come
# back the same way; kvctl cluster and kvctl objects --cluster show it.
# Host backend for both nodes. Everything it starts it stops.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
BUILD=${BUILD:-build}
run=$(mktemp -d /tmp/nanokv-cluster-demo-XXXXXX)
export NANOKV_RUN_DIR=$run
# UCX over TCP on loopback, as the tests run it: the transports UCX would pick
# for two processes of one machine (shared memory, CMA) need what a container
# may not allow.
export UCX_TLS=${UCX_TLS:-tcp}
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null || true; done
  rm -rf "$run"
}
trap cleanup EXIT
kvd="$BUILD/entry/kvd"
kvctl="$BUILD/kvctl/kvctl"

echo "== the cluster: kvd --role master, then two kvds with master: in their configs"
"$kvd" --role master --id demo-master --listen 127.0.0.1:0 --rebuild-window 0 >"$run/master.log" 2>&1 &
pids+=($!)
for _ in $(seq 200); do grep -q "serving on" "$run/master.log" && break; sleep 0.05; done
master=$(sed -n 's/.*serving on \([^ ]*\) .*/\1/p' "$run/master.log" | head -n 1)
[ -n "$master" ] || { cat "$run/master.log"; exit 1; }
echo "   master at $master"
for node in node-a node-b; do
  cat >"$run/$node.yaml" <<YAML
backend: host
ipc_name: demo-$node-$$
run_dir: $run
capacity: 128MiB
host_device_memory: 256MiB
reserve_pages: 2
object_store:
  size: 64MiB
master:
  addresses: ["$master"]
  node_id: $node
  data_address: "127.0.0.1:0"   # the transfer agent's UCX listener; port 0: any free one
YAML
  "$kvd" --config "$run/$node.yaml" >"$run/$node.log" 2>&1 &
  pids+=($!)
done
for node in node-a node-b; do
  for _ in $(seq 200); do grep -q "node $node is alive" "$run/master.log" && break; sleep 0.05; done
  grep -q "node $node is alive" "$run/master.log" || { cat "$run/master.log" "$run/$node.log"; exit 1; }
  echo "   $node registered: $(grep -o "registered with master.*" "$run/$node.log")"
done

echo "== an engine on node-a: a put on its own node, then one the master places on node-b"
NANOKV_LIBRARY="$BUILD/libkv/capi/libnanokv.so" PYTHONPATH=python python3 - "$master" "demo-node-a-$$" <<'PY'
import sys
import nanokv
master, ipc = sys.argv[1], sys.argv[2]
with nanokv.Cluster(masters=[master], node_id="node-a", ipc_name=ipc, backend="host") as c:
    data = bytes(range(256)) * 4096  # 1 MiB
    c.put("demo:sess-1:kv:L0", data, preferred_segment="node-a")
    print("   put demo:sess-1:kv:L0 on node-a; read back", "intact" if c.get("demo:sess-1:kv:L0") == data else "CORRUPT")
    other = bytes(reversed(range(256))) * 4096
    c.put("demo:sess-1:kv:L1", other, preferred_segment="node-b")
    r = c.get_location("demo:sess-1:kv:L1").replicas[0]
    print(f"   put demo:sess-1:kv:L1 placed on {r.node_id} (device {r.device}, {r.device_uuid}, data path {r.data_address})")
    back = c.get("demo:sess-1:kv:L1")
    print("   get from node-a of node-b's copy, over UCX:", "intact" if back == other else "CORRUPT")
PY

echo "== kvctl --master $master cluster"
"$kvctl" --master "$master" cluster | sed 's/^/   /'
echo "== kvctl --master $master objects --cluster"
"$kvctl" --master "$master" objects --cluster | sed 's/^/   /'

echo "== stopping the kvds and the master (SIGTERM)"
status=0
for pid in "${pids[@]}"; do kill "$pid"; wait "$pid" || status=$?; done
pids=()
[ "$status" -eq 0 ] && echo "cluster demo: done, everything stopped cleanly" || echo "cluster demo: FAILED ($status)"
exit "$status"
