#!/usr/bin/env bash
# The main job, from a fresh Debian 12 machine (as root): installs what is missing, builds an
# optimized NetSparse for this CPU, and runs the comparison benchmark under mpirun on the
# built-in default workload (a generated Kronecker graph, every communication mode side by
# side). Extra arguments go to the benchmark: see `netsparse_bench --help`.
#   NETSPARSE_NP   ranks (default 2)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
bash scripts/install-deps.sh --main  # the main job's packages only (the test command: all)
build="$root/build/native"
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DNETSPARSE_ARCH=native \
  -DNETSPARSE_BUILD_TESTS=OFF -DNETSPARSE_BUILD_PYTHON=OFF >/dev/null
ninja -C "$build" -j "${NETSPARSE_JOBS:-2}" netsparse_bench
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
np=${NETSPARSE_NP:-2}
exec mpirun --oversubscribe --bind-to none -np "$np" "$build/bench/netsparse_bench" "$@"
