// The SparCML-style baseline (sparcml_allreduce.hpp): recursive doubling over sorted sparse
// streams with a switch to dense at the break-even density.
#include "sparcml_allreduce.hpp"

#include <algorithm>
#include <climits>
#include <cstring>
#include <stdexcept>
#include <string>

namespace netsparse::bench {

namespace {

// Tags of one exchange: the header (the sender's entry count, or -1 when it sends dense values),
// then its indices and values, or its dense values.
constexpr int kTagHeader = 7301, kTagIndices = 7302, kTagValues = 7303, kTagDense = 7304;

struct Stream {
  Stream(std::uint64_t n_, float* dense_, SparcmlResult& r, SparcmlScratch& s, double fraction)
      : n(n_), dense_values(dense_), res(r), scratch(s), dense_at(fraction * double(n_)) {}
  std::uint64_t n;
  float* dense_values;  // the caller's dense_out: the stream once dense
  SparcmlResult& res;   // res.idx / res.val: the stream while sparse
  SparcmlScratch& scratch;
  double dense_at;  // a sparse stream of at least this many entries goes dense
  int step = 0;

  bool dense() const { return res.dense; }
  int count() const { return static_cast<int>(n); }
  std::int64_t header() const { return res.dense ? -1 : static_cast<std::int64_t>(res.idx.size()); }

  // The stream becomes dense: zeros, its entries scattered in (the densification SparCML pays).
  void densify() {
    std::memset(dense_values, 0, n * sizeof(float));
    for (std::size_t k = 0; k < res.idx.size(); ++k) dense_values[res.idx[k]] = res.val[k];
    res.idx.clear();
    res.val.clear();
    res.dense = true;
    res.dense_from_step = step;
  }
  void densify_if_past_break_even() {
    if (!res.dense && static_cast<double>(res.idx.size()) >= dense_at) densify();
  }

  // Sorted merge of the received entries (scratch.idx_in/val_in, m of them) into the stream.
  void merge_sparse(std::size_t m) {
    const std::uint32_t* ai = res.idx.data();
    const float* av = res.val.data();
    const std::uint32_t* bi = scratch.idx_in.data();
    const float* bv = scratch.val_in.data();
    const std::size_t na = res.idx.size();
    scratch.idx_tmp.resize(na + m);
    scratch.val_tmp.resize(na + m);
    std::uint32_t* oi = scratch.idx_tmp.data();
    float* ov = scratch.val_tmp.data();
    std::size_t a = 0, b = 0, o = 0;
    while (a < na && b < m) {
      if (ai[a] < bi[b]) {
        oi[o] = ai[a];
        ov[o++] = av[a++];
      } else if (bi[b] < ai[a]) {
        oi[o] = bi[b];
        ov[o++] = bv[b++];
      } else {
        oi[o] = ai[a];
        ov[o++] = av[a++] + bv[b++];
      }
    }
    for (; a < na; ++a, ++o) oi[o] = ai[a], ov[o] = av[a];
    for (; b < m; ++b, ++o) oi[o] = bi[b], ov[o] = bv[b];
    scratch.idx_tmp.resize(o);
    scratch.val_tmp.resize(o);
    res.idx.swap(scratch.idx_tmp);
    res.val.swap(scratch.val_tmp);
  }
  // Received entries added into the dense stream.
  void scatter_add(const std::uint32_t* ix, const float* v, std::size_t m) {
    for (std::size_t k = 0; k < m; ++k) dense_values[ix[k]] += v[k];
  }

