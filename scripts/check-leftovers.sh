#!/usr/bin/env bash
# Fails, listing them, when the test suite left files behind: kvd state
# segments in /dev/shm (nanokv*), the tests' temporary directories
# (tests/integration/process_util.h, python/tests), and sockets, locks and
# page journals in kvd's default run directories (base/naming.h). Passing tests clean what they made, so run it
# after the suite (.ci/run does), while no kvd and no other suite runs on the
# machine: a live kvd's segment is listed too.
#
#   scripts/check-leftovers.sh                  everything found is a leftover
#   scripts/check-leftovers.sh --record FILE    note what is there before a run
#   scripts/check-leftovers.sh --since FILE     only what is new since --record
# (.ci/run records first: a machine that ran suites before may hold files
# another run left, which are not this run's to answer for.)
set -euo pipefail
shopt -s nullglob
mode=${1:-}
record=${2:-}

tmp=${TMPDIR:-/tmp}
left=(/dev/shm/nanokv*
      "$tmp"/nanokv-test-* "$tmp"/nanokv_py_* "$tmp"/nanokv_decode_* "$tmp"/nanokv-install.*
      /run/nanokv/* /tmp/nanokv-[0-9]*/*)

if [ "$mode" = --record ]; then
  printf '%s\n' "${left[@]}" >"$record"
  echo "check-leftovers: ${#left[@]} file(s) there before the run"
  exit 0
fi
if [ "$mode" = --since ]; then
  new=()
  for f in "${left[@]}"; do grep -qxF -- "$f" "$record" || new+=("$f"); done
  left=("${new[@]}")
fi

if [ ${#left[@]} -eq 0 ]; then
  echo "check-leftovers: nothing left behind"
  exit 0
fi
echo "check-leftovers: the tests left ${#left[@]} file(s) behind:" >&2
ls -ld --time-style=+%H:%M:%S "${left[@]}" >&2
exit 1
