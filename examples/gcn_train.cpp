// Training a 2-layer GCN on a graph split across ranks, with neighbour sampling every epoch.
//
//   mpirun -np 2 gcn_train [--matrix SPEC] [--epochs N] [--mode
//   netsparse|su|inspector-executor|all]
//                          [--order own|random|both] [--rounds R] ...      (--help lists all)
//
// The model: H1 = relu(Ahat X W1), Z = Ahat H1 W2, softmax cross-entropy over every node, where
// Ahat = D^-1/2 (S + I) D^-1/2 and S is this epoch's sample of the graph (each row keeps at most
// --fanout neighbours, chosen by a hash of (seed, epoch, row, column): every mode and every rank
// count see the same sample). D is the row degree of S + I, so Ahat Y = d^-1/2 . ((S + I)(d^-1/2
// . Y)) with both scalings local to the rows a rank owns: the distributed products are plain
// (S + I) * Y (forward, a DistKernel SpMM) and (S + I)^T * Y (backward, a TransposedSpmm: the
// sampled pattern transposed every epoch). Both layers multiply with K = --hidden columns
// (layer 2 as (Ahat H1) W2), so each epoch sets up one forward and one backward pattern.
// Weights are replicated; their gradients (and the loss) are summed over the ranks by the
// library's allreduce (netsparse::Collectives, --grad-allreduce netsparse, the default) or by
// MPI_Allreduce (--grad-allreduce mpi, to compare). --reproducible asks the library for its
// fixed-tree allreduce: the same bits whatever order the ranks' contributions arrive in, so at a
// given rank count the loss curve is the same bit for bit from run to run.
//
// The task: node features X are hashes of (node, feature) in [-1, 1); the label of a node is the
// argmax of a hidden random linear model of its smoothed features (Ahat_full X) Wtrue, Ahat_full
// the normalized full graph. Everything is deterministic, so the loss curve of every mode is
// the same up to floating-point summation order.
//
// The pattern changes every epoch, so netsparse runs with DistOptions::dynamic_pattern (set_pattern
// hands it the sampled rows; no inspector) while su and inspector-executor redo their setup.
// The output gives, per mode, the time per epoch (median), where it goes (sampling, setup,
// sparse products, their exchanges, dense work, the allreduce) and the loss per epoch.
//
// GNN locality (docs/benchmarks.md, "GCN locality"): --order relabels the graph first (random, or
// the library's rcm / metis / metis-rcm orderings, lib/partition) with the features and labels
// following their node, and reports the ghost rows each order leaves per epoch; --local-forward
// computes the forward products' local block apart from the DistKernel (which then gathers and
// multiplies only the remote columns) by the tile kernel, by dense tiles through GEMM, or as a
// pipelined A (X W) (include/netsparse/dense_tiles.hpp). Every (order, variant) pair is one run
// in the side-by-side table.
#include <mpi.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <map>
#include <memory>
#include <numeric>
#include <span>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "netsparse/collectives_mpi.h"
#include "netsparse/dense_tiles.hpp"
#include "netsparse/dist_transpose.hpp"
#include "netsparse/distributed.hpp"
#include "netsparse/graph_partition.hpp"
#include "netsparse/netsparse.hpp"
#include "netsparse/netsparse_mpi.h"

namespace {

using netsparse::CommMode;
using netsparse::CsrMatrix;
using netsparse::DistMatrix;
using netsparse::gidx_t;

// ---- options -------------------------------------------------------------------------------

struct Options {
  std::string matrix = "gen:kron:10";
  int epochs = 20;
  int fanout = 10;
  int features = 16;
  int hidden = 16;
  int classes = 4;
  double lr = 0.05;
  bool adam = true;
  std::uint64_t seed = 1;
  std::vector<CommMode> modes{CommMode::netsparse};
  std::vector<std::string> orders{"own"};
  int rounds = 1;
  netsparse::TransposedMethod backward = netsparse::TransposedMethod::via_transpose;
  bool check_gradients = false;
  double expect_drop = 0;  // > 0: exit 1 unless final loss < expect_drop * initial
  double agree = 0;        // > 0: exit 1 unless every mode's curve agrees to this (relative)
  bool print_curve = true;
  bool dynamic = true;  // netsparse: DistOptions::dynamic_pattern
  int threads = 0;      // OpenMP threads per rank; 0: OpenMP's, at most the rank's core share
  bool grad_allreduce_mpi = false;    // --grad-allreduce mpi: MPI_Allreduce, else the library's
  bool reproducible = false;          // the library's bitwise-reproducible allreduce
  std::string curve_out;              // rank 0 writes the loss curve here (hex floats)
  std::string expect_curve;           // exit 1 unless the loss curve agrees with this file's
  double expect_curve_tolerance = 0;  // relative; 0: bit for bit
  // The forward products' local block (GNN locality, docs/benchmarks.md "GCN locality"): dist
  // (the DistKernel does all), split (remote columns by the DistKernel, the local block by the
  // tile kernel), hybrid (the local block's dense tiles by GEMM), pipelined (layer 1's local
  // block as A (X W) with X W per column panel).
  std::vector<std::string> local_forward{"dist"};
  double dense_tile_density = 0.4;
  int dense_tile_size = 64;
  gidx_t xw_panel = 2048;
};

const char* kHelp = R"(gcn_train: a 2-layer GCN trained on a graph split across the ranks, neighbour
sampling every epoch; every communication mode side by side.

