// What an external library's run of netsparse_bench's products gives back (the petsc mode,
// bench/petsc_mode.cpp; the tpetra mode, bench/tpetra_mode.cpp): netsparse_bench turns it into
// one table row with the library modes' columns and checks `out` against ideal.
#pragma once

#include <vector>

namespace netsparse::bench {

struct BaselineRun {
  std::vector<double> times;  // per timed product, the slowest rank's
  double setup_seconds = 0;   // the library's matrix, operands and exchange plan (max over ranks)
  std::vector<double> out;    // this rank's result rows (rows x k, row-major)
  // What this rank receives per product, counted like the inspector-executor mode (each ghost
  // row once): ghost columns x k x 8 bytes, in one message per owning rank.
  double ghost_bytes = 0;
  double ghost_messages = 0;
};

}  // namespace netsparse::bench
