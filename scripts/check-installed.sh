#!/usr/bin/env bash
# Checks an installed NetSparse (prefix = $1) the way downstream users consume it:
#   1. find_package(NetSparse) from three projects: C + C++ (tests/install/consumer), C++ only
#      (consumer_cxx: project(x CXX), no C compiler) and C only (consumer_c: project(x C)); the
#      C++ ones set no C++ standard (the exported target carries cxx_std_20);
#   2. pkg-config: a C++ program built with `pkg-config --cflags --libs netsparse` and no -std of
#      its own (Cflags carry -std=c++20), a C program with netsparse-c; Libs carry an rpath;
#   3. the installed netsparse_info runs;
#   4. examples/ built standalone against the install, each run on 2 ranks.
# Every program runs WITHOUT LD_LIBRARY_PATH: the rpath CMake records, and the one netsparse.pc
# carries, must find libnetsparse.so.
set -euo pipefail
prefix=$(cd "$1" && pwd)
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
run() { env -u LD_LIBRARY_PATH "$@"; }  # run without LD_LIBRARY_PATH

for consumer in consumer consumer_cxx consumer_c; do
  echo "--- find_package(NetSparse) from tests/install/$consumer"
  cmake -S "$root/tests/install/$consumer" -B "$work/$consumer" -G Ninja \
    -DCMAKE_PREFIX_PATH="$prefix" >"$work/$consumer.log" 2>&1 || { cat "$work/$consumer.log"; exit 1; }
  ninja -C "$work/$consumer" >/dev/null
  run "$work/$consumer/$consumer"
done

echo "--- pkg-config --libs netsparse (with its rpath)"
export PKG_CONFIG_PATH="$prefix/lib/pkgconfig:$prefix/lib/x86_64-linux-gnu/pkgconfig"
libs=$(pkg-config --libs netsparse)
if [[ " $libs " != *" -Wl,-rpath,"* ]]; then
  echo "pkg-config --libs netsparse has no rpath: $libs" >&2
  exit 1
fi
# No -std here: the C++20 the headers need must come from `pkg-config --cflags netsparse`.
cflags=$(pkg-config --cflags netsparse)
if [[ " $cflags " != *" -std=c++20 "* ]]; then
  echo "pkg-config --cflags netsparse does not carry -std=c++20: $cflags" >&2
  exit 1
fi
# shellcheck disable=SC2046
g++ "$root/tests/install/consumer/main.cpp" -o "$work/pc-consumer" \
  $(pkg-config --cflags --libs netsparse)  # MPI's flags come with it (Requires: ompi-cxx)
run "$work/pc-consumer"
echo "--- pkg-config --libs netsparse-c (a C program)"
# shellcheck disable=SC2046
gcc -std=c11 -Werror "$root/tests/install/consumer_c/main.c" -o "$work/pc-consumer-c" \
  $(pkg-config --cflags --libs netsparse-c)  # MPI's flags come with it (Requires: ompi-c)
run "$work/pc-consumer-c"

echo "--- netsparse_info (installed): the features and the configuration table"
run "$prefix/bin/netsparse_info" | sed -n 1,6p
run "$prefix/bin/netsparse_info" --markdown >/dev/null

# The real examples, built standalone against the install and run as a user would.
cmake -S "$root/examples" -B "$work/examples" -G Ninja -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
ninja -C "$work/examples" >/dev/null
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
for example in spmm_distributed rig_gather gcn_train; do
  echo "--- example $example (mpirun -np 2, against the installed package)"
  run mpirun --oversubscribe --bind-to none -np 2 "$work/examples/$example"
done
# The Python package, when it was built: the README's example from the installed package.
pydir=$(find "$prefix" -path '*/site-packages/netsparse/__init__.py' -printf '%h\n' 2>/dev/null |
  head -1)
if [[ -n "$pydir" ]]; then
  echo "--- Python: the README example, PYTHONPATH=$(dirname "$pydir") (mpirun -np 2)"
  # The python3 with numpy, scipy and mpi4py (as python/CMakeLists.txt picks it).
  python=""
  for candidate in python3 /usr/bin/python3; do
    if "$candidate" -c "import numpy, scipy, mpi4py" 2>/dev/null; then
      python=$candidate
      break
    fi
  done
  run env PYTHONPATH="$(dirname "$pydir")" PYTHONDONTWRITEBYTECODE=1 \
    mpirun --oversubscribe --bind-to none -np 2 "${python:?no python3 with numpy, scipy, mpi4py}" \
    "$root/tests/python/run_readme_example.py" "$root/README.md"
fi
echo "installed package OK (find_package from C + C++, C++-only and C-only projects with no" \
  "C++ standard of their own; pkg-config with rpath; examples; Python; no LD_LIBRARY_PATH)"
