#!/usr/bin/env bash
# The format of what a branch changed (CI runs this): every C, C++ and CUDA
# line changed since BASE must be as clang-format writes it under the tree's
# .clang-format. Only changed lines: the tree is older than .clang-format,
# and re-formatting lines nobody touched would bury their history.
# Usage: check-format.sh [BASE]   BASE defaults to where HEAD left main
#   (origin/main, else main); on main itself, to HEAD's parent.
# Prints the diff clang-format wants and exits 1 if there is one;
# `git clang-format BASE` applies it.
set -euo pipefail
cd "$(dirname "$0")/.."

command -v git-clang-format >/dev/null && command -v clang-format >/dev/null || {
  echo "check-format: clang-format is missing (scripts/install-deps.sh installs it)" >&2
  exit 1
}
base=${1:-}
if [ -z "$base" ]; then
  for ref in origin/main main; do
    if git rev-parse -q --verify "$ref^{commit}" >/dev/null; then
      base=$(git merge-base HEAD "$ref" 2>/dev/null || true)  # a shallow clone may not know
      [ -n "$base" ] && break
    fi
  done
  if [ -z "$base" ] || [ "$base" = "$(git rev-parse HEAD)" ]; then
    base=$(git rev-parse -q --verify 'HEAD~1^{commit}' || true)
  fi
fi
if [ -z "$base" ]; then
  echo "check-format: nothing to compare with (a single commit, no main)"
  exit 0
fi
# git-clang-format 14 exits 0 whether or not it wants changes: read its output.
wanted=$(git clang-format --binary "$(command -v clang-format)" --diff --extensions c,cc,h,cu,cuh "$base" -- || true)
if grep -q '^diff --git' <<< "$wanted"; then
  echo "$wanted"
  echo "check-format: lines changed since $(git rev-parse --short "$base") are not as .clang-format writes them" \
       "(git clang-format $(git rev-parse --short "$base") fixes them)"
  exit 1
fi
echo "check-format: ok (lines changed since $(git rev-parse --short "$base"))"
