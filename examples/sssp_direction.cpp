// Direction-switching single-source shortest paths over a row-distributed weighted graph, on the
// RIG engine's two verbs (issue 40 item 5: MeNDA's use of A and A^T, the SSSP beside the BFS of
// bfs_direction.cpp). Bellman-Ford rounds, each in one direction:
//   push (A)    each rank relaxes the out-edges (rows of A) of its frontier (the vertices whose
//               distance fell in the last round) and sends every candidate d(u) + w(u, v) to
//               v's owner as one NS_WR_RIS with NS_RIS_MIN: the owners' engines apply the
//               minimum in place (repeats combined at the sender first), the local ones too.
//   pull (A^T)  each rank gathers the distances of the remote in-neighbours of its vertices with
//               one NS_WR_RIG (distinct ids: NS_SEND_UNIQUE) and takes, for every vertex, the
//               minimum over its in-edges (rows of A^T) of d(u) + w(u, v).
//   switching   pull when the frontier's out-edges exceed the graph's edges / alpha (a dense
//               frontier: the pull reads every in-edge once instead of pushing most of them),
//               push otherwise.
// The distances are the region both verbs use (one float64 per vertex, ns_reg_props). A round
// ends with a reduction that keeps serving (MPI_Iallreduce tested between ns_progress calls:
// with inline progress an engine answers only while its rank calls into the library) after
// every rank's work requests completed (a RIS completes once its owners applied it), so no rank
// reads its distances while a peer's engine may still write them; the search ends when no
// distance fell.
//
//   mpirun -np 2 sssp_direction [--matrix SPEC] [--sources V,V,...|auto:N] [--alpha A]
//                               [--progress auto|inline|thread] [--check] [--quiet]
//
// A[u, v] != 0 is an edge u -> v of weight w(u, v) = 1 + (7 u + 13 v) mod 9 (integers: every
// distance is exact in float64, whatever the order of the minima). --check compares every
// distance with Dijkstra on the whole graph (each rank loads it alone) and exits 1 on any
// difference. Every source is searched twice: direction-switching and push only.
#include <mpi.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <functional>
#include <limits>
#include <optional>
#include <queue>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "netsparse/dist_matrix.hpp"
#include "netsparse/dist_transpose.hpp"
#include "netsparse/netsparse_mpi.h"

namespace {

using netsparse::CsrMatrix;
using netsparse::DistMatrix;
using netsparse::gidx_t;

constexpr double kInf = std::numeric_limits<double>::infinity();

double weight(gidx_t u, gidx_t v) {
  return 1.0 + static_cast<double>((7 * u + 13 * v) % 9);
}

struct Options {
  std::string matrix = "gen:kron:12";
  std::string sources = "auto:2";
  double alpha = 4;
  int progress = NS_PROGRESS_AUTO;
  bool check = false, quiet = false;
};

std::int64_t sum_all(std::int64_t v, MPI_Comm comm) {
  MPI_Allreduce(MPI_IN_PLACE, &v, 1, MPI_INT64_T, MPI_SUM, comm);
  return v;
}

// A library call that failed: its status string and the reason the library recorded.
void check(ns_status_t s, const char* call) {
  if (s < 0) {
    throw std::runtime_error(std::string(call) + " failed: " + ns_status_str(s) + " (" +
                             ns_last_error() + ")");
  }
}

struct Round {
  bool pull = false;
  std::int64_t frontier = 0, edges = 0;  // summed over ranks
  double seconds = 0;
};

class Sssp {
 public:
  Sssp(const DistMatrix& a, const DistMatrix& at, const Options& o)
      : a_(a),
        at_(at),
        o_(o),
        first_(a.rows().begin(a.rank())),
        n_local_(a.rows().size(a.rank())),
        d_(static_cast<std::size_t>(n_local_), kInf) {
    for (int p = 0; p <= a.nranks(); ++p) {
      offsets_.push_back(static_cast<std::uint64_t>(a.rows().offsets()[p]));
    }
    ns_context_attr attr{};
    attr.comp_mask = NS_CTX_ATTR_PROGRESS;
    attr.progress_mode = o.progress;
    check(ns_open_mpi(a.comm(), &attr, &ctx_), "ns_open_mpi");
    check(ns_reg_props(ctx_, d_.data(), static_cast<std::uint64_t>(n_local_), sizeof(double),
                       offsets_.data(), &mr_),
          "ns_reg_props");
    check(ns_create_cq(ctx_, 16, &cq_), "ns_create_cq");
    check(ns_create_qp(ctx_, cq_, 16, &qp_), "ns_create_qp");
    // The pull's remote in-neighbours: the distinct columns of A^T's local rows owned elsewhere,
    // sorted, and each in-edge's place in them (-1: a local one).
    const CsrMatrix& t = at_.local();
    std::vector<gidx_t> cols;
    for (gidx_t c : t.col_idx) {
      if (c < first_ || c >= first_ + n_local_) cols.push_back(c);
    }
    std::sort(cols.begin(), cols.end());
    cols.erase(std::unique(cols.begin(), cols.end()), cols.end());
    remote_in_.assign(cols.begin(), cols.end());
    remote_d_.resize(remote_in_.size());
    edge_slot_.resize(t.col_idx.size());
    for (std::size_t e = 0; e < t.col_idx.size(); ++e) {
      const gidx_t c = t.col_idx[e];
      edge_slot_[e] = c >= first_ && c < first_ + n_local_
                          ? -1
                          : std::lower_bound(cols.begin(), cols.end(), c) - cols.begin();
    }
  }
  ~Sssp() {
    if (qp_ != nullptr) ns_destroy_qp(qp_);
    if (cq_ != nullptr) ns_destroy_cq(cq_);
    if (mr_ != nullptr) ns_dereg_props(mr_);
    if (ctx_ != nullptr) ns_close(ctx_);
  }
  Sssp(const Sssp&) = delete;
  Sssp& operator=(const Sssp&) = delete;