  --matrix SPEC        graph (netsparse_bench --matrix forms; square), default gen:kron:10
  --epochs N           epochs per training run (default 20)
  --fanout F           neighbours kept per node per epoch (default 10)
  --features F         input features (default 16)
  --hidden H           hidden width = K of every distributed product (default 16)
  --classes C          classes of the synthetic task (default 4)
  --lr X               learning rate (default 0.05)
  --optimizer adam|sgd (default adam)
  --seed S             features, labels, weights and sampling (default 1)
  --mode LIST          netsparse, su, inspector-executor (any DistKernel mode), comma-separated,
                       or all (= netsparse,su,inspector-executor); default netsparse
  --order LIST         comma-separated node orders, each trained in turn: own (the graph's
                       order), random (a random relabelling), rcm (reverse Cuthill-McKee),
                       metis (each rank's nodes one METIS part), metis-rcm (METIS parts,
                       RCM inside), both (= own,random); default own. A relabelling is applied
                       before training (its cost is reported) to A and, consistently, to the
                       features and labels (they follow their node). The table gives each
                       order's ghosts: the distinct remote nodes whose rows a rank fetches per
                       epoch, summed over ranks (the locality figure). With --fanout at least
                       the largest degree the sample is the whole graph and every order's loss
                       curve must agree (--agree checks it across orders too)
  --backward transpose|push
                       (S+I)^T Y by transposing the sample and a DistKernel in the mode
                       (default), or push-based partial rows (the mode then only does forward)
  --rounds R           train R times per mode, modes interleaved; medians pool the rounds
  --expect-loss-drop X exit 1 unless every run's final loss < X * its initial loss
  --agree X            exit 1 unless the loss curves of all modes agree to relative X
  --check-gradients    compare the gradients with central finite differences (double
                       precision) on the graph, and exit
  --netsparse-pattern dynamic|planned
                       netsparse on the sampled rows as they are (dynamic_pattern, default:
                       no inspector, the engine's filter drops repeated idxs) or planned like a
                       fixed pattern (distinct columns, compact ghost buffer: local work only)
  --threads N          OpenMP threads per rank (default: OpenMP's number, OMP_NUM_THREADS,
                       but at most this rank's share of the host's cores: more threads than
                       cores make every parallel region and every MPI wait cost scheduler time
                       slices)
  --grad-allreduce netsparse|mpi
                       sum the weight gradients (and the loss) over the ranks with the
                       library's allreduce (default) or with MPI_Allreduce
  --reproducible       the library's bitwise-reproducible allreduce (a fixed tree over the
                       ranks): at a given rank count, the same loss curve bit for bit in
                       every run (needs --grad-allreduce netsparse)
  --curve-out FILE     write the loss per epoch (first mode, first round) to FILE, one
                       hexadecimal float per line
  --expect-curve FILE  exit 1 unless the loss per epoch agrees with FILE's (a --curve-out of
                       another run) to --expect-curve-tolerance
  --expect-curve-tolerance X
                       relative; 0 (default): bit for bit
  --no-curve           do not print the loss per epoch
  --local-forward LIST how the forward products compute the local block (columns this rank
                       owns), comma-separated, each a run beside the others (per order):
                       dist (default: the DistKernel does everything), split (the DistKernel
                       only the remote columns, the local block by the SPADE tile kernel, tiled
                       every epoch), hybrid (split, the local block's tiles of at least
                       --dense-tile-density nonzeros by a BLAS GEMM), pipelined (split, layer
                       1's local block as A (X W) with X W computed per column panel of
                       --xw-panel columns just before the panel's SpMM; X W of the whole block
                       is still computed for the other ranks' ghosts), all
  --dense-tile-density D  hybrid's threshold, 0 < D (> 1: no dense tile); default 0.4, the
                       crossover bench_dense_tiles measured here (GEMM wins from 0.3-0.5)
  --dense-tile-size T  hybrid's tiles: T rows x T columns (default 64)
  --xw-panel P         pipelined's column panel width (default 2048)
)";

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::size_t at = 0;
  while (at <= s.size()) {
    const std::size_t comma = s.find(',', at);
    const std::size_t end = comma == std::string::npos ? s.size() : comma;
    if (end > at) out.push_back(s.substr(at, end - at));
    if (comma == std::string::npos) break;
    at = comma + 1;
  }
  return out;
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw std::invalid_argument(a + " needs a value");
      return argv[++i];
    };
    const auto positive = [&](const std::string& v) {
      const int n = std::atoi(v.c_str());
      if (n < 1) throw std::invalid_argument(a + " must be >= 1, got '" + v + "'");
      return n;
    };
    if (a == "--help" || a == "-h") {
      throw std::runtime_error("help");
    } else if (a == "--matrix") {
      o.matrix = value();
    } else if (a == "--epochs") {
      o.epochs = positive(value());
    } else if (a == "--fanout") {
      o.fanout = positive(value());
    } else if (a == "--features") {
      o.features = positive(value());
    } else if (a == "--hidden") {
      o.hidden = positive(value());
    } else if (a == "--classes") {
      o.classes = std::max(2, positive(value()));
    } else if (a == "--lr") {
      o.lr = std::atof(value().c_str());
    } else if (a == "--optimizer") {
      const std::string v = value();
      if (v != "adam" && v != "sgd") throw std::invalid_argument("--optimizer: adam or sgd");
      o.adam = v == "adam";
    } else if (a == "--seed") {
      o.seed = std::strtoull(value().c_str(), nullptr, 10);
    } else if (a == "--mode" || a == "--modes") {
      o.modes.clear();
      for (const std::string& m : split(value())) {
        if (m == "all") {
          o.modes = {CommMode::netsparse, CommMode::su, CommMode::inspector_executor};
        } else {
          o.modes.push_back(netsparse::parse_comm_mode(m));
        }
      }
      if (o.modes.empty()) throw std::invalid_argument("--mode: no mode given");
    } else if (a == "--order") {
      o.orders.clear();
      for (const std::string& v : split(value())) {
        if (v == "both") {
          o.orders.insert(o.orders.end(), {"own", "random"});
        } else if (v == "own" || v == "random") {
          o.orders.push_back(v);
        } else {
          try {
            (void)netsparse::parse_graph_ordering(v);
          } catch (const std::invalid_argument&) {
            throw std::invalid_argument("--order: unknown ordering '" + v +
                                        "' (own, random, rcm, metis, metis-rcm or both)");
          }
          o.orders.push_back(v);
        }
      }
      if (o.orders.empty()) throw std::invalid_argument("--order: no ordering given");
      for (std::size_t i = 0; i < o.orders.size(); ++i) {
        if (std::find(o.orders.begin(), o.orders.begin() + i, o.orders[i]) !=
            o.orders.begin() + i) {
          throw std::invalid_argument("--order: '" + o.orders[i] + "' given twice");
        }
      }
    } else if (a == "--backward") {
      const std::string v = value();
      if (v == "transpose") {
        o.backward = netsparse::TransposedMethod::via_transpose;
      } else if (v == "push") {
        o.backward = netsparse::TransposedMethod::push;
      } else {
        throw std::invalid_argument("--backward: transpose or push");
      }
    } else if (a == "--rounds") {
      o.rounds = positive(value());
    } else if (a == "--threads") {
      o.threads = positive(value());
    } else if (a == "--expect-loss-drop") {
      o.expect_drop = std::atof(value().c_str());
    } else if (a == "--agree") {
      o.agree = std::atof(value().c_str());
    } else if (a == "--check-gradients") {
      o.check_gradients = true;
    } else if (a == "--netsparse-pattern") {
      const std::string v = value();
      if (v != "dynamic" && v != "planned") {
        throw std::invalid_argument("--netsparse-pattern: dynamic or planned");
      }
      o.dynamic = v == "dynamic";
    } else if (a == "--grad-allreduce") {
      const std::string v = value();
      if (v != "netsparse" && v != "mpi") {
        throw std::invalid_argument("--grad-allreduce: netsparse or mpi");
      }
      o.grad_allreduce_mpi = v == "mpi";
    } else if (a == "--reproducible") {
      o.reproducible = true;
    } else if (a == "--curve-out") {
      o.curve_out = value();
    } else if (a == "--expect-curve") {
      o.expect_curve = value();
    } else if (a == "--expect-curve-tolerance") {
      o.expect_curve_tolerance = std::atof(value().c_str());
    } else if (a == "--no-curve") {
      o.print_curve = false;
    } else if (a == "--local-forward") {
      o.local_forward.clear();
      for (const std::string& v : split(value())) {
        if (v == "all") {
          o.local_forward = {"dist", "split", "hybrid", "pipelined"};
        } else if (v == "dist" || v == "split" || v == "hybrid" || v == "pipelined") {
          o.local_forward.push_back(v);
        } else {
          throw std::invalid_argument("--local-forward: unknown variant '" + v +
                                      "' (dist, split, hybrid, pipelined or all)");
        }
      }
      if (o.local_forward.empty()) throw std::invalid_argument("--local-forward: none given");
    } else if (a == "--dense-tile-density") {
      const std::string v = value();
      o.dense_tile_density = std::atof(v.c_str());
      if (!(o.dense_tile_density > 0)) {
        throw std::invalid_argument("--dense-tile-density must be > 0, got '" + v + "'");
      }
    } else if (a == "--dense-tile-size") {
      o.dense_tile_size = positive(value());
    } else if (a == "--xw-panel") {
      o.xw_panel = positive(value());
    } else {
      throw std::invalid_argument("unknown option " + a + " (see --help)");
    }
  }
  if (o.reproducible && o.grad_allreduce_mpi) {
    throw std::invalid_argument("--reproducible needs --grad-allreduce netsparse");
  }
  return o;
}

// ---- deterministic data ----------------------------------------------------------------------

std::uint64_t mix(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}
// Uniform in [-1, 1) from (seed, a, b): a counter-based draw, the same on every rank.
double draw(std::uint64_t seed, std::uint64_t a, std::uint64_t b) {
  const std::uint64_t z = mix(mix(seed * 0x9e3779b97f4a7c15ULL + a) ^ (b + 0x632be59bd9b4e019ULL));
  return static_cast<double>(z >> 11) * 0x1.0p-52 - 1.0;
}

