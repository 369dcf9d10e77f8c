#!/usr/bin/env bash
# Builds the GPU-side binaries for an sm_90 machine and bundles them, with the
# libraries a bare GPU machine lacks, into .device/ (git-ignored), for the
# device tool to carry and scripts/gpu-check.sh to run there.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
bins=(nanokv_selfcheck backend_conformance_test backend_stream_test backend_stream_gpu_test backend_peer
      driver_backend_test kvd
      nanokv_example_engine kvd_engines_test kvd_protocol_test backend_ops_bench
      page_pool_bench grant_bench controller_test kvctl_test kvctl
      paged_append_gpu_test object_pages_gpu_test stream_fan_gpu_test paged_append_bench object_pages_bench
      kvd_objects_test object_peer object_plan_bench kvd_restart_test kv_cache_kvd_test
      nanokv_chaos nanokv_chaos_engine block_alloc_bench kvd_limits_test object_put_get_bench
      kvd_ledger_test cross_gpu_ready_gpu_test cluster_routing_test master_plan_bench kvd_recycle_test client_test
      kvd_refusals_test kvd_objects_restart_test cluster_transfer_test cluster_transfer_faults_test cluster_transfer_big_test
      cluster_transfer_device_test
      cluster_reader remote_transfer_bench cluster_highway_test pd_bench grpc_call_bench put_fan_bench
      object_tier_bench prefix_cache_test prefix_cache_cluster_test slab_gpu_test slab_put_bench
      cluster_tiers_test)
cmake --build "$BUILD" -j "$(nproc)" --target "${bins[@]}" nanokv_capi
rm -rf .device
paths=()
for b in "${bins[@]}"; do paths+=("$(find "$BUILD" -type f -name "$b" -perm -u+x | head -n 1)"); done
# NO_IMAGE_BUILD=dir: a build dir configured with -DCMAKE_CUDA_ARCHITECTURES=80-real,
# whose objects suite runs where no kernel image fits (the copy fallback).
if [[ -n "${NO_IMAGE_BUILD:-}" ]]; then
  cmake --build "$NO_IMAGE_BUILD" -j "$(nproc)" --target kvd_objects_test
  mkdir -p "$BUILD/no-image" && cp "$NO_IMAGE_BUILD/tests/kvd_objects_test" "$BUILD/no-image/kvd_objects_test_no_image"
  paths+=("$BUILD/no-image/kvd_objects_test_no_image")
fi
# libnanokv.so, the C ABI the Python package loads (python/ travels with the tree).
paths+=("$(find "$BUILD" -type f -name 'libnanokv.so*' | head -n 1)")
# The tool sits in shared/ beside the main checkout (a worktree's git common
# dir is that checkout's .git).
tool=../shared/tools/device-bundle
[[ -x $tool ]] || tool=$(git rev-parse --path-format=absolute --git-common-dir)/../../shared/tools/device-bundle
"$tool" .device "${paths[@]}"
# Debug info and symbol tables would not fit the 64 MiB the device tool carries.
strip --strip-debug .device/lib/*
strip --strip-unneeded .device/bin/*
# UCX, which the data path between nodes dlopens (ipc/ucx/ucx_api.h), so the
# tool cannot see it: its libraries and its module directory by hand
# (gpu-check.sh points UCX_MODULE_DIR there). The GPU machine has no UCX.
# After the strips above: Debian ships them stripped, and a directory would
# stop `strip .device/lib/*`.
ucx=/usr/lib/x86_64-linux-gnu
cp -L "$ucx"/libucp.so.0 "$ucx"/libuct.so.0 "$ucx"/libucs.so.0 "$ucx"/libucm.so.0 "$ucx"/libnuma.so.1 .device/lib/
mkdir -p .device/lib/ucx
# The CMA module only: the ib and rdmacm ones need rdma-core's libraries,
# which the GPU machine lacks too (UCX would warn at every start).
cp -L "$ucx"/ucx/libuct_cma.so.0 .device/lib/ucx/
du -sh .device
# Still over: carry .device.tar.xz instead (a sixth of the size) and unpack it
# there: `tar xJf .device.tar.xz && bash scripts/gpu-check.sh .device`.
rm -f .device.tar.xz
if (( $(du -sm .device | cut -f1) > 60 )); then
  tar cf - .device | xz -T0 -6 > .device.tar.xz
  echo "gpu-bundle: over 60 MiB; carry .device.tar.xz ($(du -sh .device.tar.xz | cut -f1)) and unpack it first"
fi
