#!/usr/bin/env bash
# Runs the GPU side of the suite and the benchmarks on a machine with an NVIDIA
# GPU, from a bundle made by scripts/gpu-bundle.sh (binaries in $B/bin, the
# libraries that machine lacks in $B/lib). Output: a log and JSON files in
# ${OUT:-./gpu-out}; the summary is printed last.
#
#   scripts/gpu-check.sh [BUNDLE_DIR]     (default .device)
#   ONLY="objects_cuda object_plan_bench" scripts/gpu-check.sh   (just those steps)
#   ONLY=TWO_GPU scripts/gpu-check.sh     (every step of the TWO_GPU section)
#
# The TWO_GPU section runs only where nvidia-smi lists two or more
# GPUs: the suites whose cases span two devices, the cross-GPU READY stress,
# chaos over both GPUs, the peer push both ways, and an engine under
# CUDA_VISIBLE_DEVICES=1 (scripts/gpu-masked-engine.sh). Elsewhere the
# summary says SKIP TWO_GPU and why.
#
# A skip is not a pass: where nvidia-smi sees a GPU, a step whose GPU tests
# all skipped (a broken driver or CUDA looks like no GPU to the tests) is a
# FAIL naming the first skip's reason, and so is a step that ran none of them.
# Which tests are a step's GPU tests: GPU_TESTS, a regex over "Suite.Test"
# of a gtest step ("." for all); SKIP_MARK, the line a script prints when it
# skips. A step that ran its GPU tests with some skipped says how many.
set -uo pipefail
B=$(realpath "${1:-.device}")
O=${OUT:-./gpu-out}
mkdir -p "$O"
export LD_LIBRARY_PATH="$B/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export NANOKV_BACKEND_PEER="$B/bin/backend_peer"
export NANOKV_KVD_BINARY="$B/bin/kvd"
export NANOKV_ENGINE_BINARY="$B/bin/nanokv_example_engine"
export NANOKV_KVCTL_BINARY="$B/bin/kvctl"
export NANOKV_OBJECT_PEER="$B/bin/object_peer"
export NANOKV_CLUSTER_READER="$B/bin/cluster_reader"
# UCX carried by gpu-bundle.sh (the data path between nodes loads it at run time).
export UCX_MODULE_DIR="$B/lib/ucx"
summary=()
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU [0-9]')

# gpu_tests_not_run NAME: why step NAME's GPU tests count as not run (all
# skipped, or none ran), or nothing when they ran. Reads $O/NAME.json
# (gtest's --gtest_output) and the skip reasons gtest printed in $O/NAME.out.
gpu_tests_not_run() {
  local name=$1
  if [[ -n "${SKIP_MARK:-}" ]] && grep -q "$SKIP_MARK" "$O/$name.out"; then
    grep -m1 "$SKIP_MARK" "$O/$name.out"
    return
  fi
  [[ -n "${GPU_TESTS:-}" ]] || return 0
  python3 - "$O/$name.json" "$GPU_TESTS" "$O/$name.out" <<'PY'
import json, re, sys
report, pattern, out = sys.argv[1], re.compile(sys.argv[2]), sys.argv[3]
try:
    suites = json.load(open(report))["testsuites"]
except (OSError, ValueError, KeyError) as e:
    print(f"no gtest report ({e})")
    sys.exit(0)
ran = [t.get("result") for s in suites for t in s["testsuite"]
       if t.get("status") == "RUN" and pattern.search(f'{s["name"]}.{t["name"]}')]
skipped = ran.count("SKIPPED")
lines = open(out, errors="replace").read().splitlines()
reason = next((lines[i + 1] for i, l in enumerate(lines[:-1]) if l.endswith(": Skipped")), "?")
if not ran:
    print(f"no GPU test ran (GPU_TESTS={pattern.pattern})")
elif skipped == len(ran):
    print(f"all {skipped} GPU tests skipped; first skip: {reason}")
elif skipped:
    print(f"ok: {skipped} of {len(ran)} GPU tests skipped; first skip: {reason}")
PY
}

# selected NAME: without ONLY every step runs; with it, those it names and
# those of a section it names ($SECTION, set while a section's steps run).
selected() {
  [[ -z "${ONLY:-}" || " $ONLY " == *" $1 "* || ( -n "${SECTION:-}" && " $ONLY " == *" $SECTION "* ) ]]
}

