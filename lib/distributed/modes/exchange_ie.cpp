// Inspector-executor (PETSc PetscSF / Tpetra Import style): a setup computes, per pattern, the
// distinct remote rows this rank needs (its "ghosts"), tells their owners (MPI_Alltoall +
// MPI_Alltoallv of the indices), renumbers the remote part of A onto a compact ghost buffer and
// builds a distributed-graph communicator of the actual neighbours. A run then packs the rows
// each neighbour asked for and exchanges exactly those (MPI_Ineighbor_alltoallv, or
// Isend/Irecv), overlapped with the local block's compute as PETSc's MatMult does
// (VecScatterBegin; diagonal block; VecScatterEnd; off-diagonal block).
#include <algorithm>
#include <bit>
#include <stdexcept>
#include <vector>

#include "agreement/mpi_util.hpp"
#include "concat/wire_model.hpp"
#include "distributed/deadlines.hpp"
#include "distributed/exchange.hpp"
#include "distributed/ghosts.hpp"
#include "hosts/topology.hpp"

namespace netsparse::dist {

namespace {

template <class T>
class IeExchange final : public Exchange<T> {
 public:
  ~IeExchange() override { free_graph(); }

  // The remote part is renumbered onto the compact ghost buffer and tiled once, as one matrix
  // (PETSc's off-diagonal block with its column map): no column panels needed.
  bool needs_remote_panels() const noexcept override { return false; }

  void setup(const Pattern& pat, const RunContext& rc) override {
    const int p = rc.nranks;
    // The hosts, for the host-level counters only (CommStats::inter_host_*): the exchange itself
    // is per rank.
    if (topo_ == nullptr) topo_ = &rc.hosts();
    // 1. Ghosts: the distinct remote columns, sorted (hence grouped by owner in rank order),
    //    and the remote part renumbered onto them and tiled (GhostLayout).
    const CsrMatrix& remote = pat.remote_csr;
    layout_.build(remote, rc.cols->n_rows(), pat.local_part.config(), rc.scalar());
    const std::vector<gidx_t>& ghosts = layout_.ghosts();
    std::vector<std::vector<gidx_t>> requests(static_cast<std::size_t>(p));
    for (gidx_t c : ghosts) requests[rc.cols->owner(c)].push_back(c);

    // 2. Tell the owners: they learn which of their rows go to whom.
    std::vector<int> send_rows;
    std::vector<gidx_t> asked = exchange_all_to_all(rc.comm, requests, &send_rows);
    std::vector<int> recv_rows(static_cast<std::size_t>(p));
    for (int q = 0; q < p; ++q) {
      recv_rows[q] = to_mpi_count(requests[q].size(), "inspector-executor ghost rows");
    }
    const gidx_t cb = rc.cols->begin(rc.rank);
    send_local_.resize(asked.size());
    for (std::size_t i = 0; i < asked.size(); ++i) {
      if (asked[i] < cb || asked[i] >= rc.cols->end(rc.rank)) {
        throw std::logic_error("inspector-executor: asked for a row this rank does not own");
      }
      send_local_[i] = asked[i] - cb;
    }

    // 3. Neighbours (only ranks with something to exchange) and the distributed-graph
    //    communicator over them.
    sources_.clear();
    dests_.clear();
    recv_counts_.clear();
    recv_displs_.clear();
    send_counts_.clear();
    send_displs_.clear();
    int recv_offset = 0, send_offset = 0;
    for (int q = 0; q < p; ++q) {
      if (recv_rows[q] > 0) {
        sources_.push_back(q);
        recv_counts_.push_back(recv_rows[q]);
        recv_displs_.push_back(recv_offset);
      }
      recv_offset += recv_rows[q];
      if (send_rows[q] > 0) {
        dests_.push_back(q);
        send_counts_.push_back(send_rows[q]);
        send_displs_.push_back(send_offset);
      }
      send_offset += send_rows[q];
    }
    free_graph();
    if (!rc.options->ie_point_to_point) {
      check_mpi(MPI_Dist_graph_create_adjacent(rc.comm, static_cast<int>(sources_.size()),
                                               sources_.data(), MPI_UNWEIGHTED,
                                               static_cast<int>(dests_.size()), dests_.data(),
                                               MPI_UNWEIGHTED, MPI_INFO_NULL, 0, &graph_),
                "MPI_Dist_graph_create_adjacent");
    }

    ghost_.resize(ghosts.size() * static_cast<std::size_t>(rc.k));
    packed_.resize(send_local_.size() * static_cast<std::size_t>(rc.k));
  }

