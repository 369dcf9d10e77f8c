#!/usr/bin/env bash
# The house's rules, checked from the source (CI runs this; docs/ARCHITECTURE.md,
# "Layout", says why each holds):
#   1. the ground floor (base/, gpu/, ipc/, kernels/, ops/) includes nothing from the
#      floors above it (libkv/, daemon/, master/, entry/, kvctl/), and base/
#      includes nothing of ours but itself;
#   2. libkv/ (what engines link) includes nothing of daemon/, master/,
#      entry/, kvctl/, and its public headers include only public headers;
#   3. daemon/'s rooms include only rooms below them (config < node < objects,
#      controller < server, objects < cluster), never kvctl/, master/, entry/;
#      master/ (beside daemon/) includes none of daemon/, libkv/, kvctl/,
#      entry/, and its rooms only rooms below them (config, index < nodes <
#      routing < service); only entry/ (the kvd binary) sees both roles;
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

upper='libkv/|daemon/|master/|entry/|kvctl/|nanokv/(client|kv_tensor|kv_cache|layer_cache_handle|object_store|nanokv)\.h'
includes base "ipc/|gpu/|kernels/|ops/|$upper" "base/ includes nothing of ours above it"
for floor in gpu ipc kernels ops; do
  includes "$floor" "$upper" "$floor/ is ground floor: it may include base/ and its neighbours only"
done
includes libkv "daemon/|master/|entry/|kvctl/" "libkv/ (what engines link) may not include kvd's or kvctl's code"
includes libkv/include "[^n]|n[^a]" "a public header includes only nanokv/ headers"
includes daemon "kvctl/|master/|entry/" "kvd may not include kvctl/, master/ or entry/"
includes daemon/config "daemon/(node|objects|controller|server|cluster)/" "config/ is daemon's ground floor"
includes daemon/node "daemon/(objects|controller|server|cluster)/" "node/ may include config/ only"
includes daemon/objects "daemon/(controller|server|cluster)/" "objects/ may include node/ and config/"
includes daemon/controller "daemon/(objects|server|cluster)/" "controller/ may include node/ and config/"
includes daemon/server "daemon/(controller|cluster)/" "server/ may include objects/, node/ and config/"
includes daemon/cluster "daemon/(controller|server)/" "cluster/ may include objects/, node/ and config/"
includes master "daemon/|libkv/|kvctl/|entry/" "master/ stands beside daemon/: it may include base/, gpu/, ipc/, kernels/"
includes master/config "master/(election|index|nodes|routing|service)/" "master/config/ is the master's ground floor"
includes master/election "master/(config|index|nodes|routing|service)/" "master/election/ includes nothing else of master/"
includes master/index "master/(config|election|nodes|routing|service)/" "master/index/ includes nothing else of master/"
includes master/nodes "master/(config|election|routing|service)/" "master/nodes/ may include master/index/"
includes master/routing "master/(config|election|service)/" "master/routing/ may include master/nodes/ and master/index/"
includes kvctl "daemon/|master/|entry/" "kvctl/ reaches kvd and the master through their protocols only"

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
