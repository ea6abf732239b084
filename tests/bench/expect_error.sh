#!/usr/bin/env bash
# expect_error.sh EXIT_CODE REGEX COMMAND...
# Runs COMMAND (an mpirun of netsparse_bench) and passes if, stdout and stderr together:
#   - it exited with EXIT_CODE,
#   - exactly one line starts with the program's name, $EXPECT_PROGRAM (default netsparse_bench):
#     one error line per job, not one per rank,
#     and that line matches the extended regular expression REGEX,
#   - nothing went through MPI_Abort (no "MPI_ABORT" / "ORTE_ERROR_LOG" in the output).
# mpirun's own note about a non-zero exit status is allowed.
set -uo pipefail
want=$1
regex=$2
shift 2
cmd="$*"
prog=${EXPECT_PROGRAM:-netsparse_bench}
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
lines=$(printf '%s\n' "$out" | grep -c "^$prog")
[[ $lines == 1 ]] || fail "$lines lines start with $prog, expected exactly 1"
printf '%s\n' "$out" | grep "^$prog" | grep -Eq -- "$regex" ||
  fail "the error line does not match: $regex"
if printf '%s\n' "$out" | grep -Eq 'MPI_ABORT|ORTE_ERROR_LOG'; then
  fail "the job went through MPI_Abort"
fi
printf '%s\n' "$out" | grep "^$prog"
echo "OK: exit code $rc, one error line"
