#!/usr/bin/env bash
# Runs netsparse_bench in small, bounded configurations and writes the JSON files bench/plot.py
# turns into figures in the style of the NetSparse paper:
#   fig12_<matrix>.json           every mode, K = 16 and 128        (Fig. 12: speedups over SU)
#   table8_<matrix>.json          the ablation ladder RIG -> +filter -> +coalesce -> +concat
#   fig15_<matrix>_b<BATCH>.json  RIG batch size sweep              (Fig. 15)
#   fig17_<matrix>_d<DELAY>.json  concatenation delay sweep, and _nocat without concatenation
#                                                                   (Fig. 17)
#   changing_<matrix>.json        changing sparsity (netsparse vs inspector-executor)
#
#   bench/sweep.sh [OUT_DIR]          (default bench-results)
# Environment:
#   NETSPARSE_BENCH   the binary (default build/native/bench/netsparse_bench)
#   NETSPARSE_NP      ranks (default 2)
#   NETSPARSE_DATA_DIR  where scripts/fetch-matrices.sh put the real matrices (used if present)
#   SWEEP_MATRICES    space-separated matrix specifications (default: NotreDame_www and mdual
#                     when fetched, gen:kron:16, gen:stencil:40:40:40:1)
#   SWEEP_ITERS       timed iterations per mode (default 3)
#   SWEEP_ROUNDS      rounds of every mode (default 1; netsparse_bench's own default is 5)
#   SWEEP_PARTS       which parts to run (default "fig12 table8 fig15 fig17 changing")
# Every run is a few seconds to a minute on a 2-core machine; the whole default sweep takes
# about 10-20 minutes there.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
out=${1:-bench-results}
mkdir -p "$out"
bench=${NETSPARSE_BENCH:-$root/build/native/bench/netsparse_bench}
np=${NETSPARSE_NP:-2}
iters=${SWEEP_ITERS:-3}
rounds=${SWEEP_ROUNDS:-1}
parts=${SWEEP_PARTS:-"fig12 table8 fig15 fig17 changing"}
data=${NETSPARSE_DATA_DIR:-$HOME/.cache/netsparse/matrices}
if [[ ! -x "$bench" ]]; then
  echo "sweep.sh: $bench not found; build the target netsparse_bench (or set NETSPARSE_BENCH)" >&2
  exit 2
fi
if [[ -z "${SWEEP_MATRICES:-}" ]]; then
  SWEEP_MATRICES=""
  [[ -f "$data/NotreDame_www.mtx" ]] && SWEEP_MATRICES+="$data/NotreDame_www.mtx "
  [[ -f "$data/mdual.graph" ]] && SWEEP_MATRICES+="$data/mdual.graph "
  SWEEP_MATRICES+="gen:kron:16 gen:stencil:40:40:40:1"
fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
run() {  # run OUT_FILE ARGS...
  local file=$1
  shift
  echo "sweep.sh: $file: $*" >&2
  mpirun --oversubscribe --bind-to none -np "$np" "$bench" --no-progress --iters "$iters" \
    --rounds "$rounds" --warmup 1 --json "$out/$file" "$@" >"$out/${file%.json}.txt"
}
name_of() {  # a file-name-safe name of a matrix specification
  local s=${1##*/}
  s=${s%.mtx}
  s=${s%.graph}
  echo "${s//:/_}"
}

for m in $SWEEP_MATRICES; do
  n=$(name_of "$m")
  for part in $parts; do
    case $part in
      fig12)
        run "fig12_$n.json" --matrix "$m" --K 16,128
        ;;
      table8)
        run "table8_$n.json" --matrix "$m" --K 16,128 --modes su,netsparse --ablation
        ;;
      fig15)
        # A batch is a run of nonzeros, as in the paper (the per-nonzero idx stream).
        for b in 256 1024 4096 16384 65536; do
          run "fig15_${n}_b$b.json" --matrix "$m" --K 16 --modes netsparse,su --batch "$b" \
            --rig-idx nonzeros
        done
        ;;
      fig17)
        # The per-nonzero idx stream gives the concatenation queues the most PRs to merge.
        run "fig17_${n}_nocat.json" --matrix "$m" --K 16 --modes netsparse,su --no-concat \
          --rig-idx nonzeros
        for d in 0 500 2000 10000 50000; do
          run "fig17_${n}_d$d.json" --matrix "$m" --K 16 --modes netsparse,su --delay-ns "$d" \
            --rig-idx nonzeros
        done
        ;;
      changing)
        run "changing_$n.json" --matrix "$m" --K 16 --changing-sparsity \
          --modes netsparse,inspector-executor,su,sa-opt
        ;;
      *)
        echo "sweep.sh: unknown part '$part'" >&2
        exit 2
        ;;
    esac
  done
done
echo "sweep.sh: JSON in $out; plot with: python3 bench/plot.py $out" >&2