  // Posts the receive of a peer's stream announced by `theirs` (its header): dense values go
  // straight into dense_values when this stream is sparse (that memory is free then), else into
  // scratch.dense_in. Returns the requests posted (1 or 2).
  int post_receive(std::int64_t theirs, int peer, MPI_Comm comm, MPI_Request* req) {
    if (theirs < 0) {
      if (res.dense) scratch.dense_in.resize(n);
      float* into = res.dense ? scratch.dense_in.data() : dense_values;
      MPI_Irecv(into, count(), MPI_FLOAT, peer, kTagDense, comm, &req[0]);
      return 1;
    }
    scratch.idx_in.resize(static_cast<std::size_t>(theirs));
    scratch.val_in.resize(static_cast<std::size_t>(theirs));
    MPI_Irecv(scratch.idx_in.data(), static_cast<int>(theirs), MPI_UINT32_T, peer, kTagIndices,
              comm, &req[0]);
    MPI_Irecv(scratch.val_in.data(), static_cast<int>(theirs), MPI_FLOAT, peer, kTagValues, comm,
              &req[1]);
    return 2;
  }
  int post_send(int peer, MPI_Comm comm, MPI_Request* req) {
    if (res.dense) {
      res.bytes_sent += n * sizeof(float);
      MPI_Isend(dense_values, count(), MPI_FLOAT, peer, kTagDense, comm, &req[0]);
      return 1;
    }
    const int m = static_cast<int>(res.idx.size());
    res.bytes_sent += static_cast<std::uint64_t>(m) * 8;
    MPI_Isend(res.idx.data(), m, MPI_UINT32_T, peer, kTagIndices, comm, &req[0]);
    MPI_Isend(res.val.data(), m, MPI_FLOAT, peer, kTagValues, comm, &req[1]);
    return 2;
  }
  // Combines what post_receive received (header `theirs`) into the stream.
  void combine(std::int64_t theirs) {
    if (theirs < 0 && res.dense) {
      const float* in = scratch.dense_in.data();
      for (std::uint64_t i = 0; i < n; ++i) dense_values[i] += in[i];
    } else if (theirs < 0) {  // the peer's dense values are in place: add this stream into them
      scatter_add(res.idx.data(), res.val.data(), res.idx.size());
      res.idx.clear();
      res.val.clear();
      res.dense = true;
      res.dense_from_step = step;
    } else if (res.dense) {
      scatter_add(scratch.idx_in.data(), scratch.val_in.data(), static_cast<std::size_t>(theirs));
    } else {
      merge_sparse(static_cast<std::size_t>(theirs));
      densify_if_past_break_even();
    }
  }

