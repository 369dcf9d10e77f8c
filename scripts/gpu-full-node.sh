#!/usr/bin/env bash
# A full node's fds on a GPU: one kvd at capacity 0.9 of device 0 and 64 example
# engines each mapping 512 MiB at once, under this machine's own open-file
# limit. Prints a JSON line: engines verified and refused, kvd's fds, and the
# most fds one engine held. Needs a bundle's bin/ (scripts/gpu-bundle.sh).
#   scripts/gpu-full-node.sh BIN_DIR [ENGINES] [PAGES_EACH]
set -uo pipefail
bin=$(realpath "$1"); engines=${2:-64}; pages=${3:-256}
run=$(mktemp -d); ipc="fullnode_$$"
export NANOKV_RUN_DIR=$run
"$bin/kvd" --backend "${BACKEND:-cuda}" --ipc-name "$ipc" --devices 0 --capacity 0.9 --log-level warn \
  >"$run/kvd.log" 2>&1 &
kvd=$!
for _ in $(seq 100); do [[ -S $run/$ipc.sock || -n $(ls "$run"/*.sock 2>/dev/null) ]] && break; sleep 0.1; done
sleep 0.5
kvd_fds_idle=$(ls /proc/$kvd/fd | wc -l)
pids=()
for i in $(seq "$engines"); do
  ENABLE_NANOKV=1 NANOKV_IPC_NAME=$ipc NANOKV_TENANT="e$i" NANOKV_LIMIT=1G \
    "$bin/nanokv_example_engine" --device 0 --pages "$pages" --step 64 --rounds 1 --hold-ms 8000 --quiet \
    >"$run/e$i.log" 2>&1 &
  pids+=($!)
done
# The most fds kvd and the first engine held while the engines ran (each
# holds its pages for --hold-ms at full size).
kvd_fds_full=0; engine_fds=0
while kill -0 "${pids[0]}" 2>/dev/null || pgrep -P $$ nanokv_example >/dev/null; do
  n=$(ls /proc/$kvd/fd 2>/dev/null | wc -l); (( n > kvd_fds_full )) && kvd_fds_full=$n
  n=$(ls /proc/${pids[0]}/fd 2>/dev/null | wc -l); (( n > engine_fds )) && engine_fds=$n
  sleep 0.5
done
ok=0; failed=0
for p in "${pids[@]}"; do if wait "$p"; then ok=$((ok + 1)); else failed=$((failed + 1)); fi; done
refused=$(grep -l -i "refus\|exhausted\|error" "$run"/e*.log 2>/dev/null | wc -l)
kill -TERM "$kvd"; wait "$kvd"
first_error=$(grep -h -i "error\|refus" "$run"/e*.log 2>/dev/null | head -n 1)
printf '{"engines": %d, "pages_each": %d, "verified": %d, "failed": %d, "engine_logs_with_errors": %d, "kvd_fds_idle": %d, "kvd_fds_full": %d, "engine_fds_full": %d, "nofile_hard": %s, "first_error": "%s"}\n' \
  "$engines" "$pages" "$ok" "$failed" "$refused" "$kvd_fds_idle" "$kvd_fds_full" "$engine_fds" "$(ulimit -Hn)" "${first_error//\"/\'}"
rm -rf "$run"
(( failed == 0 ))
