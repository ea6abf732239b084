// Sparsity-aware gathering with software aggregation (sa-conveyors, sa-opt): per column panel, a
// request conveyor carries remote column ids to their owners and a reply conveyor carries the
// rows back (two conveyors, or request/reply can deadlock). sa-conveyors requests one row per
// remote NONZERO, as Conveyors does (no filtering, no coalescing); sa-opt is the paper's SAOpt:
// a free perfect prefilter, each distinct remote column requested once per rank. The loop is
// RequestReply's (request_reply.hpp), shared with bench_index_gather's conveyors baseline.
#include <algorithm>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <vector>

#include "agreement/mpi_util.hpp"
#include "conveyor/request_reply.hpp"
#include "distributed/deadlines.hpp"
#include "distributed/exchange.hpp"
#include "distributed/panel_stream.hpp"

namespace netsparse::dist {

namespace {

template <class T>
class ConveyorExchange final : public Exchange<T> {
 public:
  explicit ConveyorExchange(bool prefilter) : prefilter_(prefilter) {}

  void setup(const Pattern& pat, const RunContext& rc) override {
    if (!conveyors_) {
      ConveyorOptions o;
      o.buffer_bytes = rc.options->conveyor_buffer_bytes;
      o.buffers_per_link = rc.options->conveyor_buffers_per_link;
      ConveyorOptions r = o;
      // A reply buffer must hold at least one reply (4 B offset + one row).
      r.buffer_bytes = std::max(o.buffer_bytes, 4 + rc.row_bytes());
      conveyors_ = std::make_unique<RequestReply>(rc.comm, o, r);
    }
    // Panels some rank needs: every rank takes part in those sessions (it may have to answer).
    const int n_panels = pat.remote_part.n_col_panels();
    std::vector<int> needed(static_cast<std::size_t>(n_panels), 0);
    for (int j : pat.remote_panels) needed[j] = 1;
    check_mpi(MPI_Allreduce(MPI_IN_PLACE, needed.data(), n_panels, MPI_INT, MPI_MAX, rc.comm),
              "MPI_Allreduce");
    global_panels_.clear();
    for (int j = 0; j < n_panels; ++j) {
      if (needed[j]) global_panels_.push_back(j);
    }
    window_.resize(static_cast<std::size_t>(pat.window) * rc.k);
  }

  void run(const Pattern& pat, const RunContext& rc, const Operands<T>& ops, Compute<T>& compute,
           CommStats& stats) override {
    const ConveyorStats req0 = conveyors_->requests().stats();
    const ConveyorStats rep0 = conveyors_->replies().stats();
    const std::size_t row_bytes = rc.row_bytes();
    const gidx_t cb = rc.cols->begin(rc.rank), n_local = rc.cols->size(rc.rank);
    std::uint64_t replies_in = 0;
    compute.local(pat, rc, ops);
    for (int j : global_panels_) {
      const gidx_t wbase = pat.remote_part.col_panel_range(j).begin;
      const double t0 = now_seconds();
      PanelIdxStream stream(pat.remote_part, j, prefilter_);
      // Serve: a request is a global column id; its reply is (window offset, row).
      const auto answer = [&](const std::byte* request, int from, std::byte* reply) {
        std::uint64_t idx = 0;
        std::memcpy(&idx, request, sizeof idx);
        const auto row = static_cast<gidx_t>(idx) - cb;
        if (row < 0 || row >= n_local) {
          throw std::runtime_error("sa-conveyors: rank " + std::to_string(from) +
                                   " asked for row " + std::to_string(idx) +
                                   " which this rank does not own");
        }
        const auto offset = static_cast<std::uint32_t>(static_cast<gidx_t>(idx) - wbase);
        std::memcpy(reply, &offset, 4);
        std::memcpy(reply + 4, ops.b + row * rc.k, row_bytes);
      };
      conveyors_->begin(sizeof(std::uint64_t), 4 + row_bytes);
      while (conveyors_->advance(!stream.valid(), answer)) {
        while (stream.valid()) {
          const auto idx = static_cast<std::uint64_t>(stream.idx());
          if (!conveyors_->push(&idx, rc.cols->owner(static_cast<gidx_t>(idx)))) break;
          stream.next();
        }
        int from = 0;
        while (const std::byte* item = conveyors_->pull(&from)) {
          std::uint32_t offset = 0;
          std::memcpy(&offset, item, 4);
          std::memcpy(window_.data() + std::size_t{offset} * rc.k, item + 4, row_bytes);
          ++replies_in;
        }
      }
      stats.wait_seconds += now_seconds() - t0;
      if (!pat.remote_part.panel_columns(j).empty()) {
        compute.remote_panel(pat, rc, ops, j,
                             BasicDenseConstView<T>{window_.data(), wbase, rc.k, pat.window});
      }
    }
    compute.finish(pat, rc, ops);
    const ConveyorStats& req1 = conveyors_->requests().stats();
    const ConveyorStats& rep1 = conveyors_->replies().stats();
    stats.messages_sent +=
        (req1.buffers_sent - req0.buffers_sent) + (rep1.buffers_sent - rep0.buffers_sent);
    stats.bytes_sent +=
        (wire_bytes(req1) - wire_bytes(req0)) + (wire_bytes(rep1) - wire_bytes(rep0));
    stats.requests += req1.pushed - req0.pushed;
    stats.payload_bytes_in += replies_in * row_bytes;
  }

 private:
  const bool prefilter_;
  std::unique_ptr<RequestReply> conveyors_;
  std::vector<int> global_panels_;
  std::vector<T> window_;
};

}  // namespace

template <class T>
std::unique_ptr<Exchange<T>> make_conveyor_exchange(bool prefilter) {
  return std::make_unique<ConveyorExchange<T>>(prefilter);
}
template std::unique_ptr<Exchange<float>> make_conveyor_exchange<float>(bool);
template std::unique_ptr<Exchange<double>> make_conveyor_exchange<double>(bool);

}  // namespace netsparse::dist
