// Direction-switching breadth-first search (Beamer, Asanovic, Patterson, SC '12) over a
// row-distributed graph, with A for the top-down steps and A^T for the bottom-up ones (MeNDA's use
// of both, ISCA '22 §4.1). A^T comes from the non-blocking transpose: transpose_start() before the
// first search, the first top-down steps run while it is pending, and wait() is called when the
// heuristic first asks for a bottom-up step.
//
//   mpirun -np 2 bfs_direction [--matrix SPEC] [--sources V,V,...|auto:N] [--alpha A] [--beta B]
//                              [--progress automatic|calls|thread] [--check] [--quiet]
//
// A[u, v] != 0 is an edge u -> v (the graph may be directed: gen:kron is). Rank p owns the
// vertices of its rows. Every source is searched twice: direction-switching and top-down only.
//   top-down   each rank scans the out-edges (rows of A) of its frontier vertices; the
//              discovered vertices of other ranks go to their owners in one MPI_Alltoallv
//              (each remote vertex sent at most once per search).
//   bottom-up  the frontier as a bitmap on every rank (MPI_Allgatherv of each rank's words);
//              each rank scans the in-edges (rows of A^T) of its unvisited vertices and stops
//              at the first parent found in the frontier.
//   switching  top-down -> bottom-up when the frontier's out-edges m_f exceed the unvisited
//              vertices' in-edges m_u / alpha; back when the frontier shrinks below n / beta.
// --check compares every vertex's level with a sequential BFS of the whole graph (each rank
// loads the whole graph alone for that) and exits 1 on any difference.
#include <mpi.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "netsparse/dist_matrix.hpp"
#include "netsparse/dist_transpose.hpp"

namespace {

using netsparse::CsrMatrix;
using netsparse::DistMatrix;
using netsparse::gidx_t;

struct Options {
  std::string matrix = "gen:kron:14";
  std::string sources = "auto:3";
  double alpha = 14, beta = 24;  // Beamer's values
  netsparse::TransposeProgress progress = netsparse::TransposeProgress::automatic;
  bool check = false, quiet = false;
};

enum class Direction { top_down, bottom_up };

struct StepRecord {
  int level = 0;
  Direction direction = Direction::top_down;
  std::int64_t frontier = 0;  // vertices in the frontier the step expands
  std::int64_t edges = 0;     // edges the step examined (summed over ranks)
  double seconds = 0;
};

struct SearchResult {
  std::vector<std::int32_t> level;  // of this rank's vertices, -1: unreached
  std::vector<StepRecord> steps;
  double seconds = 0;
};

std::int64_t sum_all(std::int64_t v, MPI_Comm comm) {
  MPI_Allreduce(MPI_IN_PLACE, &v, 1, MPI_INT64_T, MPI_SUM, comm);
  return v;
}

// Where the graph and its transpose live on this rank, and the search's scratch.
class Bfs {
 public:
  Bfs(const DistMatrix& a, const Options& options) : a_(a), options_(options) {
    pending_ = netsparse::transpose_start(a, options.progress);
  }

  // A^T, waited for on first use (collective: every rank asks at the same step).
  const DistMatrix& transposed() {
    if (at_ == nullptr) {
      const double t0 = MPI_Wtime();
      at_ = &pending_.wait();
      wait_seconds_ = MPI_Wtime() - t0;
    }
    return *at_;
  }
  // Time the search blocked in wait() for A^T (the part of the transpose not hidden).
  [[nodiscard]] double wait_seconds() const { return wait_seconds_; }
  [[nodiscard]] const netsparse::PendingTranspose& pending() const { return pending_; }

