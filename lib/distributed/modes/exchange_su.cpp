// Sparsity-unaware exchanges (su, su-panel) and the no-communication bound (ideal).
#include <algorithm>
#include <stdexcept>
#include <vector>

#include "agreement/mpi_util.hpp"
#include "concat/wire_model.hpp"
#include "distributed/deadlines.hpp"
#include "distributed/exchange.hpp"

namespace netsparse::dist {

namespace {

// Counts (in operand rows) and displacements of every rank's block, for MPI_Allgatherv.
void block_counts(const RowPartition& cols, std::vector<int>& counts, std::vector<int>& displs) {
  const int p = cols.nparts();
  counts.resize(static_cast<std::size_t>(p));
  displs.resize(static_cast<std::size_t>(p));
  for (int q = 0; q < p; ++q) {
    counts[q] = to_mpi_count(static_cast<std::uint64_t>(cols.size(q)), "operand block rows");
    displs[q] = to_mpi_count(static_cast<std::uint64_t>(cols.begin(q)), "operand block offset");
  }
}

// ---- su: MPI_Allgatherv of the whole operand, then the whole pattern -------------------------
template <class T>
class SuExchange final : public Exchange<T> {
 public:
  void setup(const Pattern&, const RunContext& rc) override {
    block_counts(*rc.cols, counts_, displs_);
    full_.resize(static_cast<std::size_t>(rc.cols->n_rows()) * rc.k);
  }
  void run(const Pattern& pat, const RunContext& rc, const Operands<T>& ops, Compute<T>& compute,
           CommStats& stats) override {
    const double t0 = now_seconds();
    check_mpi(MPI_Allgatherv(ops.b, counts_[rc.rank], rc.row_type, full_.data(), counts_.data(),
                             displs_.data(), rc.row_type, rc.comm),
              "MPI_Allgatherv");
    stats.wait_seconds += now_seconds() - t0;
    const std::uint64_t row_bytes = rc.row_bytes();
    const auto mine = static_cast<std::uint64_t>(counts_[rc.rank]);
    const auto others = static_cast<std::uint64_t>(rc.cols->n_rows()) - mine;
    stats.bytes_sent += (rc.nranks - 1) * concat::mpi_message_wire_bytes(mine * row_bytes);
    stats.messages_sent += static_cast<std::uint64_t>(rc.nranks - 1);
    stats.payload_bytes_in += others * row_bytes;
    compute.all_present(pat, rc, ops, full_.data());
  }

 private:
  std::vector<int> counts_, displs_;
  std::vector<T> full_;
};

// ---- su-panel: one MPI_Iallgatherv per column panel, double-buffered -------------------------
template <class T>
class SuPanelExchange final : public Exchange<T> {
 public:
  void setup(const Pattern& pat, const RunContext& rc) override {
    const int n_panels = pat.remote_part.n_col_panels();
    const int p = rc.nranks;
    counts_.assign(static_cast<std::size_t>(n_panels) * p, 0);
    displs_.assign(static_cast<std::size_t>(n_panels) * p, 0);
    touched_.assign(static_cast<std::size_t>(n_panels), false);
    for (int j = 0; j < n_panels; ++j) {
      const IndexRange w = pat.remote_part.col_panel_range(j);
      for (int q = 0; q < p; ++q) {
        const gidx_t b = std::max(w.begin, rc.cols->begin(q));
        const gidx_t e = std::min(w.end, rc.cols->end(q));
        if (e > b) {
          counts_[j * p + q] = static_cast<int>(e - b);  // <= window width, an int
          displs_[j * p + q] = static_cast<int>(b - w.begin);
        }
      }
      touched_[j] = !pat.remote_part.panel_columns(j).empty();
    }
    for (auto& w : window_) w.resize(static_cast<std::size_t>(pat.window) * rc.k);
  }

  void run(const Pattern& pat, const RunContext& rc, const Operands<T>& ops, Compute<T>& compute,
           CommStats& stats) override {
    const int n_panels = pat.remote_part.n_col_panels();
    const int p = rc.nranks;
    const gidx_t cb = rc.cols->begin(rc.rank);
    const std::uint64_t row_bytes = rc.row_bytes();
    MPI_Request req[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
    const auto start = [&](int j) {
      const IndexRange w = pat.remote_part.col_panel_range(j);
      const int mine = counts_[j * p + rc.rank];
      const T* send = ops.b + (std::max(w.begin, cb) - cb) * rc.k;
      check_mpi(MPI_Iallgatherv(mine > 0 ? send : ops.b, mine, rc.row_type, window_[j & 1].data(),
                                counts_.data() + j * p, displs_.data() + j * p, rc.row_type,
                                rc.comm, &req[j & 1]),
                "MPI_Iallgatherv");
      const auto mine_rows = static_cast<std::uint64_t>(mine);
      if (mine_rows > 0) {
        stats.bytes_sent += (p - 1) * concat::mpi_message_wire_bytes(mine_rows * row_bytes);
        stats.messages_sent += static_cast<std::uint64_t>(p - 1);
      }
      stats.payload_bytes_in += (static_cast<std::uint64_t>(w.size()) - mine_rows) * row_bytes;
    };
    if (n_panels > 0) start(0);
    compute.local(pat, rc, ops);
    for (int j = 0; j < n_panels; ++j) {
      if (j + 1 < n_panels) start(j + 1);
      const double t0 = now_seconds();
      check_mpi(MPI_Wait(&req[j & 1], MPI_STATUS_IGNORE), "MPI_Wait");
      stats.wait_seconds += now_seconds() - t0;
      if (touched_[j]) {
        const IndexRange w = pat.remote_part.col_panel_range(j);
        compute.remote_panel(
            pat, rc, ops, j,
            BasicDenseConstView<T>{window_[j & 1].data(), w.begin, rc.k, w.size()});
      }
    }
    compute.finish(pat, rc, ops);
  }

 private:
  std::vector<int> counts_, displs_;  // n_panels x P
  std::vector<bool> touched_;
  std::vector<T> window_[2];
};

// ---- ideal: every rank holds the whole operand; no communication in a run --------------------
template <class T>
class IdealExchange final : public Exchange<T> {
 public:
  void setup(const Pattern&, const RunContext&) override {}
  void replicate(const RunContext& rc, std::span<const T> operand_local) override {
    std::vector<int> counts, displs;
    block_counts(*rc.cols, counts, displs);
    full_.resize(static_cast<std::size_t>(rc.cols->n_rows()) * rc.k);
    check_mpi(MPI_Allgatherv(operand_local.data(), counts[rc.rank], rc.row_type, full_.data(),
                             counts.data(), displs.data(), rc.row_type, rc.comm),
              "MPI_Allgatherv");
    replicated_ = true;
  }
  void run(const Pattern& pat, const RunContext& rc, const Operands<T>& ops, Compute<T>& compute,
           CommStats&) override {
    if (!replicated_) {
      throw std::logic_error(
          "DistKernel (ideal): call replicate(operand) before running: the ideal mode assumes "
          "every rank already holds the whole operand");
    }
    compute.all_present(pat, rc, ops, full_.data());
  }

 private:
  bool replicated_ = false;
  std::vector<T> full_;
};

}  // namespace

NETSPARSE_EXCHANGE_FACTORY(make_su_exchange, SuExchange);
NETSPARSE_EXCHANGE_FACTORY(make_su_panel_exchange, SuPanelExchange);
NETSPARSE_EXCHANGE_FACTORY(make_ideal_exchange, IdealExchange);

}  // namespace netsparse::dist
