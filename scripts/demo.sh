#!/usr/bin/env bash
# The demo `make demo` runs: kvd with configs/demo.yaml on this machine's best
# backend (cuda where a GPU is found, else host). kvd starts and supervises the
# two example engines the file lists (its controller); they attach by
# themselves and grow, verify and shrink KV tensors in pages kvd shares.
# kvctl's view while they run, then SIGTERM to kvd: it stops its engines
# first, then itself. Then the cluster (scripts/demo-cluster.sh): a master and
# two kvds as two nodes, a plan routed to the other node, kvctl cluster.
# Everything it starts it stops; it leaves nothing behind.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
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

# configs/demo.yaml names the engine ../build/examples/nanokv_example_engine
# (relative to the file); a build elsewhere runs a copy naming that build's.
config=configs/demo.yaml
if [ "$(cd "$BUILD" && pwd)" != "$here/build" ]; then
  engine=$(cd "$BUILD/examples" && pwd)/nanokv_example_engine
  sed "s#\.\./build/examples/nanokv_example_engine#$engine#" configs/demo.yaml >"$run/demo.yaml"
  config=$run/demo.yaml
fi

echo "== kvd --config $config (ipc name $ipc): it starts engine-a and engine-b itself"
"$BUILD/entry/kvd" --config "$config" --ipc-name "$ipc" --run-dir "$run" >"$run/kvd.log" 2>&1 &
kvd_pid=$!
for _ in $(seq 100); do [ -S "$run/$ipc.sock" ] && break; sleep 0.05; done
[ -S "$run/$ipc.sock" ] || { cat "$run/kvd.log"; exit 1; }

sleep 1.2
if [ -x "$BUILD/kvctl/kvctl" ]; then
  echo "== kvctl list"
  "$BUILD/kvctl/kvctl" list
  echo "== kvctl tenants $ipc"
  "$BUILD/kvctl/kvctl" tenants "$ipc"
fi

# Each instance's output goes to <run dir>/<ipc>.<name>.log; kvd adds a line
# when it starts one and when one ends.
ended() { grep -qE "=== nanokv: .*'$1' (exited|was killed|could not)" "$run/$ipc.$1.log" 2>/dev/null; }
for _ in $(seq 600); do ended engine-a && ended engine-b && break; sleep 0.1; done
status=0
for name in engine-a engine-b; do
  echo "== $name's log ($run/$ipc.$name.log)"
  sed 's/^/   /' "$run/$ipc.$name.log"
  grep -q "'$name' exited with code 0" "$run/$ipc.$name.log" || status=1
done

echo "== stopping kvd (SIGTERM): its engines first, then itself"
kill "$kvd_pid"
wait "$kvd_pid" || status=$?
kvd_pid=""
grep -E "instance|attached|gone|stopped" "$run/kvd.log" | sed 's/^/   kvd: /'
[ "$status" -eq 0 ] && echo "demo: done, everything stopped cleanly" || echo "demo: FAILED ($status)"
[ "$status" -eq 0 ] || exit "$status"

# The cluster: a master and two kvds as two nodes (scripts/demo-cluster.sh).
BUILD=$BUILD scripts/demo-cluster.sh