  SearchResult search(gidx_t source, bool switching) {
    const MPI_Comm comm = a_.comm();
    const int me = a_.rank();
    const CsrMatrix& rows = a_.local();
    const gidx_t first = a_.rows().begin(me), n = a_.n_rows();
    SearchResult out;
    out.level.assign(static_cast<std::size_t>(rows.n_rows), -1);
    std::vector<std::uint64_t> sent((static_cast<std::size_t>(n) + 63) / 64, 0);
    std::vector<gidx_t> frontier;  // local indices
    if (source >= first && source < a_.rows().end(me)) {
      out.level[static_cast<std::size_t>(source - first)] = 0;
      frontier.push_back(source - first);
    }
    // The unvisited vertices' in-edges (m_u) and out-edges of the frontier (m_f), kept locally.
    std::int64_t unvisited_in = 0;
    const bool have_in = at_ != nullptr;
    for (gidx_t v = 0; v < rows.n_rows; ++v) {
      unvisited_in += have_in ? at_->local().row_ptr[v + 1] - at_->local().row_ptr[v]
                              : rows.row_ptr[v + 1] - rows.row_ptr[v];
    }
    Direction direction = Direction::top_down;
    std::int64_t previous_frontier = 0;
    const double t_search = MPI_Wtime();
    for (int depth = 0;; ++depth) {
      const double t0 = MPI_Wtime();
      std::int64_t frontier_out = 0;
      for (gidx_t u : frontier) frontier_out += rows.row_ptr[u + 1] - rows.row_ptr[u];
      // A pending transpose advances between the steps (TransposeProgress::calls needs this).
      if (at_ == nullptr) (void)pending_.test();
      // One allreduce decides the step on every rank alike (frontier size, m_f, m_u), so
      // wait() for A^T is entered by all ranks or none.
      std::int64_t totals[3] = {static_cast<std::int64_t>(frontier.size()), frontier_out,
                                unvisited_in};
      MPI_Allreduce(MPI_IN_PLACE, totals, 3, MPI_INT64_T, MPI_SUM, comm);
      const std::int64_t n_f = totals[0];
      if (n_f == 0) break;
      if (switching) {
        if (direction == Direction::top_down &&
            double(totals[1]) > double(totals[2]) / options_.alpha) {
          direction = Direction::bottom_up;
        } else if (direction == Direction::bottom_up && n_f < previous_frontier &&
                   double(n_f) < double(n) / options_.beta) {
          direction = Direction::top_down;
        }
        // A^T is needed now; its readiness only decides when wait() blocks, not the result.
        if (direction == Direction::bottom_up && at_ == nullptr) {
          (void)transposed();
          unvisited_in = 0;
          for (gidx_t v = 0; v < rows.n_rows; ++v) {
            if (out.level[static_cast<std::size_t>(v)] < 0) {
              unvisited_in += at_->local().row_ptr[v + 1] - at_->local().row_ptr[v];
            }
          }
        }
      }
      std::vector<gidx_t> next;
      std::int64_t examined = 0;
      if (direction == Direction::top_down) {
        examined = frontier_out;
        top_down(out.level, frontier, depth, sent, next);
      } else {
        examined = bottom_up(out.level, frontier, depth, next);
      }
      if (at_ != nullptr) {
        for (gidx_t v : next) {
          unvisited_in -= at_->local().row_ptr[v + 1] - at_->local().row_ptr[v];
        }
      } else {
        for (gidx_t v : next) unvisited_in -= rows.row_ptr[v + 1] - rows.row_ptr[v];
      }
      previous_frontier = n_f;
      frontier.swap(next);
      StepRecord rec;
      rec.level = depth;
      rec.direction = direction;
      rec.frontier = n_f;
      rec.edges = sum_all(examined, comm);
      rec.seconds = MPI_Wtime() - t0;
      out.steps.push_back(rec);
    }
    out.seconds = MPI_Wtime() - t_search;
    return out;
  }

