#!/usr/bin/env bash
# The house's rules, checked from the source (CI runs this; docs/ARCHITECTURE.md,
# "Layout", says why each holds):
#   1. the ground floor (base/, gpu/, ipc/, kernels/) includes nothing from the
#      floors above it (libkv/, daemon/, master/, kvctl/), and base/ includes
#      nothing of ours but itself;
#   2. libkv/ (what engines link) includes nothing of daemon/, master/, kvctl/,
#      and its public headers include only public headers;
#   3. daemon/'s rooms include only rooms below them (config < node < objects,
#      controller < server), never kvctl/ or master/; master/, beside daemon/,
#      never includes daemon/ or kvctl/;
#   4. no source file is over 600 lines, but the two one-platform backends.
# Prints every breach as file:line: what, and exits 1 if there is one.
set -uo pipefail
cd "$(dirname "$0")/.."

fail=0
breach() { echo "check-structure: $*"; fail=1; }

# includes FOLDER PATTERN WHAT: every #include "..." under FOLDER matching PATTERN.
includes() {
  local folder=$1 pattern=$2 what=$3 hit
  while IFS= read -r hit; do
    [ -n "$hit" ] && breach "$hit: $what"
  done < <(git ls-files -- "$folder" | grep -E '\.(c|cc|h|cu|cuh)$' |
           xargs -r grep -nE "^[[:space:]]*#[[:space:]]*include[[:space:]]+\"($pattern)" /dev/null)
}

upper='libkv/|daemon/|master/|kvctl/|nanokv/(client|kv_tensor|kv_cache|layer_cache_handle|object_store|nanokv)\.h'
includes base "ipc/|gpu/|kernels/|$upper" "base/ includes nothing of ours above it"
for floor in gpu ipc kernels; do
  includes "$floor" "$upper" "$floor/ is ground floor: it may include base/ and its neighbours only"
done
includes libkv "daemon/|master/|kvctl/" "libkv/ (what engines link) may not include kvd's or kvctl's code"
includes libkv/include "[^n]|n[^a]" "a public header includes only nanokv/ headers"
includes daemon "kvctl/|master/" "kvd may not include kvctl/ or master/"
includes master "daemon/|kvctl/" "master/ stands beside daemon/: it may not include kvd's or kvctl's code"
includes daemon/config "daemon/(node|objects|controller|server)/" "config/ is daemon's ground floor"
includes daemon/node "daemon/(objects|controller|server)/" "node/ may include config/ only"
includes daemon/objects "daemon/(controller|server)/" "objects/ may include node/ and config/"
includes daemon/controller "daemon/(objects|server)/" "controller/ may include node/ and config/"

# Rule 4: file length. The cuda and hip backends are one platform's driver
# calls each, long by nature and read beside each other.
while read -r lines file; do
  case "$file" in
    gpu/cuda_backend.cc|gpu/hip_backend.cc|total) continue ;;
  esac
  [ "$lines" -gt 600 ] && breach "$file: $lines lines (at most 600 outside gpu/{cuda,hip}_backend.cc)"
done < <(git ls-files | grep -E '\.(c|cc|h|cu|cuh|py|sh)$' | xargs wc -l)

if [ "$fail" -eq 0 ]; then
  echo "check-structure: ok ($(git ls-files | grep -cE '\.(c|cc|h|cu|cuh|py|sh)$') source files)"
fi
exit "$fail"