step() {  # step NAME COMMAND...: runs it, logs it, records pass/fail
  local name=$1; shift
  selected "$name" || return 0
  echo "=== $name: $*" | tee -a "$O/gpu.log"
  local report=() verdict why
  rm -f "$O/$name.json"
  [[ -n "${GPU_TESTS:-}" ]] && report=(--gtest_output="json:$O/$name.json")
  if "$@" ${report[@]+"${report[@]}"} >"$O/$name.out" 2>&1; then
    verdict="PASS $name"
  else
    verdict="FAIL $name (rc=$?)"
  fi
  if [[ $verdict == PASS* && $gpus -gt 0 ]]; then
    why=$(gpu_tests_not_run "$name")
    if [[ $why == ok:* ]]; then
      verdict+=" (${why#ok: })"
    elif [[ -n $why ]]; then
      verdict="FAIL $name ($why)"
    fi
  fi
  summary+=("$verdict")
  cat "$O/$name.out" >>"$O/gpu.log"
}

nvidia-smi -L | tee "$O/device.txt"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader >>"$O/device.txt"
step selfcheck "$B/bin/nanokv_selfcheck" --backend cuda
# What kvd needs at full use of 0.9 of every GPU, against this machine's limits:
# exit 3 (limits short) is a finding, not a failure.
check_limits() {
  local rc=0
  "$B/bin/kvd" --backend cuda --capacity 0.9 --check-limits || rc=$?
  [[ $rc == 0 || $rc == 3 ]]
}
step check_limits check_limits
GPU_TESTS='/cuda$' step conformance "$B/bin/backend_conformance_test" --gtest_brief=1
# Streams (what kvd's tier worker copies on): their semantics on cuda, and
# that they run while the legacy default stream is held up (non-blocking).
GPU_TESTS='/cuda$' step backend_stream "$B/bin/backend_stream_test" --gtest_brief=1
GPU_TESTS=. step backend_stream_gpu "$B/bin/backend_stream_gpu_test" --gtest_brief=1
GPU_TESTS='^CudaDeviceTest\.' step driver_backend "$B/bin/driver_backend_test" --gtest_brief=1
# With NANOKV_TEST_BACKEND=cuda every test of these suites is a GPU test.
export GPU_TESTS=.
NANOKV_TEST_BACKEND=cuda step engines_cuda "$B/bin/kvd_engines_test" --gtest_brief=1
NANOKV_TEST_BACKEND=cuda step protocol_cuda "$B/bin/kvd_protocol_test" --gtest_brief=1
NANOKV_TEST_BACKEND=cuda step controller_cuda "$B/bin/controller_test" --gtest_brief=1
NANOKV_TEST_BACKEND=cuda step kvctl_cuda "$B/bin/kvctl_test" --gtest_brief=1
NANOKV_TEST_BACKEND=cuda step objects_cuda "$B/bin/kvd_objects_test" --gtest_brief=1
# The host tier under a cuda store: demotion (device -> pinned host pages) and
# promotion (back, READY header after the bytes) by kvd's tier worker, a
# working set three times the store read back byte-exact, metrics, kvctl;
# gets served from the host tier's pages by the engine's own copy (host and
# device buffers, a batch mixing tiers, races, a reader killed mid-read).
NANOKV_TEST_BACKEND=cuda step object_tier_cuda "$B/bin/kvd_objects_test" --gtest_brief=1 \
  --gtest_filter='KvdObjectTierTest.*:KvdObjectTierReadsTest.*'
# A build whose kernels fit no GPU here (sm_80 SASS only, scripts/gpu-bundle.sh
# NO_IMAGE_BUILD=...): the objects suite passes by copy, warning once.
if [[ -x "$B/bin/kvd_objects_test_no_image" ]]; then
  NANOKV_TEST_BACKEND=cuda step objects_cuda_no_image "$B/bin/kvd_objects_test_no_image" --gtest_brief=1