  // Distances of this rank's vertices from `source`, and the rounds that found them.
  std::vector<double> search(gidx_t source, bool switching, std::vector<Round>& rounds) {
    MPI_Barrier(a_.comm());  // nobody reads d_ from the previous search any more
    std::fill(d_.begin(), d_.end(), kInf);
    std::vector<gidx_t> frontier;
    if (source >= first_ && source < first_ + n_local_) {
      d_[static_cast<std::size_t>(source - first_)] = 0;
      frontier.push_back(source - first_);
    }
    const std::int64_t m = a_.nnz_global();
    for (;;) {
      const double t0 = MPI_Wtime();
      // The round's starting distances, taken before the round's first collective: no peer's
      // work request of this round can reach this rank's distances before every rank passed it.
      before_ = d_;
      const CsrMatrix& rows = a_.local();
      std::int64_t out_edges = 0;
      for (gidx_t u : frontier) out_edges += rows.row_ptr[u + 1] - rows.row_ptr[u];
      const std::int64_t frontier_edges = sum_all(out_edges, a_.comm());
      Round r;
      r.frontier = sum_all(static_cast<std::int64_t>(frontier.size()), a_.comm());
      if (r.frontier == 0) break;
      r.pull = switching && static_cast<double>(frontier_edges) > static_cast<double>(m) / o_.alpha;
      r.edges = r.pull ? pull() : push(frontier);
      // Every rank's work requests completed (their owners applied them): the distances are
      // final for this round; the frontier is what fell.
      r.edges = sum_serving(r.edges);
      frontier.clear();
      for (gidx_t v = 0; v < n_local_; ++v) {
        if (d_[static_cast<std::size_t>(v)] < before_[static_cast<std::size_t>(v)]) {
          frontier.push_back(v);
        }
      }
      r.seconds = MPI_Wtime() - t0;
      rounds.push_back(r);
    }
    return d_;
  }

 private:
  // Relaxes the out-edges of the frontier through one scatter-reduce (min) to every owner.
  std::int64_t push(const std::vector<gidx_t>& frontier) {
    const CsrMatrix& rows = a_.local();
    idx_.clear();
    values_.clear();
    for (gidx_t u : frontier) {
      // From the round's snapshot: the peers' scatter-reduces may be writing d_ meanwhile.
      const double du = before_[static_cast<std::size_t>(u)];
      for (std::int64_t e = rows.row_ptr[u]; e < rows.row_ptr[u + 1]; ++e) {
        const gidx_t v = rows.col_idx[static_cast<std::size_t>(e)];
        idx_.push_back(static_cast<std::uint64_t>(v));
        values_.push_back(du + weight(first_ + u, v));
      }
    }
    ns_send_wr wr{};
    wr.wr_id = 1;
    wr.opcode = NS_WR_RIS;
    wr.send_flags = NS_SEND_SIGNALED;
    wr.wr.ris.mr = mr_;
    wr.wr.ris.idx = idx_.data();
    wr.wr.ris.count = idx_.size();
    wr.wr.ris.values = values_.data();
    wr.wr.ris.values_bytes = values_.size() * sizeof(double);
    wr.wr.ris.op = NS_RIS_MIN;
    wr.wr.ris.datatype = NS_RIS_FLOAT64;
    post_and_wait(wr, "scatter-reduce");
    return static_cast<std::int64_t>(idx_.size());
  }