 private:
  // Out-edges of the frontier; remote discoveries to their owners (once per search).
  void top_down(std::vector<std::int32_t>& level, const std::vector<gidx_t>& frontier, int depth,
                std::vector<std::uint64_t>& sent, std::vector<gidx_t>& next) {
    const MPI_Comm comm = a_.comm();
    const int me = a_.rank(), nranks = a_.nranks();
    const CsrMatrix& rows = a_.local();
    const gidx_t first = a_.rows().begin(me), last = a_.rows().end(me);
    std::vector<std::vector<gidx_t>> out(static_cast<std::size_t>(nranks));
    for (gidx_t u : frontier) {
      for (std::int64_t x = rows.row_ptr[u]; x < rows.row_ptr[u + 1]; ++x) {
        const gidx_t v = rows.col_idx[x];
        if (v >= first && v < last) {
          std::int32_t& l = level[static_cast<std::size_t>(v - first)];
          if (l < 0) {
            l = depth + 1;
            next.push_back(v - first);
          }
        } else if (!(sent[v / 64] >> (v % 64) & 1)) {
          sent[v / 64] |= std::uint64_t{1} << (v % 64);
          out[static_cast<std::size_t>(a_.rows().owner(v))].push_back(v);
        }
      }
    }
    std::vector<int> send_counts(nranks), recv_counts(nranks), send_displs(nranks),
        recv_displs(nranks);
    std::vector<gidx_t> packed;
    for (int q = 0; q < nranks; ++q) {
      send_displs[q] = static_cast<int>(packed.size());
      send_counts[q] = static_cast<int>(out[q].size());
      packed.insert(packed.end(), out[q].begin(), out[q].end());
    }
    MPI_Alltoall(send_counts.data(), 1, MPI_INT, recv_counts.data(), 1, MPI_INT, comm);
    int total = 0;
    for (int q = 0; q < nranks; ++q) {
      recv_displs[q] = total;
      total += recv_counts[q];
    }
    std::vector<gidx_t> got(static_cast<std::size_t>(total));
    MPI_Alltoallv(packed.data(), send_counts.data(), send_displs.data(), MPI_INT64_T, got.data(),
                  recv_counts.data(), recv_displs.data(), MPI_INT64_T, comm);
    for (gidx_t v : got) {
      std::int32_t& l = level[static_cast<std::size_t>(v - first)];
      if (l < 0) {
        l = depth + 1;
        next.push_back(v - first);
      }
    }
  }

  // In-edges of the unvisited vertices against the whole frontier's bitmap; returns the edges
  // examined on this rank.
  std::int64_t bottom_up(std::vector<std::int32_t>& level, const std::vector<gidx_t>& frontier,
                         int depth, std::vector<gidx_t>& next) {
    const MPI_Comm comm = a_.comm();
    const int me = a_.rank(), nranks = a_.nranks();
    const gidx_t n = a_.n_rows();
    // This rank's bits, word-aligned at its first vertex; then every rank's, shifted into place.
    const gidx_t n_local = a_.rows().size(me);
    std::vector<std::uint64_t> mine((static_cast<std::size_t>(n_local) + 63) / 64, 0);
    for (gidx_t u : frontier) mine[u / 64] |= std::uint64_t{1} << (u % 64);
    std::vector<int> counts(nranks), displs(nranks);
    int total = 0;
    for (int q = 0; q < nranks; ++q) {
      counts[q] = static_cast<int>((a_.rows().size(q) + 63) / 64);
      displs[q] = total;
      total += counts[q];
    }
    std::vector<std::uint64_t> gathered(static_cast<std::size_t>(total));
    MPI_Allgatherv(mine.data(), counts[me], MPI_UINT64_T, gathered.data(), counts.data(),
                   displs.data(), MPI_UINT64_T, comm);
    bitmap_.assign((static_cast<std::size_t>(n) + 63) / 64, 0);
    for (int q = 0; q < nranks; ++q) {
      const gidx_t b = a_.rows().begin(q), size = a_.rows().size(q);
      for (gidx_t i = 0; i < size; ++i) {
        if (gathered[static_cast<std::size_t>(displs[q] + i / 64)] >> (i % 64) & 1) {
          bitmap_[(b + i) / 64] |= std::uint64_t{1} << ((b + i) % 64);
        }
      }
    }
    const CsrMatrix& in = at_->local();  // row v: the in-neighbours of vertex first + v
    std::int64_t examined = 0;
    for (gidx_t v = 0; v < in.n_rows; ++v) {
      std::int32_t& l = level[static_cast<std::size_t>(v)];
      if (l >= 0) continue;
      for (std::int64_t x = in.row_ptr[v]; x < in.row_ptr[v + 1]; ++x) {
        ++examined;
        const gidx_t u = in.col_idx[x];
        if (bitmap_[u / 64] >> (u % 64) & 1) {
          l = depth + 1;
          next.push_back(v);
          break;
        }
      }
    }
    return examined;
  }