  void send_to(int peer, MPI_Comm comm) {
    std::int64_t h = header();
    res.bytes_sent += sizeof h;
    MPI_Send(&h, 1, MPI_INT64_T, peer, kTagHeader, comm);
    MPI_Request req[2];
    MPI_Waitall(post_send(peer, comm, req), req, MPI_STATUSES_IGNORE);
  }
  // Receives a peer's stream and combines it into this one (replace: take it instead).
  void receive_from(int peer, MPI_Comm comm, bool replace) {
    std::int64_t theirs = 0;
    MPI_Recv(&theirs, 1, MPI_INT64_T, peer, kTagHeader, comm, MPI_STATUS_IGNORE);
    if (replace) {  // the final result from the partner: this stream's contents are dropped
      res.idx.clear();
      res.val.clear();
      res.dense = false;
    }
    MPI_Request req[2];
    MPI_Waitall(post_receive(theirs, peer, comm, req), req, MPI_STATUSES_IGNORE);
    if (replace && theirs < 0) {
      res.dense = true;  // received in place in dense_values
    } else if (replace) {
      res.idx.swap(scratch.idx_in);
      res.val.swap(scratch.val_in);
    } else {
      combine(theirs);
    }
  }
  // One recursive-doubling step: both send, both receive, both combine.
  void exchange(int peer, MPI_Comm comm) {
    std::int64_t mine = header(), theirs = 0;
    res.bytes_sent += sizeof mine;
    MPI_Sendrecv(&mine, 1, MPI_INT64_T, peer, kTagHeader, &theirs, 1, MPI_INT64_T, peer, kTagHeader,
                 comm, MPI_STATUS_IGNORE);
    MPI_Request req[4];
    int k = post_receive(theirs, peer, comm, req);
    k += post_send(peer, comm, req + k);
    MPI_Waitall(k, req, MPI_STATUSES_IGNORE);
    combine(theirs);
  }
};

// This rank's input as a sorted stream without repeats (repeats summed in input order).
void load_input(std::uint64_t n, std::size_t nnz, const std::uint64_t* idx, const float* val,
                SparcmlResult& res, SparcmlScratch& scratch) {
  bool sorted = true;
  for (std::size_t k = 0; k < nnz; ++k) {
    if (idx[k] >= n)
      throw std::invalid_argument("sparcml_allreduce: index " + std::to_string(idx[k]) +
                                  " (entry " + std::to_string(k) +
                                  ") is not below n = " + std::to_string(n));
    if (k > 0 && idx[k] <= idx[k - 1]) sorted = false;
  }
  res.idx.resize(nnz);
  res.val.resize(nnz);
  if (sorted) {
    for (std::size_t k = 0; k < nnz; ++k) res.idx[k] = static_cast<std::uint32_t>(idx[k]);
    std::memcpy(res.val.data(), val, nnz * sizeof(float));
    return;
  }
  // Sort (index, position) keys: ties keep the input order, so repeats add up deterministically.
  scratch.order.resize(nnz);
  for (std::size_t k = 0; k < nnz; ++k) scratch.order[k] = idx[k] << 32 | k;
  std::sort(scratch.order.begin(), scratch.order.end());
  std::size_t o = 0;
  for (std::size_t k = 0; k < nnz; ++k) {
    const std::uint32_t i = static_cast<std::uint32_t>(scratch.order[k] >> 32);
    const float v = val[scratch.order[k] & 0xffffffffu];
    if (o > 0 && res.idx[o - 1] == i) {
      res.val[o - 1] += v;
    } else {
      res.idx[o] = i;
      res.val[o++] = v;
    }
  }
  res.idx.resize(o);
  res.val.resize(o);
}

}  // namespace

void sparcml_allreduce(MPI_Comm comm, std::uint64_t n, std::size_t nnz, const std::uint64_t* idx,
                       const float* val, float* dense_out, SparcmlResult& result,
                       SparcmlScratch& scratch, double dense_fraction) {
  if (n > static_cast<std::uint64_t>(INT_MAX))
    throw std::invalid_argument("sparcml_allreduce: n = " + std::to_string(n) +
                                " is above 2^31 - 1 (one MPI message of n values)");
  if (nnz > 0xffffffffu)
    throw std::invalid_argument("sparcml_allreduce: more than 2^32 - 1 entries");
  if ((nnz > 0 && (idx == nullptr || val == nullptr)) || (n > 0 && dense_out == nullptr))
    throw std::invalid_argument("sparcml_allreduce: a buffer is NULL");
  result = SparcmlResult{};
  load_input(n, nnz, idx, val, result, scratch);
  Stream s(n, dense_out, result, scratch, dense_fraction);
  s.densify_if_past_break_even();

  int rank = 0, P = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &P);
  int p2 = 1;
  while (p2 * 2 <= P) p2 *= 2;
  const int extra = P - p2;  // ranks 0 .. 2 extra - 1 pair up first
  // The rank in the power-of-two group (-1: an even rank of a first pair, which sits it out).
  int group_rank = rank - extra;
  if (rank < 2 * extra) {
    if (rank % 2 == 0) {
      s.send_to(rank + 1, comm);
      group_rank = -1;
    } else {
      s.receive_from(rank - 1, comm, false);
      group_rank = rank / 2;
    }
    ++result.steps;
  }
  if (group_rank >= 0) {
    for (int mask = 1; mask < p2; mask <<= 1) {
      s.step = ++result.steps;
      const int g = group_rank ^ mask;
      const int peer = g < extra ? 2 * g + 1 : g + extra;
      s.exchange(peer, comm);
    }
  }
  if (rank < 2 * extra) {
    if (rank % 2 == 1) {
      s.send_to(rank - 1, comm);
    } else {
      s.receive_from(rank + 1, comm, true);
      result.dense_from_step = result.dense ? 0 : -1;  // as the partner's: not counted here
    }
  }
}

}  // namespace netsparse::bench
