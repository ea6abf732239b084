#!/usr/bin/env bash
# expect_survivors_exit.sh RECOVERY NP VICTIM KILL_AFTER_S BOUND_S CODE MPIRUN... -- PROGRAM [ARGS...]
#
# A peer's death must end the job: runs `MPIRUN -np NP PROGRAM ARGS` with each rank under a small
# wrapper (this script again, as `--rank`); rank VICTIM SIGKILLs itself KILL_AFTER_S seconds
# after it starts, mid-run. RECOVERY 1 runs mpirun with orte_enable_recovery (the survivors
# stay alive and must leave on their own), 0 without (mpirun kills the job).
# Passes when
#   - mpirun returns within KILL_AFTER_S + BOUND_S + 20 s of start-up slack (`timeout` is the
#     hang detector: a timeout fails);
#   - with RECOVERY 1: every survivor's program exited with CODE, at most BOUND_S after the
#     victim died (each wrapper records its rank's exit code and time);
#   - with RECOVERY 0: mpirun's exit code is not 0 (the job failed, and said so);
#   - and no rank's process is left running afterwards (the wrappers record the pids).
set -uo pipefail

if [[ ${1:-} == --rank ]]; then
  dir=$2 victim=$3 kill_after=$4
  shift 4
  rank=${OMPI_COMM_WORLD_RANK:?not started by mpirun}
  if [[ $rank == "$victim" ]]; then
    echo $$ >"$dir/pid.$rank"
    # $$ is this shell, which exec turns into the benchmark: the subshell kills the benchmark.
    (sleep "$kill_after" && date +%s.%N >"$dir/killed" && kill -KILL $$) &
    exec "$@"
  fi
  "$@" &
  pid=$!
  echo "$pid" >"$dir/pid.$rank"
  wait "$pid"
  rc=$?
  echo "$rc $(date +%s.%N)" >"$dir/rc.$rank"
  exit "$rc"
fi

recovery=$1 np=$2 victim=$3 kill_after=$4 bound=$5 code=$6
shift 6
mpirun=()
while [[ $# -gt 0 && $1 != -- ]]; do
  mpirun+=("$1")
  shift
done
shift  # --
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
mca=()
[[ $recovery == 1 ]] && mca=(--mca orte_enable_recovery 1)
limit=$(awk -v a="$kill_after" -v b="$bound" 'BEGIN { print a + b + 20 }')
start=$(date +%s.%N)
timeout -k 5 "$limit" "${mpirun[@]}" "${mca[@]}" -np "$np" bash "$0" --rank "$dir" "$victim" \
  "$kill_after" "$@" >"$dir/out" 2>&1
mpirun_rc=$?
end=$(date +%s.%N)
fail=0
say() { echo "$*"; }
# timeout returns 124, or 137 when it had to SIGKILL; mpirun itself may return 137 for the
# SIGKILLed victim: the elapsed time tells them apart.
if [[ $mpirun_rc == 124 ]] || awk -v s="$start" -v e="$end" -v l="$limit" 'BEGIN { exit !(e - s >= l) }'; then
  say "FAIL: the job did not end within $limit s (timeout)"
  fail=1
fi
if [[ ! -f $dir/killed ]]; then
  say "FAIL: the victim (rank $victim) was never killed: the run ended before $kill_after s"
  fail=1
fi
killed=$(cat "$dir/killed" 2>/dev/null || echo "$start")
if [[ $recovery == 1 ]]; then
  for ((r = 0; r < np; ++r)); do
    [[ $r == "$victim" ]] && continue
    if [[ ! -f $dir/rc.$r ]]; then
      say "FAIL: survivor rank $r never exited"
      fail=1
      continue
    fi
    read -r rc at <"$dir/rc.$r"
    after=$(awk -v a="$at" -v k="$killed" 'BEGIN { printf "%.1f", a - k }')
    if [[ $rc != "$code" ]]; then
      say "FAIL: survivor rank $r exited with $rc (expected $code), $after s after the kill"
      fail=1
    elif awk -v x="$after" -v b="$bound" 'BEGIN { exit !(x > b) }'; then
      say "FAIL: survivor rank $r exited $after s after the kill (bound $bound s)"
      fail=1
    else
      say "survivor rank $r: exit $rc, $after s after the kill"
    fi
  done
elif [[ $mpirun_rc == 0 ]]; then
  say "FAIL: mpirun returned 0 after a rank was killed"
  fail=1
fi
sleep 1
for f in "$dir"/pid.*; do
  [[ -f $f ]] || continue
  pid=$(cat "$f")
  # A zombie (exited, its parent gone and not yet reaped) counts as gone.
  state=$(awk '{ print $3 }' "/proc/$pid/stat" 2>/dev/null)
  if [[ -n $state && $state != Z ]]; then
    say "FAIL: rank ${f##*.}'s process $pid is still running after mpirun returned (state $state)"
    kill -KILL "$pid" 2>/dev/null
    fail=1
  fi
done
took=$(awk -v a="$end" -v k="$killed" 'BEGIN { printf "%.1f", a - k }')
say "mpirun returned $mpirun_rc, $took s after the kill (recovery $recovery)"
if [[ $fail != 0 ]]; then
  echo "---- output"
  tail -n 40 "$dir/out"
  exit 1
fi
echo "PASS"