fi
NANOKV_TEST_BACKEND=cuda step restart_cuda "$B/bin/kvd_restart_test" --gtest_brief=1
# The object store across kvd kill -9s: the page keeper's exported fds keep cuda pages alive.
NANOKV_TEST_BACKEND=cuda step objects_restart_cuda "$B/bin/kvd_objects_restart_test" --gtest_brief=1
NANOKV_TEST_BACKEND=cuda step kv_cache_cuda "$B/bin/kv_cache_kvd_test" --gtest_brief=1
NANOKV_TEST_BACKEND=cuda step limits_cuda "$B/bin/kvd_limits_test" --gtest_brief=1
# Pages recycled away while an engine kept their (CUDA POSIX-fd) handles.
NANOKV_TEST_BACKEND=cuda step recycle_cuda "$B/bin/kvd_recycle_test" --gtest_brief=1
NANOKV_TEST_BACKEND=cuda step client_cuda "$B/bin/client_test" --gtest_brief=1
# Every refusal at connect or attach reaches the engine by its cause.
NANOKV_TEST_BACKEND=cuda step refusals_cuda "$B/bin/kvd_refusals_test" --gtest_brief=1
# The cluster: a master and kvds on GPU pages; ClusterClient's local path
# moves bytes through the node's store pages on the GPU.
NANOKV_TEST_BACKEND=cuda step cluster_cuda "$B/bin/cluster_routing_test" --gtest_brief=1
# The data path between nodes: two and three kvds on this GPU as
# nodes, bytes over UCX (tcp on loopback) through host staging into cuda pages.
NANOKV_TEST_BACKEND=cuda step cluster_transfer_cuda "$B/bin/cluster_transfer_test" --gtest_brief=1
NANOKV_TEST_BACKEND=cuda step cluster_transfer_faults_cuda "$B/bin/cluster_transfer_faults_test" --gtest_brief=1
NANOKV_TEST_BACKEND=cuda step cluster_transfer_big_cuda "$B/bin/cluster_transfer_big_test" --gtest_brief=1
NANOKV_TEST_BACKEND=cuda step cluster_transfer_device_cuda "$B/bin/cluster_transfer_device_test" --gtest_brief=1
# The KV highway: batches on one kvd, two kvds of one host (their
# pages mapped across kvds) and between hosts, the stream-ordered put.
NANOKV_TEST_BACKEND=cuda step cluster_highway_cuda "$B/bin/cluster_highway_test" --gtest_brief=1
# The host tier in the cluster: a demoted copy's tier at the master, the GPU
# copy located first, a node killed with both tiers re-registering each.
NANOKV_TEST_BACKEND=cuda step cluster_tiers_cuda "$B/bin/cluster_tiers_test" --gtest_brief=1
# The prefix cache on cuda pages: chunks gathered into and scattered from
# device scratch by kv_copy_many, on one node and across two.
NANOKV_TEST_BACKEND=cuda step prefix_cuda "$B/bin/prefix_cache_test" --gtest_brief=1
NANOKV_TEST_BACKEND=cuda step prefix_cluster_cuda "$B/bin/prefix_cache_cluster_test" --gtest_brief=1
unset GPU_TESTS
NANOKV_TEST_BACKEND=cuda step chaos_cuda "$B/bin/nanokv_chaos" --kills 200 --seed 20261122 --json \
  --kvd "$B/bin/kvd" --engine "$B/bin/nanokv_chaos_engine"
# The Python package (host-backend suites, and the decode-loop example on cuda
# where PyTorch sees the GPU), then the example itself on cuda.
export NANOKV_LIBRARY="$B/lib/libnanokv.so" PYTHONPATH="$PWD/python${PYTHONPATH:+:$PYTHONPATH}"
step python_suite python3 -m unittest discover -s python/tests -p 'test_*.py'
SKIP_MARK='decode_loop: SKIP:' step decode_loop_cuda python3 examples/python/decode_loop.py --backend cuda \
  --kvd "$B/bin/kvd"
# nanokv.Objects with cuda tensors in and out: kernels, no host copy.
SKIP_MARK='skipped=' NANOKV_TEST_BACKEND=cuda step python_objects_torch_cuda \
  python3 -m unittest discover -s python/tests -p 'test_objects_torch.py' -v
