// GoogleTest checks on CsrMatrix blocks, for every component's tests.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "netsparse/csr.hpp"

namespace netsparse::test {

// got is want, field by field (values bit for bit: whatever moves them never combines them);
// `what` labels the failures.
inline void expect_same_csr(const CsrMatrix& got, const CsrMatrix& want,
                            const std::string& what = {}) {
  EXPECT_EQ(got.n_rows_global, want.n_rows_global) << what;
  EXPECT_EQ(got.n_cols, want.n_cols) << what;
  EXPECT_EQ(got.row_begin, want.row_begin) << what;
  EXPECT_EQ(got.n_rows, want.n_rows) << what;
  EXPECT_EQ(got.row_ptr, want.row_ptr) << what;
  EXPECT_EQ(got.col_idx, want.col_idx) << what;
  EXPECT_EQ(got.values, want.values) << what;
}

}  // namespace netsparse::test
