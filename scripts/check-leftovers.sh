#!/usr/bin/env bash
# Fails, listing them, when the test suite left files behind: kvd state
# segments and page journals in /dev/shm (nanokv*), the tests' temporary
# directories (tests/integration/process_util.h, python/tests) and sockets in
# kvd's default run directory. Passing tests clean what they made, so run it
# after the suite (.ci/run does), while no kvd and no other suite runs on the
# machine: a live kvd's segment is listed too.
#
#   scripts/check-leftovers.sh
set -euo pipefail
shopt -s nullglob

tmp=${TMPDIR:-/tmp}
left=(/dev/shm/nanokv*
      "$tmp"/nanokv-test-* "$tmp"/nanokv_py_* "$tmp"/nanokv_decode_*
      /tmp/nanokv/*.sock)

if [ ${#left[@]} -eq 0 ]; then
  echo "check-leftovers: nothing left behind"
  exit 0
fi
echo "check-leftovers: the tests left ${#left[@]} file(s) behind:" >&2
ls -ld --time-style=+%H:%M:%S "${left[@]}" >&2
exit 1