# nanokv.Cluster with cuda tensors between two nodes on the GPU.
SKIP_MARK='skipped=' NANOKV_TEST_BACKEND=cuda step python_cluster_torch_cuda \
  python3 -m unittest discover -s python/tests -p 'test_cluster.py' -k test_torch_tensors_cross_nodes -v
# Prefix reuse with transformers on cuda: Llama- and Qwen2-shaped random
# models, NanoKVCache's greedy tokens against DynamicCache's, and a second
# process loading the first one's prefix with the same tokens as a recompute.
SKIP_MARK='prefix_reuse: SKIP:' step prefix_reuse_cuda python3 examples/python/prefix_reuse.py --kvd "$B/bin/kvd"

# The same suites under the CUDA MPS control daemon: one
# started here with private pipe and log directories, stopped (echo quit)
# however the suite ends. kvd must say at start that MPS is active
# (kvd --check-limits logs what kvd's start-up logs), else the step fails.
under_mps() {
  (
    dir=$(mktemp -d /tmp/nanokv_mps.XXXXXX)
    export CUDA_MPS_PIPE_DIRECTORY="$dir/pipe" CUDA_MPS_LOG_DIRECTORY="$dir/log"
    mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
    trap 'echo quit | nvidia-cuda-mps-control; cat "$CUDA_MPS_LOG_DIRECTORY/control.log" 2>/dev/null; rm -rf "$dir"' EXIT
    nvidia-cuda-mps-control -d || { echo "under_mps: nvidia-cuda-mps-control -d failed"; exit 1; }
    "$B/bin/kvd" --backend cuda --capacity 0.1 --check-limits 2>&1 >/dev/null | grep 'MPS' || true
    if ! "$B/bin/kvd" --backend cuda --capacity 0.1 --check-limits 2>&1 >/dev/null | grep -q 'MPS active'; then
      echo "under_mps: kvd does not see the MPS control daemon at $CUDA_MPS_PIPE_DIRECTORY"
      exit 1
    fi
    "$@"
  )
}
export GPU_TESTS=.
NANOKV_TEST_BACKEND=cuda step engines_mps under_mps "$B/bin/kvd_engines_test" --gtest_brief=1
NANOKV_TEST_BACKEND=cuda step objects_mps under_mps "$B/bin/kvd_objects_test" --gtest_brief=1
NANOKV_TEST_BACKEND=cuda step restart_mps under_mps "$B/bin/kvd_restart_test" --gtest_brief=1
NANOKV_TEST_BACKEND=cuda step objects_restart_mps under_mps "$B/bin/kvd_objects_restart_test" --gtest_brief=1
unset GPU_TESTS
NANOKV_TEST_BACKEND=cuda step chaos_mps under_mps "$B/bin/nanokv_chaos" --kills 100 --seed 20261126 --json \
  --kvd "$B/bin/kvd" --engine "$B/bin/nanokv_chaos_engine"
SKIP_MARK='skipped=' NANOKV_TEST_BACKEND=cuda step python_objects_torch_mps \
  under_mps python3 -m unittest discover -s python/tests -p 'test_objects_torch.py' -v
step object_put_get_bench_mps under_mps "$B/bin/object_put_get_bench" --kvd "$B/bin/kvd"
GPU_TESTS=. step paged_append_gpu "$B/bin/paged_append_gpu_test" --gtest_brief=1
GPU_TESTS=. step object_pages_gpu "$B/bin/object_pages_gpu_test" --gtest_brief=1
GPU_TESTS=. step stream_fan_gpu "$B/bin/stream_fan_gpu_test" --gtest_brief=1
# v2 slabs: a kernel's threads allocate and announce through kvd's ring in
# host memory while the host reads it (device-scope cursor, system-scope stamps).
GPU_TESTS=. step slab_gpu "$B/bin/slab_gpu_test" --gtest_brief=1
# The master's empty call by gRPC server API, against futex and TCP ping-pongs.
step grpc_call_bench "$B/bin/grpc_call_bench" --calls 2000 --rounds 5
step backend_ops_bench "$B/bin/backend_ops_bench" --backend cuda --pages 256 --rounds 5
step page_pool_bench "$B/bin/page_pool_bench" --backend cuda
step grant_bench "$B/bin/grant_bench" --backend cuda --kvd "$B/bin/kvd" --pages 256 --batch 16 --rounds 5
step grant_bench_batch1 "$B/bin/grant_bench" --backend cuda --kvd "$B/bin/kvd" --pages 64 --batch 1 --rounds 5
step paged_append_bench "$B/bin/paged_append_bench"
step object_pages_bench "$B/bin/object_pages_bench"
# The host tier's moves against pinned cudaMemcpy in the same run (goal
# >= 0.8x each way), and a working set three times the store with and without it.
step object_tier_bench "$B/bin/object_tier_bench" --backend cuda
step object_plan_bench "$B/bin/object_plan_bench" --backend cuda --kvd "$B/bin/kvd"
# Time to first token with an 8k prompt whose 7k prefix another process
# stored, against recompute; the load's bandwidth against a device memcpy.
SKIP_MARK='prefix_reuse: SKIP:' step prefix_reuse_bench python3 examples/python/prefix_reuse.py --bench \
  --kvd "$B/bin/kvd" --json "$O/prefix_reuse_bench.json"