  const DistMatrix& a_;
  Options options_;
  netsparse::PendingTranspose pending_;
  const DistMatrix* at_ = nullptr;
  double wait_seconds_ = 0;
  std::vector<std::uint64_t> bitmap_;
};

// Levels of every vertex from `source` on the whole graph, one process.
std::vector<std::int32_t> sequential_bfs(const CsrMatrix& g, gidx_t source) {
  std::vector<std::int32_t> level(static_cast<std::size_t>(g.n_rows), -1);
  std::vector<gidx_t> queue{source};
  level[static_cast<std::size_t>(source)] = 0;
  for (std::size_t head = 0; head < queue.size(); ++head) {
    const gidx_t u = queue[head];
    for (std::int64_t x = g.row_ptr[u]; x < g.row_ptr[u + 1]; ++x) {
      const gidx_t v = g.col_idx[x];
      if (level[static_cast<std::size_t>(v)] < 0) {
        level[static_cast<std::size_t>(v)] = level[static_cast<std::size_t>(u)] + 1;
        queue.push_back(v);
      }
    }
  }
  return level;
}

std::int64_t edges_of(const SearchResult& r) {
  std::int64_t e = 0;
  for (const StepRecord& s : r.steps) e += s.edges;
  return e;
}

bool parse(int argc, char** argv, Options& o, std::string& error) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const auto value = [&]() -> std::optional<std::string> {
      if (i + 1 >= argc) return std::nullopt;
      return std::string(argv[++i]);
    };
    std::optional<std::string> v;
    if (arg == "--check") {
      o.check = true;
    } else if (arg == "--quiet") {
      o.quiet = true;
    } else if ((arg == "--matrix" || arg == "--sources" || arg == "--alpha" || arg == "--beta" ||
                arg == "--progress") &&
               (v = value())) {
      try {
        if (arg == "--matrix") o.matrix = *v;
        if (arg == "--sources") o.sources = *v;
        if (arg == "--alpha") o.alpha = std::stod(*v);
        if (arg == "--beta") o.beta = std::stod(*v);
      } catch (const std::exception&) {
        error = arg + " needs a number, got " + *v;
        return false;
      }
      if (arg == "--progress") {
        if (*v == "automatic") {
          o.progress = netsparse::TransposeProgress::automatic;
        } else if (*v == "calls") {
          o.progress = netsparse::TransposeProgress::calls;
        } else if (*v == "thread") {
          o.progress = netsparse::TransposeProgress::thread;
        } else {
          error = "--progress takes automatic, calls or thread, got " + *v;
          return false;
        }
      }
    } else {
      error = "unknown or incomplete argument " + arg;
      return false;
    }
  }
  if (!(o.alpha > 0) || !(o.beta > 0)) {
    error = "--alpha and --beta must be positive";
    return false;
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
    std::uint64_t z = 0x9e3779b97f4a7c15ULL;
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
  // Every rank parses the same arguments and matrix, so every rank reports a bad one alike.
  const auto fail = [&](const std::string& why) {
    std::fprintf(stderr, "bfs_direction (rank %d): %s\n", rank, why.c_str());
    return 1;
  };
  if (!parse(argc, argv, o, error)) return fail(error);
  const DistMatrix a = netsparse::load_distributed_matrix(MPI_COMM_WORLD, o.matrix);
  if (a.n_rows() != a.n_cols() || a.rows().offsets() != a.cols().offsets()) {
    return fail("the graph must be square with rows and columns split alike, got " +
                std::to_string(a.n_rows()) + " x " + std::to_string(a.n_cols()));
  }
  std::vector<gidx_t> sources;
  if (!choose_sources(o, a, sources, error)) return fail(error);
  std::optional<CsrMatrix> whole;
  if (o.check) whole = netsparse::load_distributed_matrix(MPI_COMM_SELF, o.matrix).local();

  Bfs bfs(a, o);  // starts the transpose; the first searches' top-down steps overlap it
  if (rank == 0) {
    std::printf("graph %s: %lld vertices, %lld edges, %d ranks; A^T progress: %s\n",
                a.name().c_str(), static_cast<long long>(a.n_rows()),
                static_cast<long long>(a.nnz_global()), a.nranks(),
                netsparse::to_string(bfs.pending().progress()));
  }
  // The searches that found A^T complete (the transposed graph in hand, as a BFS code that
  // keeps both directions has it), apart from those during which the transpose was finishing.
  double total_switch = 0, total_top = 0, ready_switch = 0, ready_top = 0;
  int ready_searches = 0;
  std::int64_t mismatches = 0;
  for (gidx_t source : sources) {
    const bool ready = bfs.pending().result() != nullptr;
    const SearchResult sw = bfs.search(source, true);
    const SearchResult td = bfs.search(source, false);
    total_switch += sw.seconds;
    total_top += td.seconds;
    if (ready) {
      ready_switch += sw.seconds;
      ready_top += td.seconds;
      ++ready_searches;
    }
    if (whole) {
      const std::vector<std::int32_t> want = sequential_bfs(*whole, source);
      const gidx_t first = a.rows().begin(rank);
      for (std::size_t i = 0; i < sw.level.size(); ++i) {
        mismatches += sw.level[i] != want[static_cast<std::size_t>(first) + i];
        mismatches += td.level[i] != want[static_cast<std::size_t>(first) + i];
      }
    }
    std::int64_t reached = 0;
    for (std::int32_t l : sw.level) reached += l >= 0;
    reached = sum_all(reached, a.comm());
    if (rank == 0) {
      std::printf("source %lld: %zu levels, %lld vertices reached\n",
                  static_cast<long long>(source), sw.steps.size(), static_cast<long long>(reached));
      if (!o.quiet) {
        std::printf("  %-5s %-10s %12s %14s %10s | %-10s %14s %10s\n", "level", "direction",
                    "frontier", "edges", "ms", "top-down", "edges", "ms");
        for (std::size_t i = 0; i < std::max(sw.steps.size(), td.steps.size()); ++i) {
          const StepRecord s = i < sw.steps.size() ? sw.steps[i] : StepRecord{};
          const StepRecord t = i < td.steps.size() ? td.steps[i] : StepRecord{};
          std::printf("  %-5zu %-10s %12lld %14lld %10.3f | %-10s %14lld %10.3f\n", i,
                      s.direction == Direction::top_down ? "top-down" : "bottom-up",
                      static_cast<long long>(s.frontier), static_cast<long long>(s.edges),
                      s.seconds * 1e3, "top-down", static_cast<long long>(t.edges),
                      t.seconds * 1e3);
        }
      }
      std::printf(
          "  switching %.3f ms, top-down only %.3f ms: %.2fx; edges examined %lld vs %lld\n",
          sw.seconds * 1e3, td.seconds * 1e3, td.seconds / sw.seconds,
          static_cast<long long>(edges_of(sw)), static_cast<long long>(edges_of(td)));
    }
  }
  if (rank == 0 && !sources.empty()) {
    std::printf(
        "all %zu sources: switching %.3f ms (%.3f ms of it blocked waiting for A^T), top-down only "
        "%.3f ms: %.2fx\n",
        sources.size(), total_switch * 1e3, bfs.wait_seconds() * 1e3, total_top * 1e3,
        total_top / total_switch);
    if (ready_searches > 0) {
      std::printf(
          "the %d searches with A^T complete: switching %.3f ms, top-down only %.3f ms: "
          "%.2fx\n",
          ready_searches, ready_switch * 1e3, ready_top * 1e3, ready_top / ready_switch);
    }
    std::printf(
        "A^T: complete %.3f ms after transpose_start, %.3f ms of it local work (pack, "
        "merge)\n",
        bfs.pending().pending_seconds() * 1e3, bfs.pending().local_seconds() * 1e3);
  }
  if (o.check) {
    mismatches = sum_all(mismatches, a.comm());
    if (rank == 0) {
      std::printf("check against a sequential BFS: %lld differing levels\n",
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
    std::fprintf(stderr, "bfs_direction (rank %d): %s\n", rank, e.what());
  }
  MPI_Finalize();
  return rc;
}
