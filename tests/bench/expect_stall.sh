#!/usr/bin/env bash
# expect_stall.sh REGEX COMMAND...
# Passes if COMMAND (an mpirun of a benchmark under a 1 s stall guard) exits with code 3 and
# some line of its output matches the extended regular expression REGEX (the guard's message).
set -uo pipefail
regex=$1
shift
out=$("$@" 2>&1)
rc=$?
if [[ $rc != 3 ]] || ! printf '%s\n' "$out" | grep -Eq -- "$regex"; then
  echo "FAIL: exit code $rc (expected 3) or no line matches: $regex"
  printf '%s\n' "$out"
  exit 1
fi
echo "stall guard: exit 3 with: $(printf '%s\n' "$out" | grep -E -- "$regex" | head -1)"