step master_plan_bench "$B/bin/master_plan_bench" --kvd "$B/bin/kvd" --index 1000000,10000000
step object_plan_bench_block "$B/bin/object_plan_bench" --backend cuda --kvd "$B/bin/kvd" --spin-us 0
step object_plan_bench_busy "$B/bin/object_plan_bench" --backend cuda --kvd "$B/bin/kvd" --busy-poll-us 50
# The same with the client and kvd on two fixed CPUs, the floors' processes
# too: an unpinned kvd may sit across a socket or core complex from the bench.
step object_plan_bench_busy_pinned "$B/bin/object_plan_bench" --backend cuda --kvd "$B/bin/kvd" --busy-poll-us 50 \
  --cpus 2,3
step object_put_get_bench "$B/bin/object_put_get_bench" --kvd "$B/bin/kvd"
# v2 slab puts: the store's, a batch's and a producer kernel's, against device memcpy.
step slab_put_bench "$B/bin/slab_put_bench" --kvd "$B/bin/kvd"
# Remote put/get against raw UCP and the staging copies (cuda pages), then the
# chunk x depth sweep the 2-core CI host could not settle (BENCHMARKS.md).
step remote_transfer_bench "$B/bin/remote_transfer_bench" --kvd "$B/bin/kvd" --backend cuda
for chunk_depth in "1 8" "4 4" "16 4" "16 8"; do
  read -r chunk depth <<< "$chunk_depth"
  step "remote_transfer_bench_c${chunk}_d${depth}" "$B/bin/remote_transfer_bench" --kvd "$B/bin/kvd" \
    --backend cuda --sizes 16,64,256 --chunk-mib "$chunk" --depth "$depth"
done
step object_put_get_bench_busy "$B/bin/object_put_get_bench" --kvd "$B/bin/kvd" --busy-poll-us 50
# The socket's figures beside the ring's: every request by the socket.
step object_plan_bench_socket "$B/bin/object_plan_bench" --backend cuda --kvd "$B/bin/kvd" --ring 0
step object_plan_bench_socket_busy "$B/bin/object_plan_bench" --backend cuda --kvd "$B/bin/kvd" --busy-poll-us 50 --ring 0
step object_put_get_bench_socket_busy "$B/bin/object_put_get_bench" --kvd "$B/bin/kvd" --busy-poll-us 50 --ring 0

# The chaos run on cuda, whose JSON must then show grants, shares and kills
# on every device kvd served, and two of them.
chaos_on_both_gpus() {
  "$B/bin/nanokv_chaos" --kills 200 --seed 20261122 --json --kvd "$B/bin/kvd" \
    --engine "$B/bin/nanokv_chaos_engine" | tee "$O/chaos_2gpu.json" || return 1
  python3 - "$O/chaos_2gpu.json" <<'PY'
import json, sys
devices = json.load(open(sys.argv[1]))["devices"]
print("; ".join(f"device {d['device']}: granted {d['granted_page_rounds']}, shared "
                f"{d['shared_page_rounds']}, kills holding pages {d['kills_holding_pages']}" for d in devices))
unused = [d for d in devices if 0 in (d["granted_page_rounds"], d["shared_page_rounds"], d["kills_holding_pages"])]
sys.exit(1 if len(devices) < 2 or unused else 0)
PY
}

