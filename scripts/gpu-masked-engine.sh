#!/usr/bin/env bash
# An example engine started under CUDA_VISIBLE_DEVICES=1 against a kvd that
# serves both GPUs: which GPU's pages does it get, and do they
# verify? Under that mask the engine's only GPU, its ordinal 0, is kvd's GPU 1;
# libkv matches kvd's devices to its own by uuid, so asking for kvd's device 1
# (what an instance with `device: 1` gets as NANOKV_DEVICE) should hold and
# verify pages there, and asking for kvd's device 0 should fail with "not
# visible to this process" (before the uuid match it silently used GPU 1).
# This records what happens in both cases. gpu-check.sh runs it in its
# TWO_GPU section.
#
#   scripts/gpu-masked-engine.sh BIN_DIR    (holding kvd, kvctl, nanokv_example_engine)
#
# One line per case: exit code (137: killed, still running after 60 s), the devices kvd shows the engine's pages on,
# the GPU nvidia-smi shows its process on, whether the engine verified its
# pages; then the engine's log. Exits 0 only when the engine asking for kvd's
# device 1 held its pages there and verified them; 1 otherwise.
# MASKED_BACKEND=host runs the same steps on two simulated devices (no GPU),
# the mask given as NANOKV_HOST_VISIBLE_DEVICES=1 too.
set -uo pipefail
BIN=$(realpath "${1:?usage: gpu-masked-engine.sh BIN_DIR}")
backend=${MASKED_BACKEND:-cuda}
dir=$(mktemp -d /tmp/nanokv-masked.XXXXXX)
ipc=masked_$$
export NANOKV_RUN_DIR=$dir
extra=()
if [[ $backend == host ]]; then
  extra=(--host-devices 2)
  export NANOKV_HOST_DEVICES=2
fi
"$BIN/kvd" --backend "$backend" --ipc-name "$ipc" --capacity $((64 << 20)) --reserve-pages 2 \
  --log-level info ${extra[@]+"${extra[@]}"} >"$dir/kvd.log" 2>&1 &
kvd=$!
cleanup() {
  kill -TERM "$kvd" 2>/dev/null && wait "$kvd" 2>/dev/null
  "$BIN/kvctl" cleanup "$ipc" >/dev/null 2>&1
  rm -rf "$dir"
}
trap cleanup EXIT
for _ in $(seq 200); do [[ -S $dir/$ipc.sock ]] || ! kill -0 "$kvd" 2>/dev/null && break; sleep 0.1; done
if [[ ! -S $dir/$ipc.sock ]]; then
  echo "kvd did not come up:"; cat "$dir/kvd.log"; exit 1
fi
echo "kvd ($backend) serves:"
"$BIN/kvctl" devices "$ipc" 2>&1 | sed 's/^/    /'
gpu_uuids=$(nvidia-smi --query-gpu=index,uuid --format=csv,noheader 2>/dev/null)

# held NAME: "device:pages ..." of tenant NAME's pages in kvd's segment.
held() {
  "$BIN/kvctl" tenants "$ipc" --json 2>/dev/null | python3 -c '
import json, sys
for t in json.load(sys.stdin).get("tenants", []):
    if t["name"] == sys.argv[1]:
        print(" ".join("%d:%d" % (d["device"], d["used_pages"]) for d in t["devices"] if d["used_pages"]))' "$1"
}

# run_case DEVICE: one engine asking for kvd's device DEVICE under the mask.
# Prints its line; returns 0 when it held 8 pages on kvd's device 1 and verified them.
run_case() {
  local device=$1 name=masked-d$1 log=$dir/masked-d$1.log pages="" gpu="not listed" rc verified=no
  CUDA_VISIBLE_DEVICES=1 NANOKV_HOST_VISIBLE_DEVICES=1 ENABLE_NANOKV=1 NANOKV_IPC_NAME=$ipc NANOKV_TENANT=$name NANOKV_DEVICE=$device \
    "$BIN/nanokv_example_engine" --pages 8 --step 4 --rounds 1 --hold-ms 2000 --seed 7 >"$log" 2>&1 &
  local pid=$!
  # While it holds its 8 pages: kvd's view of where they are, nvidia-smi's of its context.
  for _ in $(seq 200); do
    pages=$(held "$name")
    [[ $pages == *:8 ]] && break
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.05
  done
  local uuid
  uuid=$(nvidia-smi --query-compute-apps=pid,gpu_uuid --format=csv,noheader 2>/dev/null |
         awk -F', ' -v p="$pid" '$1 == p {print $2}')
  if [[ -n $uuid ]]; then
    gpu="GPU $(awk -F', ' -v u="$uuid" '$2 == u {print $1}' <<<"$gpu_uuids") ($uuid)"
  fi
  for _ in $(seq 600); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  kill -KILL "$pid" 2>/dev/null
  wait "$pid"; rc=$?
  grep -q 'mapped and verified' "$log" && verified=yes
  echo "NANOKV_DEVICE=$device under CUDA_VISIBLE_DEVICES=1: exit $rc; kvd shows its pages on" \
       "device:pages [${pages:-none}]; its process on ${gpu}; pages verified: $verified"
  sed 's/^/    /' "$log"
  [[ $rc == 0 && $verified == yes && $pages == "1:8" ]]
}

run_case 1; right=$?
run_case 0
echo "kvd's log (warnings and errors):"
grep -E '\[(warning|error)\]' "$dir/kvd.log" | sed 's/^/    /'
if [[ $right == 0 ]]; then
  echo "masked engine: asked for kvd's device 1, it held and verified pages there"
else
  echo "masked engine: asked for kvd's device 1, it did not hold verified pages there (see above)"
fi
exit "$right"