  // Every vertex takes the minimum over its in-edges; the remote in-neighbours' distances come
  // in one gather. New distances are written after every rank's gather completed (a barrier),
  // since a peer's gather reads them through this rank's engine.
  std::int64_t pull() {
    ns_send_wr wr{};
    wr.wr_id = 2;
    wr.opcode = NS_WR_RIG;
    wr.send_flags = NS_SEND_SIGNALED | NS_SEND_NEW_EPOCH | NS_SEND_UNIQUE;
    wr.wr.rig.mr = mr_;
    wr.wr.rig.idx = remote_in_.data();
    wr.wr.rig.count = remote_in_.size();
    wr.wr.rig.out = remote_d_.data();
    wr.wr.rig.layout = NS_RIG_LAYOUT_POSITIONAL;
    wr.wr.rig.out_bytes = remote_d_.size() * sizeof(double);
    post_and_wait(wr, "gather");
    const CsrMatrix& t = at_.local();
    next_ = d_;
    for (gidx_t v = 0; v < n_local_; ++v) {
      double best = next_[static_cast<std::size_t>(v)];
      for (std::int64_t e = t.row_ptr[v]; e < t.row_ptr[v + 1]; ++e) {
        const auto ei = static_cast<std::size_t>(e);
        const gidx_t u = t.col_idx[ei];
        const double du = edge_slot_[ei] < 0 ? d_[static_cast<std::size_t>(u - first_)]
                                             : remote_d_[static_cast<std::size_t>(edge_slot_[ei])];
        best = std::min(best, du + weight(u, first_ + v));
      }
      next_[static_cast<std::size_t>(v)] = best;
    }
    (void)sum_serving(0);  // a barrier that serves: every rank's gather has completed
    std::copy(next_.begin(), next_.end(), d_.begin());  // d_'s buffer is the registered region
    return static_cast<std::int64_t>(t.col_idx.size());
  }

  // The sum over ranks of v, serving the peers meanwhile: with inline progress a rank's engine
  // answers its peers' gathers and applies their scatter-reduces only while the rank calls into
  // the library, so no rank may block in MPI while a peer's work request may still need it.
  std::int64_t sum_serving(std::int64_t v) {
    MPI_Request request = MPI_REQUEST_NULL;
    MPI_Iallreduce(MPI_IN_PLACE, &v, 1, MPI_INT64_T, MPI_SUM, a_.comm(), &request);
    for (int done = 0; !done;) {
      check(ns_progress(ctx_), "ns_progress");
      MPI_Test(&request, &done, MPI_STATUS_IGNORE);
    }
    return v;
  }

  void post_and_wait(ns_send_wr& wr, const char* what) {
    if ((wr.opcode == NS_WR_RIS && wr.wr.ris.count == 0) ||
        (wr.opcode == NS_WR_RIG && wr.wr.rig.count == 0)) {
      return;  // nothing to send; the engine still serves the peers on the next call
    }
    ns_send_wr* bad = nullptr;
    check(ns_post_send(qp_, &wr, &bad), "ns_post_send");
    ns_wc wc{};
    const int n = ns_cq_wait(cq_, 1, &wc, 30000);
    check(n, "ns_cq_wait");
    if (n == 0) throw std::runtime_error(std::string(what) + ": no completion within 30 s");
    if (wc.status != NS_WC_SUCCESS) {
      throw std::runtime_error(std::string(what) + " failed: " + ns_wc_status_str(wc.status));
    }
  }

