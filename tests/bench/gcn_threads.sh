#!/usr/bin/env bash
# bench_gcn's OpenMP threads per rank (examples/gcn_train.cpp, choose_threads): asked for far more
# threads than the host has cores (OMP_NUM_THREADS=64), the ranks of this host together get no
# more threads than cores (at least one each); --threads 3 is taken as given. The header line
# "N ranks (L on this host of C cores) x T OpenMP threads" is what is checked.
# Usage: gcn_threads.sh MPIRUN... -- BENCH_GCN
set -uo pipefail
mpirun=()
while [[ $1 != -- ]]; do mpirun+=("$1"); shift; done
shift
gcn=$1
fail=0
header() {  # prints "L C T" from a run's header line
  local out
  out=$("${mpirun[@]}" -np 2 -x OMP_NUM_THREADS=64 "$gcn" --matrix gen:kron:6 --epochs 1 \
    --mode su --no-curve "$@" 2>&1) || { echo "FAIL: bench_gcn $* exited $?: $out" >&2; return 1; }
  sed -nE 's/.*ranks \(([0-9]+) on this host of ([0-9]+) cores\) x ([0-9]+) OpenMP threads.*/\1 \2 \3/p' \
    <<<"$out"
}
read -r local cores threads < <(header) || true
if [[ -z ${threads:-} ]]; then
  echo "FAIL: no header line with the threads"
  fail=1
elif ((threads < 1 || (local * threads > cores && threads > 1))); then
  echo "FAIL: $local ranks on $cores cores got $threads OpenMP threads each"
  fail=1
else
  echo "capped: $local ranks on $cores cores, $threads OpenMP thread(s) each"
fi
read -r _ _ forced < <(header --threads 3) || true
if [[ ${forced:-} != 3 ]]; then
  echo "FAIL: --threads 3 gave '${forced:-nothing}'"
  fail=1
fi
((fail == 0)) && echo "gcn threads: PASS"
exit "$fail"
