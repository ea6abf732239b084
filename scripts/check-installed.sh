#!/usr/bin/env bash
# Builds and runs tests/install/consumer against an installed NetSparse (prefix = $1), first
# through find_package(NetSparse), then through pkg-config, as a downstream user would; then
# builds examples/ standalone against the install and runs each example on 2 ranks.
set -euo pipefail
prefix=$(cd "$1" && pwd)
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cmake -S "$root/tests/install/consumer" -B "$work/cmake" -G Ninja \
  -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
ninja -C "$work/cmake" >/dev/null
LD_LIBRARY_PATH="$prefix/lib:${LD_LIBRARY_PATH:-}" "$work/cmake/consumer"
export PKG_CONFIG_PATH="$prefix/lib/pkgconfig:$prefix/lib/x86_64-linux-gnu/pkgconfig"
# shellcheck disable=SC2046
g++ -std=c++20 "$root/tests/install/consumer/main.cpp" -o "$work/pc-consumer" \
  $(pkg-config --cflags --libs netsparse) $(pkg-config --cflags --libs ompi)
LD_LIBRARY_PATH="$prefix/lib:${LD_LIBRARY_PATH:-}" "$work/pc-consumer"
# The real examples, built standalone against the install and run as a user would.
cmake -S "$root/examples" -B "$work/examples" -G Ninja -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
ninja -C "$work/examples" >/dev/null
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
for example in spmm_distributed rig_gather; do
  echo "--- example $example (mpirun -np 2, against the installed package)"
  LD_LIBRARY_PATH="$prefix/lib:${LD_LIBRARY_PATH:-}" \
    mpirun --oversubscribe --bind-to none -np 2 "$work/examples/$example"
done
echo "installed package OK (find_package, pkg-config, examples)"
