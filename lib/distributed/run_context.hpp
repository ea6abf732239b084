// What one run of a DistKernel hands its mode besides the pattern: the run's context (ranks,
// partitions, kernel, K, options) and its operands.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <stdexcept>

#include "hosts/topology.hpp"

#include "netsparse/distributed.hpp"
#include "netsparse/scalar.hpp"

namespace netsparse::dist {

// Everything a run needs besides the pattern.
struct RunContext {
  MPI_Comm comm = MPI_COMM_NULL;
  int rank = 0;
  int nranks = 1;
  const RowPartition* rows = nullptr;
  const RowPartition* cols = nullptr;
  KernelKind kernel = KernelKind::spmm;
  int k = 1;
  MPI_Datatype row_type = MPI_DATATYPE_NULL;  // K contiguous elements of options->scalar
  const DistOptions* options = nullptr;
  // The job's hosts, built once per kernel at its construction for the modes that route or
  // count by host (DistKernel::Impl::topology): a Topology costs four collectives, and
  // resolving `netsparse` already needed one.
  const Topology* topology = nullptr;

  [[nodiscard]] const Topology& hosts() const {
    if (topology == nullptr) throw std::logic_error("RunContext: this kernel has no host topology");
    return *topology;
  }
  // The operands' precision (DistOptions::scalar), and the bytes of one operand row (property).
  [[nodiscard]] ScalarType scalar() const noexcept { return options->scalar; }
  [[nodiscard]] std::uint64_t row_bytes() const noexcept {
    return static_cast<std::uint64_t>(k) * scalar_bytes(scalar());
  }
};

// One run's operands: b = this rank's block of the column-indexed operand; x = SDDMM's
// row-indexed operand; out = C / y (rows x K) or SDDMM's per-nonzero output (CSR order).
// T is the precision the kernel computes in (float or double); the exchanges, the compute
// helpers and the operands are templates on it, instantiated for both.
template <class T>
struct Operands {
  const T* b = nullptr;
  const T* x = nullptr;
  T* out = nullptr;
};

}  // namespace netsparse::dist
