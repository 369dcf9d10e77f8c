#!/usr/bin/env bash
# How kvd's and an engine's fds grow with pages: fds, RSS and threads of kvd and of one engine, idle
# and with the engine holding N pages, for each N given. One kvd per N,
# sized to N pages (plus its ahead-made reserve), and one example engine
# growing to N pages in grants of 64 and holding them. Prints a JSON line per N.
#   scripts/fd-scale.sh BIN_DIR BACKEND N [N ...]     (BACKEND: cuda or host)
set -uo pipefail
bin=$(realpath "$1"); backend=$2; shift 2
page=$((2 * 1024 * 1024))

# status PID: "rss_kb fds threads" of a live process.
status() {
  local rss threads fds
  rss=$(awk '/^VmRSS:/ {print $2}' "/proc/$1/status" 2>/dev/null)
  threads=$(awk '/^Threads:/ {print $2}' "/proc/$1/status" 2>/dev/null)
  fds=$(ls "/proc/$1/fd" 2>/dev/null | wc -l)
  echo "${rss:-0} $fds ${threads:-0}"
}

for pages in "$@"; do
  run=$(mktemp -d); ipc="fdscale_$$_$pages"
  export NANOKV_RUN_DIR=$run
  extra=()
  [[ $backend == host ]] && extra=(--host-device-memory $(((pages + 16) * page)))
  "$bin/kvd" --backend "$backend" --ipc-name "$ipc" --devices 0 --capacity $(((pages + 16) * page)) \
    "${extra[@]}" --log-level warn >"$run/kvd.log" 2>&1 &
  kvd=$!
  for _ in $(seq 200); do [[ -n $(ls "$run"/*.sock 2>/dev/null) ]] && break; sleep 0.05; done
  sleep 1
  read -r kvd_rss_idle kvd_fds_idle kvd_threads_idle < <(status $kvd)
  ENABLE_NANOKV=1 NANOKV_IPC_NAME=$ipc NANOKV_TENANT=scale "$bin/nanokv_example_engine" --device 0 \
    --pages "$pages" --step 64 --rounds 1 --hold-ms 600000 --quiet --check-at-full-only >"$run/engine.log" 2>&1 &
  engine=$!
  # Full once kvd says the engine holds every page (kvctl reads its segment).
  full=0
  for _ in $(seq 1200); do
    used=$(NANOKV_RUN_DIR=$run "$bin/kvctl" tenants "$ipc" --json 2>/dev/null |
           python3 -c 'import json,sys; t=json.load(sys.stdin)["tenants"]; print(t[0]["used_bytes"] if t else 0)' 2>/dev/null)
    if [[ "${used:-0}" -ge $((pages * page)) ]]; then full=1; break; fi
    kill -0 $engine 2>/dev/null || break
    sleep 0.1
  done
  sleep 1
  read -r kvd_rss kvd_fds kvd_threads < <(status $kvd)
  read -r eng_rss eng_fds eng_threads < <(status $engine)
  kill -USR1 $engine 2>/dev/null; wait $engine; engine_rc=$?
  kill -TERM $kvd; wait $kvd
  printf '{"backend": "%s", "pages": %d, "engine_full": %d, "engine_rc": %d, "kvd_idle": {"rss_kb": %d, "fds": %d, "threads": %d}, "kvd_full": {"rss_kb": %d, "fds": %d, "threads": %d}, "engine_full_status": {"rss_kb": %d, "fds": %d, "threads": %d}}\n' \
    "$backend" "$pages" "$full" "$engine_rc" "$kvd_rss_idle" "$kvd_fds_idle" "$kvd_threads_idle" \
    "$kvd_rss" "$kvd_fds" "$kvd_threads" "$eng_rss" "$eng_fds" "$eng_threads"
  rm -rf "$run"
done
