#!/usr/bin/env bash
# `make install` into a temporary prefix, checked as a user would use it:
# the files are there (binaries, libraries, headers, find_package and
# pkg-config files, the Python package, configs, units with this prefix's
# paths, each unit passing `systemd-analyze verify` and naming files that were
# installed); an engine outside the tree builds against it with find_package
# at CMake's default C++ standard (the targets must carry C++20) and with
# pkg-config (C++ and the C ABI); the installed kvd runs and the three
# programs and the installed Python package attach to it. Leaves nothing.
# Usage: install_test.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$1 source=$2
work=$(mktemp -d "${TMPDIR:-/tmp}/nanokv-install.XXXXXX")
prefix=$work/prefix ipc=install_test_$$ kvd_pid=""
cleanup() {
  if [ -n "$kvd_pid" ] && kill -0 "$kvd_pid" 2>/dev/null; then kill -TERM "$kvd_pid"; wait "$kvd_pid" || true; fi
  rm -rf "$work" "/dev/shm/nanokv_$ipc" "/dev/shm/nanokv-pages_$ipc"
}
trap cleanup EXIT
fail() { echo "install_test: FAIL: $*" >&2; exit 1; }

cmake --install "$build" --prefix "$prefix" > "$work/install.log" || { cat "$work/install.log"; fail "cmake --install"; }
libdir=$(sed -n 's/^libdir=${prefix}\///p' "$prefix"/lib*/pkgconfig/nanokv.pc 2>/dev/null | head -1)
[ -n "$libdir" ] || fail "no nanokv.pc under $prefix/lib*/pkgconfig"
for f in bin/kvd bin/kvctl bin/kvtop "$libdir/libnanokv.so" "$libdir/libnanokv_client.a" include/nanokv/client.h \
         include/nanokv/status.h include/nanokv/nanokv.h "$libdir/cmake/nanokv/nanokvConfig.cmake" \
         "$libdir/pkgconfig/nanokv-c.pc" lib/python3/dist-packages/nanokv/__init__.py \
         lib/python3/dist-packages/nanokv/libnanokv.so etc/nanokv/kvd.yaml etc/nanokv/master.yaml \
         share/nanokv/configs/demo.yaml \
         share/nanokv/grafana/nanokv-dashboard.json lib/systemd/system/kvd.service \
         lib/systemd/system/kvd-master.service share/doc/nanokv/OPERATIONS.md; do
  [ -e "$prefix/$f" ] || fail "$f was not installed"
done
grep -qx "ExecStart=$prefix/bin/kvd --config $prefix/etc/nanokv/kvd.yaml" "$prefix/lib/systemd/system/kvd.service" ||
  fail "kvd.service does not start this prefix's kvd: $(grep ExecStart "$prefix/lib/systemd/system/kvd.service")"
grep -q "^LimitNOFILE=" "$prefix/lib/systemd/system/kvd.service" || fail "kvd.service sets no LimitNOFILE"
# Every unit as systemd reads it (its keys, its ExecStart executable), and
# every file it names (the binary, --config, Documentation=file:) installed.
command -v systemd-analyze >/dev/null || fail "systemd-analyze is missing (scripts/install-deps.sh installs systemd)"
for unit in "$prefix"/lib/systemd/system/*.service; do
  systemd-analyze verify "$unit" > "$work/verify.log" 2>&1 || { cat "$work/verify.log"; fail "systemd-analyze verify $unit"; }
  if [ -s "$work/verify.log" ]; then cat "$work/verify.log"; fail "systemd-analyze verify $unit warned"; fi
  for path in $(grep -E '^(ExecStart|Documentation)=' "$unit" | grep -oE "$prefix/[^ ]+"); do
    [ -e "$path" ] || fail "$(basename "$unit") names $path, which was not installed"
  done
done
"$prefix/bin/kvd" --version | grep -q "^kvd $("$prefix/bin/kvctl" --version | cut -d' ' -f2) (commit " ||
  fail "kvd --version and kvctl --version disagree"
# No header outside nanokv/ leaks in: the public headers include only each other.
if grep -h '#include "' "$prefix"/include/nanokv/*.h | grep -v '#include "nanokv/'; then fail "a public header includes a private one"; fi

# The outside engine, with find_package and no C++ standard of its own...
cmake -S "$source/tests/install/outside" -B "$work/outside" -DCMAKE_PREFIX_PATH="$prefix" \
  -DCMAKE_BUILD_TYPE=Release > "$work/outside.log" 2>&1 || { cat "$work/outside.log"; fail "find_package(nanokv)"; }
cmake --build "$work/outside" -j2 >> "$work/outside.log" 2>&1 || { cat "$work/outside.log"; fail "building with find_package"; }
# ...and with pkg-config, C++ (pkg-config cannot carry a language standard:
# its users pass C++20 themselves, docs/OPERATIONS.md) and C.
export PKG_CONFIG_PATH="$prefix/$libdir/pkgconfig"
g++ -std=c++20 -O1 -o "$work/engine_pc" "$source/tests/install/outside/engine.cc" $(pkg-config --cflags --libs nanokv) ||
  fail "building with pkg-config nanokv"
gcc -std=c11 -o "$work/engine_c" "$source/tests/install/outside/engine.c" $(pkg-config --cflags --libs nanokv-c) ||
  fail "building with pkg-config nanokv-c"

# The installed kvd, and everything attached to it.
mkdir -p "$work/run"
export NANOKV_RUN_DIR=$work/run ENABLE_NANOKV=1 NANOKV_IPC_NAME=$ipc
"$prefix/bin/kvd" --backend host --ipc-name "$ipc" --capacity 32MiB --host-device-memory 128MiB \
  --reserve-pages 2 > "$work/kvd.log" 2>&1 &
kvd_pid=$!
for _ in $(seq 200); do
  grep -q "kvd: ready" "$work/kvd.log" && break
  kill -0 "$kvd_pid" 2>/dev/null || { cat "$work/kvd.log"; fail "the installed kvd exited"; }
  sleep 0.05
done
grep -q "kvd: ready" "$work/kvd.log" || { cat "$work/kvd.log"; fail "the installed kvd never got ready"; }
NANOKV_TENANT=cmake "$work/outside/outside_engine" | grep -q "^outside: tenant cmake mapped 4 pages" ||
  fail "the find_package engine did not run"
NANOKV_TENANT=pkgconfig "$work/engine_pc" | grep -q "^outside: tenant pkgconfig mapped 4 pages" ||
  fail "the pkg-config engine did not run"
NANOKV_TENANT=c "$work/engine_c" | grep -q "^outside-c: mapped 2 pages" || fail "the C engine did not run"
env -u NANOKV_LIBRARY PYTHONPATH="$prefix/lib/python3/dist-packages" python3 -c "
import nanokv, nanokv._lib as loaded
assert loaded.path.startswith('$prefix'), loaded.path
c = nanokv.Client.from_env()
assert len(c.grant(2)) == 2
print('python: attached through', loaded.path)" || fail "the installed Python package"
"$prefix/bin/kvctl" --run-dir "$work/run" list | grep -q "$ipc" || fail "the installed kvctl does not list the kvd"
kill -TERM "$kvd_pid"
wait "$kvd_pid" || { cat "$work/kvd.log"; fail "kvd did not stop cleanly"; }
kvd_pid=""
echo "install_test: ok: installed into a prefix, built outside with find_package and pkg-config, ran against the installed kvd"
