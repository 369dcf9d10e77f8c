#!/usr/bin/env bash
# The demo `make demo` runs: kvd on this machine's best backend (cuda where a
# GPU is found, else host), two example engines growing, verifying and
# shrinking KV tensors in pages kvd shares, kvctl's view while they run, and
# a clean stop. Everything it starts it stops; it leaves nothing behind.
set -euo pipefail
BUILD=${BUILD:-build}
run=$(mktemp -d /tmp/nanokv-demo-XXXXXX)
export NANOKV_RUN_DIR=$run
ipc=demo-$$
kvd_pid=""
cleanup() {
  [ -n "$kvd_pid" ] && kill "$kvd_pid" 2>/dev/null && wait "$kvd_pid" 2>/dev/null || true
  rm -rf "$run"
}
trap cleanup EXIT

echo "== backend self-check"
"$BUILD/examples/nanokv_selfcheck"

echo "== kvd (ipc name $ipc, capacity 256 MiB per device)"
"$BUILD/daemon/kvd" --ipc-name "$ipc" --capacity 256MiB --reserve-pages 8 >"$run/kvd.log" 2>&1 &
kvd_pid=$!
for _ in $(seq 100); do [ -S "$run/$ipc.sock" ] && break; sleep 0.05; done
[ -S "$run/$ipc.sock" ] || { cat "$run/kvd.log"; exit 1; }

echo "== two engines attach by environment (ENABLE_NANOKV=1 NANOKV_IPC_NAME=$ipc)"
engine() {
  ENABLE_NANOKV=1 NANOKV_IPC_NAME="$ipc" NANOKV_TENANT="$1" NANOKV_LIMIT="$2" \
    "$BUILD/examples/nanokv_example_engine" --pages "$3" --step 4 --rounds 2 --hold-ms 1500 --step-ms 50 &
}
engine engine-a 96MiB 32
pid_a=$!
engine engine-b 50% 48
pid_b=$!
sleep 1.2
if [ -x "$BUILD/kvctl/kvctl" ]; then
  echo "== kvctl list"
  "$BUILD/kvctl/kvctl" list
  echo "== kvctl tenants $ipc"
  "$BUILD/kvctl/kvctl" tenants "$ipc"
fi
status=0
wait "$pid_a" || status=$?
wait "$pid_b" || status=$?
echo "== stopping kvd (SIGTERM)"
kill "$kvd_pid"
wait "$kvd_pid" || status=$?
kvd_pid=""
grep -E "attached|gone|stopped" "$run/kvd.log" | sed 's/^/   kvd: /'
[ "$status" -eq 0 ] && echo "demo: done, everything stopped cleanly" || echo "demo: FAILED ($status)"
exit "$status"