  void run(const Pattern& pat, const RunContext& rc, const Operands<T>& ops, Compute<T>& compute,
           CommStats& stats) override {
    const std::size_t k = static_cast<std::size_t>(rc.k);
    const double tp = now_seconds();
    // Pack the rows every neighbour asked for.
    const auto n_send = static_cast<std::int64_t>(send_local_.size());
#pragma omp parallel for schedule(static) if (n_send * rc.k > 65536)
    for (std::int64_t i = 0; i < n_send; ++i) {
      std::copy_n(ops.b + send_local_[i] * rc.k, k, packed_.data() + i * rc.k);
    }
    std::vector<MPI_Request>& reqs = requests_;
    reqs.clear();
    if (rc.options->ie_point_to_point) {
      for (std::size_t s = 0; s < sources_.size(); ++s) {
        reqs.emplace_back();
        check_mpi(MPI_Irecv(ghost_.data() + recv_displs_[s] * k, recv_counts_[s], rc.row_type,
                            sources_[s], 11, rc.comm, &reqs.back()),
                  "MPI_Irecv");
      }
      for (std::size_t d = 0; d < dests_.size(); ++d) {
        reqs.emplace_back();
        check_mpi(MPI_Isend(packed_.data() + send_displs_[d] * k, send_counts_[d], rc.row_type,
                            dests_[d], 11, rc.comm, &reqs.back()),
                  "MPI_Isend");
      }
    } else {
      reqs.emplace_back();
      check_mpi(MPI_Ineighbor_alltoallv(packed_.data(), send_counts_.data(), send_displs_.data(),
                                        rc.row_type, ghost_.data(), recv_counts_.data(),
                                        recv_displs_.data(), rc.row_type, graph_, &reqs.back()),
                "MPI_Ineighbor_alltoallv");
    }
    const double tc = now_seconds();
    stats.post_seconds += tc - tp;  // pack + post
    compute.local(pat, rc, ops);
    const double t0 = now_seconds();
    check_mpi(MPI_Waitall(static_cast<int>(reqs.size()), reqs.data(), MPI_STATUSES_IGNORE),
              "MPI_Waitall");
    const double t1 = now_seconds();
    stats.wait_seconds += t1 - t0;
    compute.remote_all(layout_.compact(), rc, ops,
                       BasicDenseConstView<T>{ghost_.data(), 0, rc.k,
                                              static_cast<gidx_t>(layout_.ghosts().size())});
    compute.finish(pat, rc, ops);
    stats.compute_seconds += (t0 - tc) + (now_seconds() - t1);

    const std::uint64_t row_bytes = rc.row_bytes();
    stats.bytes_sent +=
        concat::mpi_messages_wire_bytes(dests_.size(), send_local_.size() * row_bytes);
    stats.messages_sent += dests_.size();
    stats.payload_bytes_in += layout_.ghosts().size() * row_bytes;
    std::uint64_t inter_msgs = 0, inter_rows = 0, intra_msgs = 0, intra_rows = 0;
    for (std::size_t d = 0; d < dests_.size(); ++d) {
      const bool other_host = topo_->host_of(dests_[d]) != topo_->host();
      (other_host ? inter_msgs : intra_msgs) += 1;
      (other_host ? inter_rows : intra_rows) += static_cast<std::uint64_t>(send_counts_[d]);
    }
    stats.inter_host_bytes += concat::mpi_messages_wire_bytes(inter_msgs, inter_rows * row_bytes);
    stats.inter_host_payload_bytes += inter_rows * row_bytes;
    stats.inter_host_messages += inter_msgs;
    stats.intra_host_bytes += concat::mpi_messages_wire_bytes(intra_msgs, intra_rows * row_bytes);
  }

 private:
  void free_graph() {
    if (graph_ != MPI_COMM_NULL) MPI_Comm_free(&graph_);
  }

  const Topology* topo_ = nullptr;  // the kernel's (RunContext::hosts)
  GhostLayout layout_;  // distinct remote columns and the remote part renumbered onto them
  std::vector<gidx_t> send_local_;  // local rows to send, grouped by destination
  std::vector<int> sources_, dests_;
  std::vector<int> recv_counts_, recv_displs_, send_counts_, send_displs_;  // in rows
  MPI_Comm graph_ = MPI_COMM_NULL;
  std::vector<T> ghost_, packed_;
  std::vector<MPI_Request> requests_;
};

}  // namespace

NETSPARSE_EXCHANGE_FACTORY(make_ie_exchange, IeExchange);

}  // namespace netsparse::dist
