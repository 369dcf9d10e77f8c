#!/usr/bin/env bash
# Builds the libFuzzer targets (fuzz/) with clang into build-fuzz/ and runs each
# for SECONDS (default 30), from the seed corpora in fuzz/corpus/. A crash
# leaves its input in build-fuzz/artifacts/ and fails the script.
#
#   scripts/fuzz.sh [SECONDS]        BUILD_FUZZ=dir JOBS=n to override
#
# docs/RELIABILITY.md says how to run the long fuzz and what it reached.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-30}"
build="${BUILD_FUZZ:-build-fuzz}"
jobs="${JOBS:-2}"

# libFuzzer ships with clang only (Debian: clang and libclang-rt-14-dev).
if ! command -v clang++ >/dev/null; then
  echo "fuzz.sh: clang++ not found; apt-get install clang libclang-rt-14-dev" >&2
  exit 1
fi
CC=clang CXX=clang++ cmake -S . -B "$build" -DNANOKV_FUZZ=ON \
  -DNANOKV_BUILD_TESTS=OFF -DNANOKV_BUILD_BENCH=OFF >/dev/null
cmake --build "$build" -j "$jobs" --target fuzz_wire_decode fuzz_config_load fuzz_journal_decode fuzz_master_requests fuzz_master_credential fuzz_ring_entries fuzz_ring_doorbell \
  fuzz_object_journal fuzz_transfer_headers fuzz_announce_ring

mkdir -p "$build/artifacts"
status=0
# run NAME MAX_LEN [libFuzzer flags...]: the working corpus in $build/corpus/NAME
# grows from the seeds; the seeds in fuzz/corpus stay as committed.
run() {
  local name="$1" max_len="$2"
  shift 2
  local corpus="$build/corpus/$name" log="$build/fuzz_$name.log"
  mkdir -p "$corpus"
  echo "== fuzz_$name: ${seconds}s, max_len $max_len"
  if "$build/fuzz/fuzz_$name" -max_total_time="$seconds" -max_len="$max_len" \
       -print_final_stats=1 -artifact_prefix="$build/artifacts/$name-" "$@" \
       "$corpus" "fuzz/corpus/${name%%_*}" >"$log" 2>&1; then
    echo "   executions: $(sed -n 's/^stat::number_of_executed_units: *//p' "$log")," \
         "corpus $(ls "$corpus" | wc -l) inputs"
  else
    echo "   FAILED (log $log, input in $build/artifacts/):"
    grep -a -A12 -m1 "ERROR\|==ABORTING\|deadly signal" "$log" || tail -20 "$log"
    status=1
  fi
}
run wire_decode 4096
run config_load 8192 -dict=fuzz/config.dict
# A journal's header and group table alone are 65,712 bytes.
run journal_decode 70000
run master_requests 65536
# A mode byte, then a caller's credential or a master's Hello answer.
run master_credential 512
# The client's head, then a ring's cells (ipc::kRingDataBytes).
run ring_entries 65544
# A slab's bounds, then a v2 announce ring's records (8 of 320 bytes).
run announce_ring 2572
# One byte per thing a client does to its doorbell's end (seeds: the ring's).
run ring_doorbell 512
# A mode byte, then an object journal, or records and two 4 KiB header pages.
run object_journal 16384
# A mode byte, a chunk's length and what the receiver knows, then a header.
run transfer_headers 1100
exit "$status"
