#!/usr/bin/env bash
# The scale sweep (issue 34): netsparse_bench from 2 to 128 ranks on virtual hosts, every mode
# that matters at scale, one JSON per layout; then bench/plot.py prints and draws the scale
# table (per mode and np: messages per iteration per rank (max, mean) and per host pair, inter-host
# messages and bytes, control messages, MPI collectives per run, engine open, setup, first run,
# RSS per rank, rings per rank).
#
#   bench/scale.sh [OUT_DIR]        (default bench-results/scale)
#
# One machine stands in for the cluster: NETSPARSE_RANKS_PER_HOST cuts the job into virtual
# hosts of consecutive ranks; what crosses a virtual host goes through MPI (the inter-host path:
# lib/transport/shm_rings.cpp, topology.hpp). Counts (messages, bytes, collectives, rings, RSS)
# are exact whatever the machine; times are indicative only once ranks outnumber the cores (the
# table marks them so). On a real cluster leave SCALE_LAYOUTS' ranks-per-host at 0 (discovered
# hosts) and launch with the job's own mpirun options (SCALE_MPIRUN).
# Environment:
#   NETSPARSE_BENCH  the binary (default build/release/bench/netsparse_bench, else build/native)
#   SCALE_LAYOUTS    "np:ranks_per_host ..." (default "2:2 4:4 8:8 16:16 32:16 64:8 128:16";
#                    ranks_per_host 0 = the real hosts)
#   SCALE_MATRIX     matrix below 128 ranks (default gen:kron:16); SCALE_MATRIX_LARGE from 128
#                    ranks (default gen:kron:17)
#   SCALE_MODES      (default netsparse,netsparse-rank,inspector-executor,node-aware-ie,ideal)
#   SCALE_K (16), SCALE_ITERS (3), SCALE_WARMUP (2: the run that records the plans and the one
#   that arms their owners; the steady state is what is timed and counted), SCALE_ROUNDS (1),
#   SCALE_MPIRUN (mpirun --oversubscribe
#   --bind-to none), SCALE_TIMEOUT per run in seconds (1800)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
out=${1:-bench-results/scale}
mkdir -p "$out"
bench=${NETSPARSE_BENCH:-}
if [[ -z "$bench" ]]; then
  for b in "$root/build/release/bench/netsparse_bench" "$root/build/native/bench/netsparse_bench"; do
    [[ -x "$b" ]] && { bench=$b; break; }
  done
fi
if [[ ! -x "${bench:-}" ]]; then
  echo "scale.sh: netsparse_bench not found; build it (or set NETSPARSE_BENCH)" >&2
  exit 2
fi
layouts=${SCALE_LAYOUTS:-"2:2 4:4 8:8 16:16 32:16 64:8 128:16"}
matrix=${SCALE_MATRIX:-gen:kron:16}
matrix_large=${SCALE_MATRIX_LARGE:-gen:kron:17}
modes=${SCALE_MODES:-netsparse,netsparse-rank,inspector-executor,node-aware-ie,ideal}
read -r -a mpirun <<<"${SCALE_MPIRUN:-mpirun --oversubscribe --bind-to none}"
cores=$(nproc --all)  # not nproc: it honours OMP_NUM_THREADS
failed=0
for layout in $layouts; do
  np=${layout%%:*}
  rph=${layout##*:}
  m=$matrix
  ((np >= 128)) && m=$matrix_large
  json="$out/scale_np${np}_rph${rph}.json"
  env=(OMP_NUM_THREADS=1)
  pass=(-x OMP_NUM_THREADS)
  if ((rph > 0)); then
    env+=(NETSPARSE_RANKS_PER_HOST="$rph")
    pass+=(-x NETSPARSE_RANKS_PER_HOST)
  fi
  echo "=== np $np, ranks per host ${rph/#0/real}, $m ($(uptime | sed 's/.*load average: //'))"
  t0=$SECONDS
  if ! env "${env[@]}" timeout "${SCALE_TIMEOUT:-1800}" "${mpirun[@]}" -np "$np" "${pass[@]}" \
      "$bench" --matrix "$m" --K "${SCALE_K:-16}" --iters "${SCALE_ITERS:-3}" --warmup "${SCALE_WARMUP:-2}" \
      --rounds "${SCALE_ROUNDS:-1}" --modes "$modes" --no-progress --json "$json" >"$out/scale_np${np}_rph${rph}.log" 2>&1; then
    echo "    FAILED (log: $out/scale_np${np}_rph${rph}.log)"
    tail -5 "$out/scale_np${np}_rph${rph}.log" | sed 's/^/    /'
    failed=$((failed + 1))
    continue
  fi
  echo "    done in $((SECONDS - t0)) s$( ((np > cores)) && echo " (oversubscribed: $np ranks on $cores cores, times indicative)")"
done
python3 "$root/bench/plot.py" --scale-cores "$cores" "$out" -o "$out" | sed -n '/^scale/,$p'
((failed == 0))
