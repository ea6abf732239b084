#!/usr/bin/env bash
# Installs (as root, via apt) only the Debian 12 packages NetSparse needs that are missing.
# Idempotent: a second run installs nothing and takes about a second.
#   scripts/install-deps.sh            build + test dependencies (everything)
#   scripts/install-deps.sh --main     only what the main job needs (scripts/main-job.sh): the
#                                      library and netsparse_bench, without the test, Python,
#                                      PyTorch, PETSc, Trilinos, CombBLAS and clang packages (the
#                                      petsc, tpetra and combblas modes are then absent; the full
#                                      set adds them)
#   scripts/install-deps.sh --vm       also what the soft-RoCE QEMU guest needs
set -euo pipefail

main_pkgs=(
  build-essential g++ cmake ninja-build pkg-config ca-certificates
  libibverbs-dev rdma-core ibverbs-providers
  libopenmpi-dev openmpi-bin
  libeigen3-dev libbenchmark-dev zlib1g-dev
  libcli11-dev nlohmann-json3-dev libmetis-dev libblas-dev libopenblas0-openmp
)

pkgs=(
  build-essential g++ cmake ninja-build pkg-config git ca-certificates ccache
  libibverbs-dev rdma-core ibverbs-providers ibverbs-utils
  libopenmpi-dev openmpi-bin
  libeigen3-dev libgtest-dev libgmock-dev libbenchmark-dev
  zlib1g-dev
  # the benchmarks' and tools' command lines and JSON (bench/common, lib JSON writers)
  libcli11-dev nlohmann-json3-dev
  clang clang-format libclang-rt-14-dev libomp-dev
  python3 python3-matplotlib
  # the Python module (python/) and its tests; PETSc interop (include/netsparse/petsc.hpp)
  pybind11-dev python3-dev python3-numpy python3-scipy python3-mpi4py python3-pytest
  python3-torch petsc-dev
  # Trilinos Tpetra (CrsMatrix::apply with its Import): netsparse_bench's tpetra mode, the second
  # real inspector-executor baseline beside PETSc's (bench/tpetra_mode.cpp); absent: no such mode.
  # Debian's tpetra-dev does not depend on the Teuchos / Kokkos / KokkosKernels headers its own
  # headers include, nor on Epetra's CMake config its TpetraCoreConfig.cmake includes (without it
  # find_package(TpetraCore) is a configure error), so they are listed too.
  libtrilinos-tpetra-dev libtrilinos-teuchos-dev libtrilinos-kokkos-dev
  libtrilinos-kokkos-kernels-dev libtrilinos-epetra-dev
  # graph partitioning (lib/partition: METIS k-way partitions of a matrix's graph)
  libmetis-dev
  # CombBLAS 1.6.2 (headers + libCombBLAS.so): bench_spgemm's `combblas` mode, the 2-D SpGEMM
  # peer (bench/spgemm_combblas.cpp); optional, the mode is absent without it
  libcombblas-dev
  # an optimized BLAS behind Debian's libblas.so.3 alternative (numpy, torch and PETSc call it):
  # the default reference BLAS makes torch's thin matmuls ~10x slower (measured in the GCN)
  libopenblas0-openmp
  # CBLAS (cblas.h, libblas.so) for the dense tiles of the local SpMM and the GCN's X W
  # (lib/kernels/dense_tiles.cpp); at run time libblas.so.3 is the alternative above
  libblas-dev
  xz-utils zstd
)
if [[ " $* " == *" --main "* ]]; then
  pkgs=("${main_pkgs[@]}")
fi
if [[ " $* " == *" --vm "* ]]; then
  pkgs+=(qemu-system-x86 qemu-utils mmdebstrap cpio kmod debian-archive-keyring)
fi

missing=()
for p in "${pkgs[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if ((${#missing[@]} == 0)); then
  echo "install-deps: all ${#pkgs[@]} packages present"
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
if [[ $(id -u) -ne 0 ]]; then
  SUDO=sudo
else
  SUDO=
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
