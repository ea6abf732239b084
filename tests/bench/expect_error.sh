#!/usr/bin/env bash
# expect_error.sh EXIT_CODE REGEX COMMAND...
# Runs COMMAND (an mpirun of netsparse_bench) and passes if, stdout and stderr together:
#   - it exited with EXIT_CODE,
#   - exactly one line starts with "netsparse_bench" (one error line per job, not one per rank),
#     and that line matches the extended regular expression REGEX,
#   - nothing went through MPI_Abort (no "MPI_ABORT" / "ORTE_ERROR_LOG" in the output).
# mpirun's own note about a non-zero exit status is allowed.
set -uo pipefail
want=$1
regex=$2
shift 2
cmd="$*"
out=$("$@" 2>&1)
rc=$?
fail() {
  echo "FAIL: $1"
  echo "--- command: $cmd"
  echo "--- output:"
  printf '%s\n' "$out"
  exit 1
}
[[ $rc == "$want" ]] || fail "exit code $rc, expected $want"
lines=$(printf '%s\n' "$out" | grep -c '^netsparse_bench')
[[ $lines == 1 ]] || fail "$lines lines start with netsparse_bench, expected exactly 1"
printf '%s\n' "$out" | grep '^netsparse_bench' | grep -Eq -- "$regex" ||
  fail "the error line does not match: $regex"
if printf '%s\n' "$out" | grep -Eq 'MPI_ABORT|ORTE_ERROR_LOG'; then
  fail "the job went through MPI_Abort"
fi
printf '%s\n' "$out" | grep '^netsparse_bench'
echo "OK: exit code $rc, one error line"