  const DistMatrix& a_;
  const DistMatrix& at_;
  const Options& o_;
  gidx_t first_, n_local_;
  std::vector<double> d_, next_, before_;
  std::vector<std::uint64_t> offsets_;
  std::vector<std::uint64_t> remote_in_;
  std::vector<double> remote_d_;
  std::vector<std::ptrdiff_t> edge_slot_;
  std::vector<std::uint64_t> idx_;
  std::vector<double> values_;
  ns_context* ctx_ = nullptr;
  ns_mr* mr_ = nullptr;
  ns_cq* cq_ = nullptr;
  ns_qp* qp_ = nullptr;
};

// Dijkstra on the whole graph (the --check reference).
std::vector<double> dijkstra(const CsrMatrix& a, gidx_t source) {
  std::vector<double> d(static_cast<std::size_t>(a.n_rows), kInf);
  using Item = std::pair<double, gidx_t>;
  std::priority_queue<Item, std::vector<Item>, std::greater<>> q;
  d[static_cast<std::size_t>(source)] = 0;
  q.push({0, source});
  while (!q.empty()) {
    const auto [du, u] = q.top();
    q.pop();
    if (du > d[static_cast<std::size_t>(u)]) continue;
    for (std::int64_t e = a.row_ptr[u]; e < a.row_ptr[u + 1]; ++e) {
      const gidx_t v = a.col_idx[static_cast<std::size_t>(e)];
      const double dv = du + weight(u, v);
      if (dv < d[static_cast<std::size_t>(v)]) {
        d[static_cast<std::size_t>(v)] = dv;
        q.push({dv, v});
      }
    }
  }
  return d;
}

bool parse(int argc, char** argv, Options& o, std::string& error) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const auto value = [&]() -> const char* { return i + 1 < argc ? argv[++i] : nullptr; };
    if (arg == "--check") {
      o.check = true;
    } else if (arg == "--quiet") {
      o.quiet = true;
    } else if (arg == "--matrix" || arg == "--sources" || arg == "--alpha" || arg == "--progress") {
      const char* v = value();
      if (v == nullptr) {
        error = arg + " needs a value";
        return false;
      }
      if (arg == "--matrix") o.matrix = v;
      if (arg == "--progress") {
        const std::string p = v;
        if (p != "auto" && p != "inline" && p != "thread") {
          error = "--progress takes auto, inline or thread, got '" + p + "'";
          return false;
        }
        o.progress = p == "inline"   ? NS_PROGRESS_INLINE
                     : p == "thread" ? NS_PROGRESS_THREAD
                                     : NS_PROGRESS_AUTO;
      }
      if (arg == "--sources") o.sources = v;
      if (arg == "--alpha") {
        char* end = nullptr;
        o.alpha = std::strtod(v, &end);
        if (*end != '\0' || !(o.alpha > 0)) {
          error = std::string("--alpha must be a positive number, got '") + v + "'";
          return false;
        }
      }
    } else {
      error = "unknown or incomplete argument " + arg;
      return false;
    }
  }
  return true;
}

// The sources: a list of vertex ids, or auto:N = N vertices with out-edges picked by a fixed
// hash sequence (the same on every rank). An id outside [0, n) is refused with `error`.
bool choose_sources(const Options& o, const DistMatrix& a, std::vector<gidx_t>& sources,
                    std::string& error) {
  const gidx_t n = a.n_rows();
  if (o.sources.rfind("auto:", 0) == 0) {
    const int want = std::atoi(o.sources.c_str() + 5);
    std::uint64_t z = 0x2545f4914f6cdd1dULL;
    for (int tries = 0; static_cast<int>(sources.size()) < want && tries < 1000; ++tries) {
      z = z * 6364136223846793005ULL + 1442695040888963407ULL;
      const gidx_t v = static_cast<gidx_t>((z >> 17) % static_cast<std::uint64_t>(n));
      const gidx_t first = a.rows().begin(a.rank());
      std::int64_t degree = 0;
      if (v >= first && v < a.rows().end(a.rank())) {
        degree = a.local().row_ptr[v - first + 1] - a.local().row_ptr[v - first];
      }
      if (sum_all(degree, a.comm()) > 0) sources.push_back(v);
    }
    return true;
  }
  std::stringstream list(o.sources);
  std::string item;
  while (std::getline(list, item, ',')) {
    char* end = nullptr;
    const long long v = std::strtoll(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0' || v < 0 || v >= n) {
      error = "source vertex '" + item + "' is not a vertex of " + a.name() + " (ids 0 .. " +
              std::to_string(n - 1) + ")";
      return false;
    }
    sources.push_back(static_cast<gidx_t>(v));
  }
  return true;
}

