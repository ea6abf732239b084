// A SparCML-style sparse allreduce over MPI point-to-point: the baseline bench_allreduce sets
// beside NetSparse's sparse allreduce (issue 39 item 4). Written here from the description in
// the SparCML paper (Renggli et al., SC '19): recursive doubling over sparse (index, value)
// streams, each step exchanging the current stream with the partner at distance 2^k and merging
// the two sorted streams; once a merged stream's entries would take at least the bytes of the
// dense vector (the break-even density, 1/2 for u32 indices and fp32 values) it switches to the
// dense representation for the remaining steps (a dense vector received from a still sparse
// partner is used as it is, the sparse side scattered into it). A rank count that is not a power
// of two: the first 2 r ranks (r = P - the largest power of two <= P) pair up, the even one
// hands its stream to the odd one and takes no part in the doubling, and receives the result at
// the end. fp32 sum only, indices below 2^31.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace netsparse::bench {

struct SparcmlResult {
  bool dense = false;              // true: the result is in dense_out (n values)
  std::vector<std::uint32_t> idx;  // sparse result: ascending indices ...
  std::vector<float> val;          // ... and their sums
  std::uint64_t bytes_sent = 0;    // payload and header bytes this rank sent
  int steps = 0;                   // exchanges this rank took part in
  int dense_from_step = -1;        // the step after which it went dense (-1: never; 0: input)
};

// Scratch kept across calls (no allocation per call once warm).
struct SparcmlScratch {
  std::vector<std::uint32_t> idx_in, idx_tmp;
  std::vector<float> val_in, val_tmp, dense_in;
  std::vector<std::uint64_t> order;
};

// Collective over comm. idx/val: this rank's nnz entries, any order, repeats summed, every index
// below n. dense_out: n floats, written when the result is dense (whatever it held is
// overwritten). dense_fraction: the density at which a stream goes dense (0.5 the break-even;
// other values for the tests' sake). Throws std::invalid_argument on a bad argument (an index out
// of range, n too large) before any communication, so call it with the same n on every rank.
void sparcml_allreduce(MPI_Comm comm, std::uint64_t n, std::size_t nnz, const std::uint64_t* idx,
                       const float* val, float* dense_out, SparcmlResult& result,
                       SparcmlScratch& scratch, double dense_fraction = 0.5);

}  // namespace netsparse::bench
