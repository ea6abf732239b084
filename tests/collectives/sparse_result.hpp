// The sparse allreduce's result read back as dense bytes, for the tests that compare it with a
// sequential reference (test_collectives_mpi.cpp, test_collectives_hier.cpp).
#pragma once

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "coll_test_util.hpp"
#include "netsparse/collectives_mpi.h"

namespace colltest {

// `res` (n elements of es bytes) into `dense` (n * es bytes, zero where the result has no
// index); a dense result only where `output` allows one, a sparse one likewise.
inline void densify_sparse_result(const ns_sparse_result* res, std::uint64_t n, std::size_t es,
                                  int output, Bytes& dense) {
  dense.assign(n * es, std::byte{0});
  const auto* vals = static_cast<const std::byte*>(ns_sparse_result_values(res));
  if (ns_sparse_result_is_dense(res)) {
    ASSERT_NE(output, NS_SPARSE_OUTPUT_SPARSE);
    ASSERT_EQ(ns_sparse_result_size(res), n);
    std::memcpy(dense.data(), vals, n * es);
  } else {
    ASSERT_NE(output, NS_SPARSE_OUTPUT_DENSE);
    const std::uint64_t* idx = ns_sparse_result_indices(res);
    for (std::uint64_t k = 0; k < ns_sparse_result_size(res); ++k)
      std::memcpy(dense.data() + idx[k] * es, vals + k * es, es);
  }
}

}  // namespace colltest