int run(int argc, char** argv) {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  Options o;
  std::string error;
  const auto fail = [&](const std::string& why) {
    std::fprintf(stderr, "sssp_direction (rank %d): %s\n", rank, why.c_str());
    return 1;
  };
  // Every rank parses the same arguments and matrix, so every rank reports a bad one alike.
  if (!parse(argc, argv, o, error)) return fail(error);
  const DistMatrix a = netsparse::load_distributed_matrix(MPI_COMM_WORLD, o.matrix);
  if (a.n_rows() != a.n_cols() || a.rows().offsets() != a.cols().offsets()) {
    return fail("the graph must be square with rows and columns split alike, got " +
                std::to_string(a.n_rows()) + " x " + std::to_string(a.n_cols()));
  }
  std::vector<gidx_t> sources;
  if (!choose_sources(o, a, sources, error)) return fail(error);
  const DistMatrix at = netsparse::transpose(a);
  std::optional<CsrMatrix> whole;
  if (o.check) whole = netsparse::load_distributed_matrix(MPI_COMM_SELF, o.matrix).local();
  if (rank == 0) {
    std::printf(
        "graph %s: %lld vertices, %lld edges, %d ranks; pull when the frontier's "
        "out-edges exceed edges / %g\n",
        a.name().c_str(), static_cast<long long>(a.n_rows()),
        static_cast<long long>(a.nnz_global()), a.nranks(), o.alpha);
  }
  std::int64_t mismatches = 0;
  {
    Sssp sssp(a, at, o);
    for (gidx_t source : sources) {
      std::vector<Round> sw_rounds, push_rounds;
      const std::vector<double> sw = sssp.search(source, true, sw_rounds);
      const std::vector<double> pushed = sssp.search(source, false, push_rounds);
      std::int64_t reached = 0;
      for (double d : sw) reached += d < kInf;
      reached = sum_all(reached, a.comm());
      if (whole) {
        const std::vector<double> want = dijkstra(*whole, source);
        const gidx_t first = a.rows().begin(rank);
        for (std::size_t i = 0; i < sw.size(); ++i) {
          mismatches += sw[i] != want[static_cast<std::size_t>(first) + i];
          mismatches += pushed[i] != want[static_cast<std::size_t>(first) + i];
        }
      }
      const auto total = [](const std::vector<Round>& rounds, bool edges) {
        double s = 0;
        for (const Round& r : rounds) s += edges ? static_cast<double>(r.edges) : r.seconds;
        return s;
      };
      if (rank == 0) {
        std::printf("source %lld: %lld vertices reached, %zu rounds switching, %zu push only\n",
                    static_cast<long long>(source), static_cast<long long>(reached),
                    sw_rounds.size(), push_rounds.size());
        if (!o.quiet) {
          std::printf("  %-5s %-6s %12s %14s %10s\n", "round", "dir", "frontier", "edges", "ms");
          for (std::size_t i = 0; i < sw_rounds.size(); ++i) {
            const Round& r = sw_rounds[i];
            std::printf("  %-5zu %-6s %12lld %14lld %10.3f\n", i, r.pull ? "pull" : "push",
                        static_cast<long long>(r.frontier), static_cast<long long>(r.edges),
                        r.seconds * 1e3);
          }
        }
        std::printf("  switching %.3f ms, push only %.3f ms: %.2fx; edges examined %.0f vs %.0f\n",
                    total(sw_rounds, false) * 1e3, total(push_rounds, false) * 1e3,
                    total(push_rounds, false) / total(sw_rounds, false), total(sw_rounds, true),
                    total(push_rounds, true));
      }
    }
  }
  if (o.check) {
    mismatches = sum_all(mismatches, a.comm());
    if (rank == 0) {
      std::printf("check against Dijkstra: %lld differing distances\n",
                  static_cast<long long>(mismatches));
    }
    if (mismatches != 0) return 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  int rc = 1;
  try {
    rc = run(argc, argv);
  } catch (const std::exception& e) {
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    std::fprintf(stderr, "sssp_direction (rank %d): %s\n", rank, e.what());
  }
  MPI_Finalize();
  return rc;
}