SECTION=TWO_GPU
if (( gpus >= 2 )); then
  export NANOKV_TEST_BACKEND=cuda  # kvd serves every GPU on cuda: both here
  # The objects suite again, its two-device case as the GPU test: skipped is a FAIL.
  GPU_TESTS='\.AProducerWritesAnotherDevicesObject$' step objects_2gpu "$B/bin/kvd_objects_test" --gtest_brief=1
  # Grants, shares, returns, detaches and a kill -9 on both devices, against a ledger.
  GPU_TESTS=. step ledger_2gpu "$B/bin/kvd_ledger_test" --gtest_brief=1
  # These take pages of device 0, with kvd serving both.
  GPU_TESTS=. step engines_2gpu "$B/bin/kvd_engines_test" --gtest_brief=1
  GPU_TESTS=. step kv_cache_2gpu "$B/bin/kv_cache_kvd_test" --gtest_brief=1
  GPU_TESTS=. step cross_gpu_ready_2gpu "$B/bin/cross_gpu_ready_gpu_test" --gtest_brief=1
  step chaos_2gpu chaos_on_both_gpus
  # Its peer push both ways; "skipped" anywhere in its JSON is a FAIL.
  SKIP_MARK=skipped step object_put_get_bench_2gpu "$B/bin/object_put_get_bench" --kvd "$B/bin/kvd"
  # Records which GPU an engine under CUDA_VISIBLE_DEVICES=1 gets (recorded, not judged).
  step masked_engine_2gpu scripts/gpu-masked-engine.sh "$B/bin"
  # The KV highway across the two GPUs: prefill on GPU 0, the
  # store and the decode on GPU 1, against cudaMemcpyPeer and the rest.
  # The put kernel across NVLink on one stream and on a fan of streams.
  step put_fan_bench_2gpu "$B/bin/put_fan_bench"
  step pd_bench_2gpu "$B/bin/pd_bench" --kvd "$B/bin/kvd"
  # The example: prefill on GPU 0, decode on GPU 1, one node and two nodes of
  # this host, the tokens checked against one process doing both.
  step pd_disagg_2gpu python3 examples/python/pd_disagg.py --backend cuda --kvd "$B/bin/kvd"
  unset NANOKV_TEST_BACKEND
elif [[ -z "${ONLY:-}" || " $ONLY " == *" TWO_GPU "* ]]; then
  summary+=("SKIP TWO_GPU (nvidia-smi lists $gpus GPU(s); it needs two)")
fi
unset SECTION

echo
for f in conformance backend_stream backend_stream_gpu driver_backend engines_cuda protocol_cuda controller_cuda kvctl_cuda \
         objects_cuda restart_cuda kv_cache_cuda limits_cuda recycle_cuda client_cuda refusals_cuda paged_append_gpu object_pages_gpu stream_fan_gpu slab_gpu \
         engines_mps objects_mps restart_mps objects_restart_mps \
         cluster_transfer_cuda cluster_transfer_faults_cuda cluster_transfer_big_cuda cluster_transfer_device_cuda \
         cluster_highway_cuda prefix_cuda prefix_cluster_cuda cluster_tiers_cuda \
         objects_2gpu ledger_2gpu engines_2gpu kv_cache_2gpu cross_gpu_ready_2gpu; do
  [[ -f "$O/$f.out" ]] && echo "$f: $(grep -hE '^\[  (PASSED|FAILED|SKIPPED)' "$O/$f.out" | tr '\n' ' ')"
done
for f in backend_ops_bench page_pool_bench grant_bench grant_bench_batch1 paged_append_bench \
         object_pages_bench object_tier_bench object_plan_bench object_plan_bench_block object_plan_bench_busy object_plan_bench_busy_pinned \
         object_put_get_bench object_put_get_bench_busy object_put_get_bench_mps chaos_2gpu object_put_get_bench_2gpu \
         slab_put_bench remote_transfer_bench put_fan_bench_2gpu pd_bench_2gpu pd_disagg_2gpu grpc_call_bench \
         masked_engine_2gpu; do
  [[ -f "$O/$f.out" ]] && tail -n 1 "$O/$f.out"
done
printf '%s\n' "${summary[@]}"