double max_over_ranks(double v) {
  MPI_Allreduce(MPI_IN_PLACE, &v, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return v;
}
double sum_over_ranks(double v) {
  MPI_Allreduce(MPI_IN_PLACE, &v, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  return v;
}

// S + I for this rank's rows of a square pattern: the diagonal inserted where missing, every
// value 1 (the graph's edges, unweighted).
CsrMatrix with_self_loops(const CsrMatrix& s) {
  CsrMatrix m;
  m.n_rows_global = s.n_rows_global;
  m.n_cols = s.n_cols;
  m.row_begin = s.row_begin;
  m.n_rows = s.n_rows;
  m.row_ptr.reserve(static_cast<std::size_t>(s.n_rows) + 1);
  m.row_ptr.push_back(0);
  m.col_idx.reserve(static_cast<std::size_t>(s.nnz() + s.n_rows));
  for (gidx_t r = 0; r < s.n_rows; ++r) {
    const gidx_t g = s.row_begin + r;
    bool placed = false;
    for (std::int64_t i = s.row_ptr[r]; i < s.row_ptr[r + 1]; ++i) {
      if (!placed && s.col_idx[i] >= g) {
        if (s.col_idx[i] != g) m.col_idx.push_back(g);
        placed = true;
      }
      m.col_idx.push_back(s.col_idx[i]);
    }
    if (!placed) m.col_idx.push_back(g);
    m.row_ptr.push_back(static_cast<std::int64_t>(m.col_idx.size()));
  }
  m.values.assign(m.col_idx.size(), 1.0);
  return m;
}

// d^-1/2 of S + I (row degrees: the number of entries of each local row).
std::vector<double> inv_sqrt_degree(const CsrMatrix& m) {
  std::vector<double> d(static_cast<std::size_t>(m.n_rows));
  for (gidx_t r = 0; r < m.n_rows; ++r) {
    d[r] = 1.0 / std::sqrt(static_cast<double>(m.row_ptr[r + 1] - m.row_ptr[r]));
  }
  return d;
}

// A random relabelling of the nodes, P A P^T: node i becomes perm[i]. Every rank draws the same
// permutation (Fisher-Yates from the seed); each nonzero travels to the owner of its new row
// (one MPI_Alltoallv), rows are rebuilt sorted. Returns the relabelled matrix; `perm` gets the
// permutation.
DistMatrix permute(const DistMatrix& a, std::uint64_t seed, std::vector<gidx_t>& perm) {
  const gidx_t n = a.n_rows();
  perm.resize(static_cast<std::size_t>(n));
  std::iota(perm.begin(), perm.end(), gidx_t{0});
  for (gidx_t i = n - 1; i > 0; --i) {
    const auto j = static_cast<gidx_t>(mix(seed ^ mix(static_cast<std::uint64_t>(i))) %
                                       static_cast<std::uint64_t>(i + 1));
    std::swap(perm[i], perm[j]);
  }
  const int nranks = a.nranks(), rank = a.rank();
  struct Edge {
    gidx_t row, col;
  };
  std::vector<int> counts(nranks, 0), displs(nranks + 1, 0), rcounts(nranks),
      rdispls(nranks + 1, 0);
  const CsrMatrix& l = a.local();
  for (gidx_t r = 0; r < l.n_rows; ++r) {
    counts[a.rows().owner(perm[l.row_begin + r])] +=
        static_cast<int>(l.row_ptr[r + 1] - l.row_ptr[r]);
  }
  for (int p = 0; p < nranks; ++p) displs[p + 1] = displs[p] + counts[p];
  std::vector<Edge> send(static_cast<std::size_t>(displs[nranks]));
  std::vector<int> at(displs.begin(), displs.end() - 1);
  for (gidx_t r = 0; r < l.n_rows; ++r) {
    const gidx_t nr = perm[l.row_begin + r];
    int& pos = at[a.rows().owner(nr)];
    for (std::int64_t i = l.row_ptr[r]; i < l.row_ptr[r + 1]; ++i)
      send[pos++] = {nr, perm[l.col_idx[i]]};
  }
  MPI_Alltoall(counts.data(), 1, MPI_INT, rcounts.data(), 1, MPI_INT, a.comm());
  for (int p = 0; p < nranks; ++p) rdispls[p + 1] = rdispls[p] + rcounts[p];
  std::vector<Edge> got(static_cast<std::size_t>(rdispls[nranks]));
  MPI_Datatype edge_type;
  MPI_Type_contiguous(2, MPI_INT64_T, &edge_type);
  MPI_Type_commit(&edge_type);
  MPI_Alltoallv(send.data(), counts.data(), displs.data(), edge_type, got.data(), rcounts.data(),
                rdispls.data(), edge_type, a.comm());
  MPI_Type_free(&edge_type);
  std::sort(got.begin(), got.end(), [](const Edge& x, const Edge& y) {
    return x.row != y.row ? x.row < y.row : x.col < y.col;
  });
  CsrMatrix m;
  m.n_rows_global = n;
  m.n_cols = a.n_cols();
  m.row_begin = a.rows().begin(rank);
  m.n_rows = a.rows().size(rank);
  m.row_ptr.assign(static_cast<std::size_t>(m.n_rows) + 1, 0);
  for (const Edge& e : got) {
    ++m.row_ptr[static_cast<std::size_t>(e.row - m.row_begin) + 1];
    m.col_idx.push_back(e.col);
  }
  for (gidx_t r = 0; r < m.n_rows; ++r) m.row_ptr[r + 1] += m.row_ptr[r];
  m.values.assign(m.col_idx.size(), 1.0);
  return DistMatrix(a.comm(), std::move(m), a.rows(), a.cols(), a.name() + " (random order)");
}

// Every rank's `mine` (its rows of `m`, in order), concatenated on every rank: indexed by m's
// global row.
std::vector<gidx_t> all_of(const std::vector<gidx_t>& mine, const DistMatrix& m) {
  const int nranks = m.nranks();
  std::vector<int> counts(static_cast<std::size_t>(nranks)), displs(counts.size(), 0);
  for (int p = 0; p < nranks; ++p) {
    counts[static_cast<std::size_t>(p)] = static_cast<int>(m.rows().size(p));
    displs[static_cast<std::size_t>(p)] = static_cast<int>(m.rows().begin(p));
  }
  std::vector<gidx_t> all(static_cast<std::size_t>(m.n_rows()));
  MPI_Allgatherv(mine.data(), static_cast<int>(mine.size()), MPI_INT64_T, all.data(), counts.data(),
                 displs.data(), MPI_INT64_T, m.comm());
  return all;
}

// ---- the model -------------------------------------------------------------------------------

// C (n x m) = A (n x k) * B (k x m), row-major.
template <class T>
void gemm(const T* a, const T* b, T* c, std::size_t n, std::size_t k, std::size_t m) {
#pragma omp parallel for schedule(static)
  for (std::size_t i = 0; i < n; ++i) {
    T* ci = c + i * m;
    std::fill(ci, ci + m, T(0));
    for (std::size_t x = 0; x < k; ++x) {
      const T av = a[i * k + x];
      const T* bx = b + x * m;
      for (std::size_t y = 0; y < m; ++y) ci[y] += av * bx[y];
    }
  }
}
// C (k x m) = A^T B, A (n x k), B (n x m): a weight gradient (this rank's rows only).
template <class T>
void gemm_at_b(const T* a, const T* b, T* c, std::size_t n, std::size_t k, std::size_t m) {
  std::fill(c, c + k * m, T(0));
  for (std::size_t i = 0; i < n; ++i) {
    for (std::size_t x = 0; x < k; ++x) {
      const T av = a[i * k + x];
      for (std::size_t y = 0; y < m; ++y) c[x * m + y] += av * b[i * m + y];
    }
  }
}
// C (n x k) = A (n x m) * B^T, B (k x m).
template <class T>
void gemm_a_bt(const T* a, const T* b, T* c, std::size_t n, std::size_t m, std::size_t k) {
#pragma omp parallel for schedule(static)
  for (std::size_t i = 0; i < n; ++i) {
    for (std::size_t x = 0; x < k; ++x) {
      T s = 0;
      for (std::size_t y = 0; y < m; ++y) s += a[i * m + y] * b[x * m + y];
      c[i * k + x] = s;
    }
  }
}
template <class T>
void scale_rows(std::vector<T>& v, const std::vector<double>& d, std::size_t width) {
#pragma omp parallel for schedule(static)
  for (std::size_t i = 0; i < d.size(); ++i) {
    const T s = static_cast<T>(d[i]);
    for (std::size_t x = 0; x < width; ++x) v[i * width + x] *= s;
  }
}

// Times of one epoch on this rank (seconds).
struct EpochTimes {
  double total = 0, sample = 0, setup = 0, transpose = 0, plan = 0, sparse = 0, exchange = 0,
         dense = 0, allreduce = 0;
  // Locality of the epoch's sample (counts, not times; summed over ranks in the table): the
  // distinct remote columns (ghost rows fetched by the forward product) and the nonzeros
  // that read them.
  double ghosts = 0, remote_nnz = 0;
  // hybrid: the local block's nonzeros and those in dense tiles (summed over ranks).
  double local_nnz = 0, dense_nnz = 0;
};

// Distinct columns of `m` outside [lo, hi) and the nonzeros in them: the rows a forward
// product fetches from other ranks. `mark` is scratch of n_cols entries (all zero on entry and
// on return).
void count_remote(const CsrMatrix& m, gidx_t lo, gidx_t hi, std::vector<char>& mark, double& ghosts,
                  double& remote_nnz) {
  mark.resize(static_cast<std::size_t>(m.n_cols), 0);
  std::vector<gidx_t> seen;
  for (const gidx_t c : m.col_idx) {
    if (c >= lo && c < hi) continue;
    remote_nnz += 1;
    if (!mark[static_cast<std::size_t>(c)]) {
      mark[static_cast<std::size_t>(c)] = 1;
      seen.push_back(c);
    }
  }
  ghosts += static_cast<double>(seen.size());
  for (const gidx_t c : seen) mark[static_cast<std::size_t>(c)] = 0;
}

// One training run's distributed state in precision T.
template <class T>
class Gcn {
 public:
  // inverse_perm: for a relabelled graph, the original id of every node (its features and label
  // follow it); empty for the graph's own order.
  // coll: the library's collectives for the gradient sums; nullptr: MPI_Allreduce.
  // variant: Options::local_forward's (dist, split, hybrid, pipelined).
  Gcn(const DistMatrix& a, const Options& o, CommMode mode, netsparse::Collectives* coll,
      std::vector<gidx_t> inverse_perm = {}, std::string variant = "dist")
      : inverse_perm_(std::move(inverse_perm)),
        a_(a),
        o_(o),
        coll_(coll),
        rank_(a.rank()),
        n_local_(static_cast<std::size_t>(a.rows().size(a.rank()))),
        variant_(std::move(variant)) {
    netsparse::DistOptions dopt;
    dopt.mode = mode;
    dopt.scalar =
        std::is_same_v<T, float> ? netsparse::ScalarType::f32 : netsparse::ScalarType::f64;
    // The pattern changes every epoch: netsparse computes on the sampled rows directly.
    dopt.dynamic_pattern = mode == CommMode::netsparse && o.dynamic;
    if (netsparse::uses_rig_engine(mode)) {
      engine_ = std::make_shared<netsparse::RigEngine>(a.comm(), dopt.engine);
    }
    const CsrMatrix full = with_self_loops(a.local());
    current_ = full;
    forward_ = std::make_unique<netsparse::DistKernel>(a, netsparse::KernelKind::spmm, o.hidden,
                                                       dopt, engine_);
    forward_->set_pattern(current_);
    backward_ = std::make_unique<netsparse::TransposedSpmm>(a, o.hidden, dopt, o.backward, engine_);
    make_task(full);
    init_weights();
  }

  // The engine's filter statistics: (filtered + coalesced) / requested, summed over ranks.
  [[nodiscard]] double engine_fc_rate() const {
    if (!engine_) return -1;
    const double req = sum_over_ranks(double(engine_->stat(NS_STAT_PRS_REQUESTED)));
    const double fc = sum_over_ranks(
        double(engine_->stat(NS_STAT_PRS_FILTERED) + engine_->stat(NS_STAT_PRS_COALESCED)));
    return req > 0 ? fc / req : 0;
  }

  // One epoch: sample, forward, loss, backward, update. Returns the loss (mean over all nodes,
  // before the update).
  double epoch(int e, EpochTimes& t) {
    MPI_Barrier(a_.comm());
    const double t0 = MPI_Wtime();
    prepare(e, t);
    const double loss = forward_backward(t);
    t.total = MPI_Wtime() - t0;
    step();
    return loss;
  }

  // Samples epoch e's graph and hands it to the forward and backward products (their setup).
  void prepare(int e, EpochTimes& t) {
    const double t0 = MPI_Wtime();
    sample(e);
    const double t1 = MPI_Wtime();
    if (variant_ != "dist") split_local();
    forward_->set_pattern(variant_ == "dist" ? current_ : remote_);
    backward_->set_pattern(current_);
    const double t2 = MPI_Wtime();
    t.sample = t1 - t0;
    t.setup = t2 - t1;
    count_remote(current_, a_.rows().begin(rank_), a_.rows().end(rank_), mark_, t.ghosts,
                 t.remote_nnz);
    t.local_nnz = local_nnz_;
    t.dense_nnz = dense_nnz_;
    t.transpose = backward_->transpose_seconds();
    t.plan = forward_->plan_seconds() +
             (backward_->kernel() ? backward_->kernel()->plan_seconds() : 0.0);
  }

  // Loss and gradients (grad_w1_, grad_w2_) on the current sample; the times go to t.
  double forward_backward(EpochTimes& t) {
    const std::size_t n = n_local_, f0 = o_.features, h = o_.hidden, c = o_.classes;
    double dense = 0, sparse = 0, exchange = 0;
    auto clock = [](double& acc, auto&& f) {
      const double s = MPI_Wtime();
      f();
      acc += MPI_Wtime() - s;
    };
    auto spmm = [&](const std::vector<T>& in, std::vector<T>& out, bool transposed,
                    bool layer1 = false) {
      clock(sparse, [&] {
        if (transposed) {
          backward_->spmm(in, out);
        } else {
          forward_->spmm(in, out);
          if (variant_ != "dist") add_local(in, out, layer1);
        }
      });
      const netsparse::CommStats& s =
          transposed ? backward_->last_run_stats() : forward_->last_run_stats();
      exchange += s.wait_seconds + s.sync_seconds + s.post_seconds + s.progress_seconds;
    };
    // Forward. Layer 1: Z1 = Ahat (X W1); layer 2: Q = Ahat H1, Z2 = Q W2.
    clock(dense, [&] {
      gemm(x_.data(), w1_.data(), u_.data(), n, f0, h);
      scale_rows(u_, dinv_, h);
    });
    spmm(u_, v_, false, true);
    clock(dense, [&] {
      z1_ = v_;
      scale_rows(z1_, dinv_, h);
      h1_ = z1_;
      for (T& x : h1_) x = std::max(x, T(0));
      u_ = h1_;
      scale_rows(u_, dinv_, h);
    });
    spmm(u_, v_, false);
    double loss_sum = 0;
    clock(dense, [&] {
      q_ = v_;
      scale_rows(q_, dinv_, h);
      gemm(q_.data(), w2_.data(), z2_.data(), n, h, c);
      // Softmax cross-entropy, mean over all nodes; G2 = (P - Y) / N.
      const T inv_n = T(1) / static_cast<T>(a_.n_rows());
      for (std::size_t i = 0; i < n; ++i) {
        const T* zi = z2_.data() + i * c;
        const T mx = *std::max_element(zi, zi + c);
        T sum = 0;
        for (std::size_t y = 0; y < c; ++y) sum += std::exp(zi[y] - mx);
        loss_sum += static_cast<double>(std::log(sum) + mx - zi[labels_[i]]);
        for (std::size_t y = 0; y < c; ++y) {
          g2_[i * c + y] = (std::exp(zi[y] - mx) / sum - (y == labels_[i] ? T(1) : T(0))) * inv_n;
        }
      }
      gemm_at_b(q_.data(), g2_.data(), grad_w2_.data(), n, h, c);
      gemm_a_bt(g2_.data(), w2_.data(), u_.data(), n, c, h);  // dQ
      scale_rows(u_, dinv_, h);
    });
    spmm(u_, v_, true);  // (S+I)^T (d^-1/2 dQ)
    clock(dense, [&] {
      // dH1 = d^-1/2 v; dZ1 = dH1 . (Z1 > 0); then d^-1/2 dZ1.
      for (std::size_t i = 0; i < n; ++i) {
        const T s = static_cast<T>(dinv_[i] * dinv_[i]);
        for (std::size_t x = 0; x < h; ++x) {
          u_[i * h + x] = z1_[i * h + x] > T(0) ? v_[i * h + x] * s : T(0);
        }
      }
    });
    spmm(u_, v_, true);
    clock(dense, [&] {
      scale_rows(v_, dinv_, h);  // dT = d Ahat^T dZ1 part: dT = d^-1/2 (S+I)^T d^-1/2 dZ1
      gemm_at_b(x_.data(), v_.data(), grad_w1_.data(), n, f0, h);
    });
    double allreduce = 0;
    clock(allreduce, [&] {
      if (coll_ != nullptr) {
        netsparse::AllreduceOptions ar;
        ar.reproducible = o_.reproducible;
        coll_->allreduce(std::span<T>(grad_w1_), NS_OP_SUM, ar);
        coll_->allreduce(std::span<T>(grad_w2_), NS_OP_SUM, ar);
        coll_->allreduce(std::span<double>(&loss_sum, 1), NS_OP_SUM, ar);
      } else {
        MPI_Allreduce(MPI_IN_PLACE, grad_w1_.data(), static_cast<int>(grad_w1_.size()), mpi_type(),
                      MPI_SUM, a_.comm());
        MPI_Allreduce(MPI_IN_PLACE, grad_w2_.data(), static_cast<int>(grad_w2_.size()), mpi_type(),
                      MPI_SUM, a_.comm());
        MPI_Allreduce(MPI_IN_PLACE, &loss_sum, 1, MPI_DOUBLE, MPI_SUM, a_.comm());
      }
    });
    t.dense = dense;
    t.sparse = sparse;
    t.exchange = exchange;
    t.allreduce = allreduce;
    return loss_sum / static_cast<double>(a_.n_rows());
  }

  // Sets this epoch's sample (S + I, d^-1/2).
  void sample(int e) {
    netsparse::SamplingParams sp;
    sp.keep_fraction = 1.0;
    sp.max_per_row = o_.fanout;
    current_ = with_self_loops(
        netsparse::sample_rows(a_.local(), sp, o_.seed * 1000003u + static_cast<std::uint64_t>(e)));
    dinv_ = inv_sqrt_degree(current_);
  }

  void step() {
    ++t_;
    update(w1_, grad_w1_, m1_, s1_);
    update(w2_, grad_w2_, m2_, s2_);
  }

  std::vector<T>& w1() { return w1_; }
  std::vector<T>& w2() { return w2_; }
  const std::vector<T>& grad_w1() const { return grad_w1_; }
  const std::vector<T>& grad_w2() const { return grad_w2_; }

 private:
  static MPI_Datatype mpi_type() { return std::is_same_v<T, float> ? MPI_FLOAT : MPI_DOUBLE; }

  // The split variants: this epoch's S + I cut into the columns this rank owns (local_, its
  // tiling or hybrid layout built here, part of the per-epoch setup) and the others (remote_,
  // the DistKernel's pattern).
  void split_local() {
    const gidx_t lo = a_.rows().begin(rank_), hi = a_.rows().end(rank_);
    CsrMatrix local;
    for (CsrMatrix* m : {&local, &remote_}) {
      m->n_rows_global = current_.n_rows_global;
      m->n_cols = current_.n_cols;
      m->row_begin = current_.row_begin;
      m->n_rows = current_.n_rows;
      m->row_ptr.assign(1, 0);
      m->col_idx.clear();
      m->values.clear();
    }
    dense_nnz_ = 0;
    for (gidx_t r = 0; r < current_.n_rows; ++r) {
      for (std::int64_t q = current_.row_ptr[r]; q < current_.row_ptr[r + 1]; ++q) {
        const gidx_t c = current_.col_idx[static_cast<std::size_t>(q)];
        CsrMatrix& m = c >= lo && c < hi ? local : remote_;
        m.col_idx.push_back(c);
        m.values.push_back(current_.values[static_cast<std::size_t>(q)]);
      }
      local.row_ptr.push_back(std::ssize(local.col_idx));
      remote_.row_ptr.push_back(std::ssize(remote_.col_idx));
    }
    local_nnz_ = static_cast<double>(local.nnz());
    const netsparse::ScalarType scalar =
        std::is_same_v<T, float> ? netsparse::ScalarType::f32 : netsparse::ScalarType::f64;
    if (variant_ == "hybrid") {
      netsparse::DenseTileOptions d;
      d.tile_rows = o_.dense_tile_size;
      d.tile_cols = o_.dense_tile_size;
      d.min_density = o_.dense_tile_density;
      local_hybrid_ = netsparse::HybridMatrix(local, d, scalar);
      dense_nnz_ = static_cast<double>(local_hybrid_.dense_nnz());
    } else {
      netsparse::TileConfig cfg;
      if (variant_ == "pipelined") cfg.col_panel = o_.xw_panel;
      local_tiled_ = netsparse::TiledMatrix(local, cfg, scalar);
    }
  }

  // out += the local block's product (out holds the remote columns' part).
  void add_local(const std::vector<T>& in, std::vector<T>& out, bool layer1) {
    const std::size_t n = n_local_, h = o_.hidden, f0 = o_.features;
    const gidx_t lo = a_.rows().begin(rank_);
    const netsparse::BasicDenseConstView<T> view{in.data(), lo, static_cast<std::int64_t>(h),
                                                 static_cast<gidx_t>(n)};
    const int k = static_cast<int>(h);
    if (variant_ == "hybrid") {
      if (local_hybrid_.nnz() > 0) netsparse::spmm(local_hybrid_, view, out.data(), k, k, true);
    } else if (variant_ == "pipelined" && layer1) {
      // Ahat's column scaling moves onto X: (d^-1/2 X) W = d^-1/2 (X W).
      xs_ = x_;
      scale_rows(xs_, dinv_, f0);
      local_out_.resize(n * h);
      netsparse::spmm_xw(local_tiled_,
                         netsparse::BasicDenseConstView<T>{
                             xs_.data(), lo, static_cast<std::int64_t>(f0), static_cast<gidx_t>(n)},
                         static_cast<int>(f0), w1_.data(), k, local_out_.data(), k, true, scratch_);
#pragma omp parallel for schedule(static)
      for (std::size_t i = 0; i < n * h; ++i) out[i] += local_out_[i];
    } else if (local_tiled_.nnz() > 0) {
      netsparse::spmm(local_tiled_, view, out.data(), k, k, true);
    }
  }

  // Features, and labels from the hidden linear model on Ahat_full X (one SpMM in su mode,
  // outside of any timing).
  void make_task(const CsrMatrix& full) {
    const std::size_t n = n_local_, f0 = o_.features, c = o_.classes;
    const gidx_t rb = a_.rows().begin(rank_);
    x_.resize(n * f0);
    for (std::size_t i = 0; i < n; ++i) {
      for (std::size_t x = 0; x < f0; ++x) {
        x_[i * f0 + x] = static_cast<T>(draw(o_.seed, node_id(rb + gidx_t(i)), 1000 + x));
      }
    }
    const std::vector<double> d = inv_sqrt_degree(full);
    std::vector<double> xs(x_.begin(), x_.end()), ax(n * f0);
    scale_rows(xs, d, f0);
    netsparse::DistOptions su;
    su.mode = CommMode::su;
    su.scalar = netsparse::ScalarType::f64;
    netsparse::DistKernel smooth(a_, netsparse::KernelKind::spmm, static_cast<int>(f0), su);
    smooth.set_pattern(full);
    smooth.spmm(xs, ax);
    scale_rows(ax, d, f0);
    labels_.resize(n);
    for (std::size_t i = 0; i < n; ++i) {
      std::size_t best = 0;
      double best_v = -1e300;
      for (std::size_t y = 0; y < c; ++y) {
        double s = 0;
        for (std::size_t x = 0; x < f0; ++x) s += ax[i * f0 + x] * draw(o_.seed + 7, x, y);
        if (s > best_v) {
          best_v = s;
          best = y;
        }
      }
      labels_[i] = best;
    }
  }

  // Identity of a node for its features: its original id (the order option relabels nodes, the
  // task stays the same).
  [[nodiscard]] gidx_t node_id(gidx_t row) const {
    return inverse_perm_.empty() ? row : inverse_perm_[static_cast<std::size_t>(row)];
  }

  void init_weights() {
    const std::size_t f0 = o_.features, h = o_.hidden, c = o_.classes, n = n_local_;
    w1_.resize(f0 * h);
    w2_.resize(h * c);
    const double s1 = std::sqrt(6.0 / double(f0 + h)), s2 = std::sqrt(6.0 / double(h + c));
    for (std::size_t i = 0; i < w1_.size(); ++i)
      w1_[i] = static_cast<T>(s1 * draw(o_.seed + 1, i, 0));
    for (std::size_t i = 0; i < w2_.size(); ++i)
      w2_[i] = static_cast<T>(s2 * draw(o_.seed + 2, i, 0));
    grad_w1_.assign(w1_.size(), 0);
    grad_w2_.assign(w2_.size(), 0);
    m1_.assign(w1_.size(), 0);
    s1_.assign(w1_.size(), 0);
    m2_.assign(w2_.size(), 0);
    s2_.assign(w2_.size(), 0);
    u_.resize(n * h);
    v_.resize(n * h);
    z2_.resize(n * c);
    g2_.resize(n * c);
  }

  void update(std::vector<T>& w, const std::vector<T>& g, std::vector<double>& m,
              std::vector<double>& s) const {
    if (!o_.adam) {
      for (std::size_t i = 0; i < w.size(); ++i) w[i] -= static_cast<T>(o_.lr * double(g[i]));
      return;
    }
    const double b1 = 0.9, b2 = 0.999, eps = 1e-8;
    const double c1 = 1 - std::pow(b1, t_), c2 = 1 - std::pow(b2, t_);
    for (std::size_t i = 0; i < w.size(); ++i) {
      m[i] = b1 * m[i] + (1 - b1) * double(g[i]);
      s[i] = b2 * s[i] + (1 - b2) * double(g[i]) * double(g[i]);
      w[i] -= static_cast<T>(o_.lr * (m[i] / c1) / (std::sqrt(s[i] / c2) + eps));
    }
  }

  std::vector<gidx_t> inverse_perm_;
  std::vector<char> mark_;  // count_remote's scratch
  const DistMatrix& a_;
  const Options& o_;
  netsparse::Collectives* coll_;
  int rank_;
  std::size_t n_local_;
  std::shared_ptr<netsparse::RigEngine> engine_;
  std::string variant_;                   // Options::local_forward's
  CsrMatrix remote_;                      // split variants: the remote columns of current_
  netsparse::TiledMatrix local_tiled_;    // split, pipelined: the local columns, tiled
  netsparse::HybridMatrix local_hybrid_;  // hybrid: the local columns, dense tiles apart
  std::vector<T> xs_, local_out_, scratch_;
  double local_nnz_ = 0, dense_nnz_ = 0;  // this epoch's local block, its dense-tile part
  std::unique_ptr<netsparse::DistKernel> forward_;
  std::unique_ptr<netsparse::TransposedSpmm> backward_;
  CsrMatrix current_;  // S + I of this epoch (borrowed by netsparse's forward kernel)
  std::vector<double> dinv_;
  std::vector<T> x_, w1_, w2_, grad_w1_, grad_w2_;
  std::vector<double> m1_, s1_, m2_, s2_;
  std::vector<std::size_t> labels_;
  std::vector<T> u_, v_, z1_, h1_, q_, z2_, g2_;
  int t_ = 0;
};

}  // namespace

namespace {

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Gradients against central finite differences, in double precision, on epoch 0's sample.
int check_gradients(const DistMatrix& a, const Options& o, int rank, netsparse::Collectives* coll) {
  Gcn<double> g(a, o, o.modes.front(), coll);
  EpochTimes t;
  g.prepare(0, t);
  (void)g.forward_backward(t);
  const std::vector<double> gw1 = g.grad_w1(), gw2 = g.grad_w2();
  const double eps = 1e-5;
  double worst = 0, scale = 0;
  int checked = 0;
  const auto probe = [&](std::vector<double>& w, const std::vector<double>& grad, std::size_t i) {
    const double keep = w[i];
    w[i] = keep + eps;
    const double up = g.forward_backward(t);
    w[i] = keep - eps;
    const double down = g.forward_backward(t);
    w[i] = keep;
    const double fd = (up - down) / (2 * eps);
    worst = std::max(worst, std::abs(fd - grad[i]));
    scale = std::max(scale, std::abs(grad[i]));
    ++checked;
    if (rank == 0 && checked <= 4) {
      std::printf("  d loss / d w[%zu]: analytic %+.9e, finite difference %+.9e\n", i, grad[i], fd);
    }
  };
  for (std::size_t i = 0; i < gw1.size(); i += std::max<std::size_t>(1, gw1.size() / 12)) {
    probe(g.w1(), gw1, i);
  }
  for (std::size_t i = 0; i < gw2.size(); i += std::max<std::size_t>(1, gw2.size() / 12)) {
    probe(g.w2(), gw2, i);
  }
  const double rel = worst / std::max(scale, 1e-300);
  const bool ok = rel < 1e-5 && scale > 0;
  if (rank == 0) {
    std::printf(
        "gradient check (%s, %d weights, f64, eps %.0e): max |fd - analytic| / max "
        "|analytic| = %.2e -> %s\n",
        netsparse::to_string(o.modes.front()), checked, eps, rel, ok ? "OK" : "FAILED");
  }
  return ok ? 0 : 1;
}

// 1 if `curve` agrees with the curve in `path` (one loss per line, as --curve-out writes) to
// relative `tolerance` (0: bit for bit), else 0; prints the verdict.
int expect_curve(const std::vector<double>& curve, const std::string& path, double tolerance) {
  std::FILE* f = std::fopen(path.c_str(), "r");
  if (f == nullptr) {
    std::printf("  FAILED: cannot read the expected curve %s\n", path.c_str());
    return 0;
  }
  std::vector<double> expected;
  double loss = 0;
  while (std::fscanf(f, "%la", &loss) == 1) expected.push_back(loss);
  std::fclose(f);
  if (expected.size() != curve.size()) {
    std::printf("  FAILED: %s has %zu epochs, this run %zu\n", path.c_str(), expected.size(),
                curve.size());
    return 0;
  }
  double worst = 0;
  std::size_t differing = 0;
  for (std::size_t e = 0; e < curve.size(); ++e) {
    if (curve[e] != expected[e]) ++differing;
    worst = std::max(worst, std::abs(curve[e] - expected[e]) / std::abs(expected[e]));
  }
  const bool ok = tolerance > 0 ? worst <= tolerance : differing == 0;
  char limit[32] = "0, bit for bit";
  if (tolerance > 0) std::snprintf(limit, sizeof limit, "%.1e", tolerance);
  std::printf(
      "  loss curve against %s: %zu of %zu epochs differ, by at most %.2e (relative; "
      "tolerance %s) -> %s\n",
      path.c_str(), differing, curve.size(), worst, limit, ok ? "OK" : "FAILED");
  return ok ? 1 : 0;
}

struct RunResult {
  std::vector<std::vector<double>> curves;  // per round
  std::vector<EpochTimes> epochs;           // max over ranks, epochs after the first, pooled
  std::vector<double> build;                // per round: constructing the model (engine open,
                                            // first setup), max over ranks
  std::vector<double> first;                // per round: the first epoch, max over ranks
  double fc = -1;                           // engine F+C rate (RIG modes), last round
};

// OpenMP threads per rank: --threads, else OpenMP's own number capped at this rank's share of
// the host's cores. Uncapped, two ranks on two cores with OpenMP's default of one thread per
// core ran four threads: every parallel region's barrier and every MPI wait then cost scheduler
// time slices, su's and inspector-executor's per-epoch setup (the tiling's parallel loops)
// 296-471 ms on kron:10 against 0.4-0.7 ms (docs/benchmarks.md, "bench_gcn's setup").
// Returns the ranks on this host.
int choose_threads(const Options& o) {
  MPI_Comm node;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
  int local = 1;
  MPI_Comm_size(node, &local);
  MPI_Comm_free(&node);
  if (o.threads > 0) {
    omp_set_num_threads(o.threads);
  } else {
    const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    const int share = std::max(1, cores / local);
    if (omp_get_max_threads() > share) omp_set_num_threads(share);
  }
  return local;
}

int run(const Options& o, int rank) {
  const int local_ranks = choose_threads(o);
  DistMatrix g0 = netsparse::load_distributed_matrix(MPI_COMM_WORLD, o.matrix);
  if (g0.n_rows() != g0.n_cols()) {
    throw std::invalid_argument("the graph must be square, " + o.matrix + " is " +
                                std::to_string(g0.n_rows()) + " x " + std::to_string(g0.n_cols()));
  }
  // The library's collectives communicator for the gradient sums: opened once (collective), used
  // by every training run, closed when run() returns.
  netsparse::Collectives coll;
  if (!o.grad_allreduce_mpi) coll = netsparse::open_collectives(MPI_COMM_WORLD);
  netsparse::Collectives* grad_coll = o.grad_allreduce_mpi ? nullptr : &coll;
  if (o.check_gradients) return check_gradients(g0, o, rank, grad_coll);
  if (rank == 0) {
    std::printf(
        "gcn_train: %s, %lld nodes, %lld edges, %d ranks (%d on this host of %u cores) x %d "
        "OpenMP threads; 2 layers %d -> %d -> %d, fanout %d, %s lr %g, %d epochs x %d rounds, "
        "backward via %s, gradients summed by %s\n",
        o.matrix.c_str(), static_cast<long long>(g0.n_rows()),
        static_cast<long long>(g0.nnz_global()), g0.nranks(), local_ranks,
        std::max(1u, std::thread::hardware_concurrency()), omp_get_max_threads(), o.features,
        o.hidden, o.classes, o.fanout, o.adam ? "adam" : "sgd", o.lr, o.epochs, o.rounds,
        netsparse::to_string(o.backward),
        o.grad_allreduce_mpi ? "MPI_Allreduce"
        : o.reproducible     ? "the library's reproducible allreduce"
                             : "the library's allreduce");
  }
  int status = 0;
  std::map<std::string, std::map<CommMode, RunResult>> all;
  std::map<std::string, double> permute_seconds;
  std::map<std::string, std::pair<double, double>> whole_graph_locality;  // ghosts, remote nnz
  std::vector<double> first_order_curve;                  // the first run's reference curve
  std::vector<std::pair<std::string, std::string>> keys;  // (run, its order), in run order
  // The orders' graphs first, then the runs interleaved round by round (every order, variant
  // and mode trains once per round, in turn, so that a load change on a shared machine hits
  // them alike), then the tables.
  std::vector<std::unique_ptr<DistMatrix>> permuted_of(o.orders.size());
  std::vector<std::vector<gidx_t>> inverse_of(o.orders.size());
  for (std::size_t oi = 0; oi < o.orders.size(); ++oi) {
    const std::string& order = o.orders[oi];
    std::unique_ptr<DistMatrix>& permuted = permuted_of[oi];
    std::vector<gidx_t>& inverse = inverse_of[oi];
    if (order == "random") {
      MPI_Barrier(MPI_COMM_WORLD);
      const double t0 = MPI_Wtime();
      std::vector<gidx_t> perm;
      permuted = std::make_unique<DistMatrix>(permute(g0, o.seed + 99, perm));
      permute_seconds[order] = max_over_ranks(MPI_Wtime() - t0);
      inverse.resize(perm.size());
      for (std::size_t i = 0; i < perm.size(); ++i) inverse[perm[i]] = static_cast<gidx_t>(i);
    } else if (order != "own") {
      // A locality ordering (lib/partition): the renumbered graph and, gathered on every rank,
      // the original id of every new node (features and labels follow it).
      MPI_Barrier(MPI_COMM_WORLD);
      const double t0 = MPI_Wtime();
      netsparse::PartitionedMatrix p =
          netsparse::reorder_graph(g0, netsparse::parse_graph_ordering(order));
      permute_seconds[order] = max_over_ranks(MPI_Wtime() - t0);
      inverse = all_of(p.original_rows, p.matrix);
      permuted = std::make_unique<DistMatrix>(std::move(p.matrix));
    }
    // The locality figure of the whole graph in this order: ghost rows of A + I per product.
    double full_ghosts = 0, full_remote = 0;
    {
      const DistMatrix& a = permuted ? *permuted : g0;
      std::vector<char> mark;
      count_remote(with_self_loops(a.local()), a.rows().begin(rank), a.rows().end(rank), mark,
                   full_ghosts, full_remote);
      full_ghosts = sum_over_ranks(full_ghosts);
      full_remote = sum_over_ranks(full_remote);
      whole_graph_locality[order] = {full_ghosts, full_remote};
    }
  }
  for (int round = 0; round < o.rounds; ++round) {
    for (std::size_t oi = 0; oi < o.orders.size(); ++oi) {
      const DistMatrix& a = permuted_of[oi] ? *permuted_of[oi] : g0;
      for (const std::string& variant : o.local_forward) {
        // One training run per (order, local forward variant): "own", "rcm+hybrid", ...
        const std::string key = variant == "dist" ? o.orders[oi] : o.orders[oi] + "+" + variant;
        for (CommMode mode : o.modes) {
          MPI_Barrier(MPI_COMM_WORLD);
          const double b0 = MPI_Wtime();
          Gcn<float> model(a, o, mode, grad_coll, inverse_of[oi], variant);
          RunResult& res = all[key][mode];
          res.build.push_back(max_over_ranks(MPI_Wtime() - b0));
          std::vector<double> curve;
          for (int e = 0; e < o.epochs; ++e) {
            EpochTimes t;
            curve.push_back(model.epoch(e, t));
            EpochTimes m;
            m.total = max_over_ranks(t.total);
            m.sample = max_over_ranks(t.sample);
            m.setup = max_over_ranks(t.setup);
            m.transpose = max_over_ranks(t.transpose);
            m.plan = max_over_ranks(t.plan);
            m.sparse = max_over_ranks(t.sparse);
            m.exchange = max_over_ranks(t.exchange);
            m.dense = max_over_ranks(t.dense);
            m.allreduce = max_over_ranks(t.allreduce);
            m.ghosts = sum_over_ranks(t.ghosts);
            m.remote_nnz = sum_over_ranks(t.remote_nnz);
            m.local_nnz = sum_over_ranks(t.local_nnz);
            m.dense_nnz = sum_over_ranks(t.dense_nnz);
            if (e == 0) res.first.push_back(m.total);
            if (e > 0 || o.epochs == 1) res.epochs.push_back(m);
          }
          res.curves.push_back(curve);
          res.fc = model.engine_fc_rate();
        }
      }
    }
  }
  for (const std::string& order : o.orders) {
    const double full_ghosts = whole_graph_locality[order].first;
    const double full_remote = whole_graph_locality[order].second;
    for (const std::string& variant : o.local_forward) {
      const std::string key = variant == "dist" ? order : order + "+" + variant;
      keys.emplace_back(key, order);
      auto& results = all[key];
      // The table: medians over the epochs (after the first) of every round.
      if (rank == 0) {
        std::printf(
            "\n%s order: time per epoch (median over the epochs after the first, every "
            "round; ms, max over ranks)\n",
            key.c_str());
        if (order != "own") {
          std::printf("  (the relabelling took %.2f ms, once)\n", permute_seconds[order] * 1e3);
        }
        std::printf(
            "  locality: whole graph A+I: %.0f ghost rows (distinct remote nodes, summed over "
            "ranks), %.0f remote nonzeros; ghosts = per steady epoch's sample (median)\n",
            full_ghosts, full_remote);
        std::printf(
            "  epoch = one steady epoch: sampling + its per-epoch setup + products + dense + "
            "allreduce;\n  first = the first epoch; build = constructing the model (engine open, "
            "first pattern), once per run\n");
        std::printf("  %-19s %8s %7s %7s %9s %7s %7s %8s %7s %7s %7s %6s %8s %8s %8s\n", "mode",
                    "epoch", "sample", "setup", "transpose", "plan", "sparse", "exchange", "dense",
                    "allred", "comm%", "F+C", "first", "build", "ghosts");
      }
      for (CommMode mode : o.modes) {
        const RunResult& r = results[mode];
        const auto med = [&](double EpochTimes::*f) {
          std::vector<double> v;
          for (const EpochTimes& t : r.epochs) v.push_back(t.*f);
          return median(v) * 1e3;
        };
        const double epoch = med(&EpochTimes::total);
        const double comm = med(&EpochTimes::exchange) + med(&EpochTimes::plan) +
                            med(&EpochTimes::transpose) + med(&EpochTimes::allreduce);
        if (rank == 0) {
          char fc[16] = "-";
          if (r.fc >= 0) std::snprintf(fc, sizeof fc, "%.1f%%", 100 * r.fc);
          std::printf(
              "  %-19s %8.2f %7.2f %7.2f %9.2f %7.2f %7.2f %8.2f %7.2f %7.2f %6.1f%% %6s %8.2f "
              "%8.2f %8.0f\n",
              netsparse::to_string(mode), epoch, med(&EpochTimes::sample), med(&EpochTimes::setup),
              med(&EpochTimes::transpose), med(&EpochTimes::plan), med(&EpochTimes::sparse),
              med(&EpochTimes::exchange), med(&EpochTimes::dense), med(&EpochTimes::allreduce),
              100.0 * comm / epoch, fc, median(r.first) * 1e3, median(r.build) * 1e3,
              med(&EpochTimes::ghosts) / 1e3);
        }
      }
      const auto epoch_of = [&](CommMode m) {
        std::vector<double> v;
        for (const EpochTimes& t : results[m].epochs) v.push_back(t.total);
        return median(v);
      };
      if (rank == 0 && results.count(CommMode::netsparse)) {
        for (CommMode other : {CommMode::inspector_executor, CommMode::su}) {
          if (!results.count(other)) continue;
          const RunResult& n = results[CommMode::netsparse];
          const RunResult& x = results[other];
          const auto whole = [&](const RunResult& r, CommMode m) {
            return median(r.build) + median(r.first) + (o.epochs - 1) * epoch_of(m);
          };
          std::printf(
              "  netsparse vs %s: %.2fx per steady epoch (its per-epoch setup included), %.2fx "
              "for the whole run of %d epochs (build + first + the rest)\n",
              netsparse::to_string(other), epoch_of(other) / epoch_of(CommMode::netsparse),
              whole(x, other) / whole(n, CommMode::netsparse), o.epochs);
        }
      }
      // Loss curves (first round of every mode), their agreement and the drop.
      const std::vector<double>& ref = results[o.modes.front()].curves.front();
      double disagree = 0;
      for (CommMode mode : o.modes) {
        for (const auto& curve : results[mode].curves) {
          for (std::size_t e = 0; e < curve.size(); ++e) {
            disagree = std::max(disagree, std::abs(curve[e] - ref[e]) / std::abs(ref[e]));
          }
          if (o.expect_drop > 0 && !(curve.back() < o.expect_drop * curve.front())) {
            if (rank == 0) {
              std::printf("  FAILED: %s: final loss %.6f is not below %.2f x the initial %.6f\n",
                          netsparse::to_string(mode), curve.back(), o.expect_drop, curve.front());
            }
            status = 1;
          }
        }
      }
      if (rank == 0) {
        if (o.print_curve) {
          std::printf("  loss per epoch:\n  %5s", "epoch");
          for (CommMode mode : o.modes) std::printf(" %19s", netsparse::to_string(mode));
          std::printf("\n");
          for (int e = 0; e < o.epochs; ++e) {
            std::printf("  %5d", e);
            for (CommMode mode : o.modes) std::printf(" %19.7f", results[mode].curves.front()[e]);
            std::printf("\n");
          }
        }
        std::printf(
            "  loss %.6f -> %.6f (x%.3f); curves of all modes and rounds agree to %.2e "
            "(relative)\n",
            ref.front(), ref.back(), ref.back() / ref.front(), disagree);
      }
      // Across orders: the first order's curve is the reference (the same task, the nodes
      // relabelled; equal up to summation order when the sample is the whole graph).
      if (first_order_curve.empty()) {
        first_order_curve = ref;
      } else {
        double across = 0;
        for (std::size_t e = 0; e < ref.size(); ++e) {
          across = std::max(
              across, std::abs(ref[e] - first_order_curve[e]) / std::abs(first_order_curve[e]));
        }
        if (rank == 0) {
          std::printf("  the loss curve agrees with the %s run's to %.2e (relative)\n",
                      keys.front().first.c_str(), across);
        }
        disagree = std::max(disagree, across);
      }
      if (o.agree > 0 && disagree > o.agree) {
        if (rank == 0) std::printf("  FAILED: the loss curves differ by more than %.1e\n", o.agree);
        status = 1;
      }
    }  // variant
  }
  // The loss curve of the first order, mode and round: written for another run to compare with,
  // or compared with another run's (rank 0 reads; every rank returns the verdict).
  const std::vector<double>& curve = all[keys.front().first][o.modes.front()].curves.front();
  if (!o.curve_out.empty() && rank == 0) {
    std::FILE* f = std::fopen(o.curve_out.c_str(), "w");
    if (f == nullptr) throw std::runtime_error("cannot write " + o.curve_out);
    for (double loss : curve) std::fprintf(f, "%a\n", loss);
    std::fclose(f);
  }
  if (!o.expect_curve.empty()) {
    int agrees = 1;
    if (rank == 0) agrees = expect_curve(curve, o.expect_curve, o.expect_curve_tolerance);
    MPI_Bcast(&agrees, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (!agrees) status = 1;
  }
  // Every order side by side: the locality figure and the time per steady epoch, per mode.
  if (rank == 0 && all.size() >= 2) {
    std::printf(
        "\norders (and local forward variants) side by side (ghosts: distinct remote rows "
        "fetched by a forward product, summed over ranks; epoch: median ms):\n  %-20s %10s %13s "
        "%11s %12s %7s",
        "run", "relabel ms", "ghosts (A+I)", "remote nnz", "ghosts/epoch", "dense%");
    for (CommMode mode : o.modes) std::printf(" %19s", netsparse::to_string(mode));
    std::printf("\n");
    for (const auto& [key, order] : keys) {
      std::vector<double> g, dense;
      for (const auto& t : all[key][o.modes.front()].epochs) {
        g.push_back(t.ghosts);
        dense.push_back(t.local_nnz > 0 ? 100 * t.dense_nnz / t.local_nnz : 0);
      }
      std::printf("  %-20s %10.2f %13.0f %11.0f %12.0f %6.1f%%", key.c_str(),
                  permute_seconds.count(order) ? permute_seconds[order] * 1e3 : 0.0,
                  whole_graph_locality[order].first, whole_graph_locality[order].second, median(g),
                  median(dense));
      for (CommMode mode : o.modes) {
        std::vector<double> v;
        for (const auto& t : all[key][mode].epochs) v.push_back(t.total);
        std::printf(" %19.2f", median(v) * 1e3);
      }
      std::printf("\n");
    }
  }
  // Reordering: own vs random, per mode.
  if (rank == 0 && all.count("own") && all.count("random")) {
    std::printf(
        "\nreordering (random relabelling vs the graph's own order; relabelling cost "
        "%.2f ms, %.2f epochs of netsparse in its own order):\n",
        permute_seconds["random"] * 1e3,
        all["own"].count(CommMode::netsparse)
            ? permute_seconds["random"] /
                  [&] {
                    std::vector<double> v;
                    for (const auto& t : all["own"][CommMode::netsparse].epochs)
                      v.push_back(t.total);
                    return median(v);
                  }()
            : 0.0);
    for (CommMode mode : o.modes) {
      std::vector<double> own, rnd;
      for (const auto& t : all["own"][mode].epochs) own.push_back(t.total);
      for (const auto& t : all["random"][mode].epochs) rnd.push_back(t.total);
      std::printf("  %-19s epoch %.2f -> %.2f ms (x%.2f)", netsparse::to_string(mode),
                  median(own) * 1e3, median(rnd) * 1e3, median(rnd) / median(own));
      if (all["own"][mode].fc >= 0) {
        std::printf(", engine F+C %.1f%% -> %.1f%%", 100 * all["own"][mode].fc,
                    100 * all["random"][mode].fc);
      }
      std::printf("\n");
    }
  }
  return status;
}

}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  // A rank of this host that dies ends this one (exit 2) instead of leaving it waiting for
  // ever in MPI; ns_finalize_or_exit below leaves without MPI_Finalize after a peer failure.
  ns_watch_host_peers(MPI_COMM_WORLD, 2);
  int status = 0;
  try {
    const Options o = parse(argc, argv);
    status = run(o, rank);
  } catch (const std::runtime_error& e) {
    if (std::string(e.what()) == "help") {
      if (rank == 0) std::fputs(kHelp, stdout);
    } else {
      if (rank == 0) std::fprintf(stderr, "gcn_train: %s\n", e.what());
      status = 2;
    }
  } catch (const std::exception& e) {
    if (rank == 0) std::fprintf(stderr, "gcn_train: %s\n", e.what());
    status = 2;
  }
  return ns_finalize_or_exit(status);
}
