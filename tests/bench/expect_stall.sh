#!/usr/bin/env bash
# expect_stall.sh REGEX COMMAND...
# Passes if COMMAND (an mpirun of a benchmark under a 1 s stall guard) exits with code 3 and
# some line of its output matches the extended regular expression REGEX (the guard's message).
# Exit code 4 passes too when the guard's line is there: the rank whose guard fired leaves with
# 3, and its peer, which sees that rank gone (the host's process watch), leaves with 4; mpirun
# reports whichever exit it registers first.
set -uo pipefail
regex=$1
shift
out=$("$@" 2>&1)
rc=$?
if [[ $rc != 3 && $rc != 4 ]] || ! printf '%s\n' "$out" | grep -Eq -- "$regex"; then
  echo "FAIL: exit code $rc (expected 3, or 4 from the peer) or no line matches: $regex"
  printf '%s\n' "$out"
  exit 1
fi
echo "stall guard: exit $rc with: $(printf '%s\n' "$out" | grep -E -- "$regex" | head -1)"
