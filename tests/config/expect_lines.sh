#!/usr/bin/env bash
# expect_lines.sh EXIT_CODE COUNT:REGEX [COUNT:REGEX...] -- COMMAND...
# Runs COMMAND and passes if it exited with EXIT_CODE and, in its stdout and stderr together,
# exactly COUNT lines match each extended regular expression REGEX (COUNT+ : at least COUNT).
# For the warnings that must come once per job or once per process, not once per rank or call.
set -uo pipefail
want=$1
shift
checks=()
while [[ $# -gt 0 && $1 != -- ]]; do
  checks+=("$1")
  shift
done
shift  # --
cmd="$*"
out=$("$@" 2>&1)
rc=$?
fail() {
  echo "FAIL: $1"
  echo "--- command: $cmd"
  echo "--- output:"
  printf '%s\n' "$out" | tail -60
  exit 1
}
[[ $rc == "$want" ]] || fail "exit code $rc, expected $want"
for check in "${checks[@]}"; do
  count=${check%%:*} regex=${check#*:}
  got=$(printf '%s\n' "$out" | grep -cE -- "$regex")
  if [[ $count == *+ ]]; then
    ((got >= ${count%+})) || fail "$got lines match '$regex', expected at least ${count%+}"
  else
    ((got == count)) || fail "$got lines match '$regex', expected $count"
  fi
  printf '%s\n' "$out" | grep -E -- "$regex" | head -3
done
echo "expect_lines: PASS"
