// node-aware-ie: the inspector-executor made node-aware, after Bienz, Gropp and Olson ("Node
// aware sparse matrix-vector multiplication", JPDC 2019, their three-step exchange). A rank's
// ghost rows (GhostLayout, as inspector-executor) fall in two kinds:
//   on-host:  owned by a rank of its own host: sent straight by the owner (host communicator);
//   off-host: owned on another host: three steps, all through real MPI messages --
//     1. up:    every rank sends its host leader the rows of its own that any other host needs,
//               each once (however many hosts want it);
//     2. inter: the leader sends each other host's leader ONE message carrying every row that
//               host needs from this host once (the requests were de-duplicated host-wide);
//     3. down:  the receiving leader sends each rank of its host the rows it needs, in the
//               rank's ghost order.
// Leaders talk over the leaders' communicator only, so two virtual hosts on one machine
// (NETSPARSE_RANKS_PER_HOST) exchange exactly the messages two real hosts would. The leader does
// steps 1 and 2 before its local compute and step 3 after it; the other ranks post everything,
// compute their local block and wait (the local block's compute overlaps the exchange, as in
// inspector-executor).
//
// The setup (per pattern) is the inspector: on-host requests exchanged inside the host, off-host
// requests gathered at the leader, merged per owner host, exchanged between leaders, split per
// owner rank and told to the owners. Its index lists make every run a pack, messages, unpack.
#include <algorithm>
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

constexpr int kTagNear = 21;   // on-host rows, owner -> requester (host communicator)
constexpr int kTagUp = 22;     // step 1, rank -> its leader (host communicator)
constexpr int kTagInter = 23;  // step 2, leader -> leader (leaders' communicator)
constexpr int kTagDown = 24;   // step 3, leader -> rank (host communicator)

// Position of sorted-unique `c` in `sorted` (it must be there).
std::int64_t position_of(const std::vector<gidx_t>& sorted, gidx_t c) {
  const auto it = std::lower_bound(sorted.begin(), sorted.end(), c);
  if (it == sorted.end() || *it != c) {
    throw std::logic_error("node-aware-ie: a requested row is missing from its merged list");
  }
  return it - sorted.begin();
}

// Offsets of consecutive blocks of the given sizes (one more entry: the total).
std::vector<std::int64_t> offsets_of(const std::vector<std::int64_t>& sizes) {
  std::vector<std::int64_t> off(sizes.size() + 1, 0);
  for (std::size_t i = 0; i < sizes.size(); ++i) off[i + 1] = off[i] + sizes[i];
  return off;
}

// Copies rows: dst row i = src row index[i] (K elements each).
template <class T>
void gather_rows(const T* src, const std::int64_t* index, std::int64_t n, int k, T* dst) {
#pragma omp parallel for schedule(static) if (n * k > 65536)
  for (std::int64_t i = 0; i < n; ++i) {
    std::copy_n(src + index[i] * k, k, dst + i * k);
  }
}

template <class T>
class NodeIeExchange final : public Exchange<T> {
 public:
  bool needs_remote_panels() const noexcept override { return false; }

  void setup(const Pattern& pat, const RunContext& rc) override {
    if (topo_ == nullptr) {
      topo_ = &rc.hosts();
      const std::vector<int>& mine = topo_->ranks_of(topo_->host());
      hsize_ = static_cast<int>(mine.size());
      host_index_.assign(static_cast<std::size_t>(rc.nranks), -1);
      for (int i = 0; i < hsize_; ++i) host_index_[mine[i]] = i;
      hrank_ = host_index_[rc.rank];
    }
    const Topology& t = *topo_;
    const int my_host = t.host();
    const gidx_t cb = rc.cols->begin(rc.rank), ce = rc.cols->end(rc.rank);

    layout_.build(pat.remote_csr, rc.cols->n_rows(), pat.local_part.config(), rc.scalar());
    const std::vector<gidx_t>& ghosts = layout_.ghosts();

    // Split the ghosts (sorted, hence grouped by owner): on-host ones by owner's host rank,
    // off-host ones in ghost order with their ghost positions.
    std::vector<std::vector<gidx_t>> near(static_cast<std::size_t>(hsize_));
    near_recv_displs_.assign(static_cast<std::size_t>(hsize_), 0);
    off_cols_.clear();
    off_pos_.clear();
    for (std::size_t g = 0; g < ghosts.size(); ++g) {
      const int q = rc.cols->owner(ghosts[g]);
      if (t.host_of(q) == my_host) {
        auto& list = near[host_index_[q]];
        if (list.empty()) near_recv_displs_[host_index_[q]] = static_cast<std::int64_t>(g);
        list.push_back(ghosts[g]);
      } else {
        off_cols_.push_back(ghosts[g]);
        off_pos_.push_back(static_cast<std::int64_t>(g));
      }
    }
    near_recv_counts_.assign(static_cast<std::size_t>(hsize_), 0);
    for (int i = 0; i < hsize_; ++i) {
      near_recv_counts_[i] = to_mpi_count(near[i].size(), "node-aware-ie on-host rows");
    }

    // On-host requests: the owners learn which of their rows go to whom inside the host.
    std::vector<int> asked_counts;
    const std::vector<gidx_t> asked = exchange_all_to_all(t.host_comm(), near, &asked_counts);
    near_send_local_ = to_local(asked, cb, ce);
    near_send_counts_ = std::move(asked_counts);

    // Off-host requests, gathered at the leader.
    const int n_off = to_mpi_count(off_cols_.size(), "node-aware-ie off-host rows");
    std::vector<int> off_counts(static_cast<std::size_t>(hsize_));
    check_mpi(MPI_Gather(&n_off, 1, MPI_INT, off_counts.data(), 1, MPI_INT, 0, t.host_comm()),
              "MPI_Gather");
    std::vector<int> off_displs(static_cast<std::size_t>(hsize_) + 1, 0);
    for (int i = 0; i < hsize_; ++i) {
      off_displs[i + 1] = to_mpi_count(std::uint64_t(off_displs[i]) + std::uint64_t(off_counts[i]),
                                       "node-aware-ie gathered requests");
    }
    std::vector<gidx_t> gathered(hrank_ == 0 ? static_cast<std::size_t>(off_displs.back()) : 0);
    ByteBlockType idx_type(sizeof(gidx_t));
    check_mpi(MPI_Gatherv(off_cols_.data(), n_off, idx_type.get(), gathered.data(),
                          off_counts.data(), off_displs.data(), idx_type.get(), 0, t.host_comm()),
              "MPI_Gatherv");

    std::vector<std::vector<gidx_t>> up(static_cast<std::size_t>(hsize_));
    if (hrank_ == 0) leader_setup(rc, gathered, off_counts, off_displs, up);

    // Step 1's lists: each rank learns which of its rows its leader wants.
    std::vector<int> up_counts(static_cast<std::size_t>(hsize_)), up_displs(hsize_ + 1, 0);
    std::vector<gidx_t> up_flat;
    if (hrank_ == 0) {
      for (int i = 0; i < hsize_; ++i) {
        up_counts[i] = to_mpi_count(up[i].size(), "node-aware-ie rows to the leader");
        up_displs[i + 1] = up_displs[i] + up_counts[i];
        up_flat.insert(up_flat.end(), up[i].begin(), up[i].end());
      }
    }
    int n_up = 0;
    check_mpi(MPI_Scatter(up_counts.data(), 1, MPI_INT, &n_up, 1, MPI_INT, 0, t.host_comm()),
              "MPI_Scatter");
    std::vector<gidx_t> my_up(static_cast<std::size_t>(n_up));
    check_mpi(MPI_Scatterv(up_flat.data(), up_counts.data(), up_displs.data(), idx_type.get(),
                           my_up.data(), n_up, idx_type.get(), 0, t.host_comm()),
              "MPI_Scatterv");
    up_local_ = to_local(my_up, cb, ce);

    const std::size_t k = static_cast<std::size_t>(rc.k);
    ghost_.assign(ghosts.size() * k, T{});
    near_packed_.resize(near_send_local_.size() * k);
    up_packed_.resize(up_local_.size() * k);
    down_.resize(off_cols_.size() * k);
  }

  void run(const Pattern& pat, const RunContext& rc, const Operands<T>& ops, Compute<T>& compute,
           CommStats& stats) override {
    const int k = rc.k;
    const std::uint64_t row_bytes = rc.row_bytes();
    const MPI_Comm hc = topo_->host_comm(), lc = topo_->leaders_comm();
    const bool leader = hrank_ == 0;
    const double tp = now_seconds();
    std::uint64_t intra_msgs = 0, intra_rows = 0, inter_msgs = 0, inter_rows = 0;
    reqs_.clear();

    post_near(rc, ops, intra_msgs, intra_rows);

    // Step 1 (up): the rows other hosts need, to the leader.
    const auto n_up = static_cast<std::int64_t>(up_local_.size());
    if (leader) {
      gather_rows(ops.b, up_local_.data(), n_up, k, gather_.data());  // its own block, in place
      up_reqs_.clear();
      post_blocks(MPI_Irecv, "MPI_Irecv", gather_.data(), up_displs_, 1, rc, kTagUp, hc, up_reqs_);
      post_blocks(MPI_Irecv, "MPI_Irecv", inbound_.data(), in_displs_, 0, rc, kTagInter, lc, reqs_);
    } else {
      gather_rows(ops.b, up_local_.data(), n_up, k, up_packed_.data());
      if (n_up > 0) {
        check_mpi(MPI_Isend(up_packed_.data(), static_cast<int>(n_up), rc.row_type, 0, kTagUp, hc,
                            &reqs_.emplace_back()),
                  "MPI_Isend");
        ++intra_msgs;
        intra_rows += static_cast<std::uint64_t>(n_up);
      }
      if (!off_cols_.empty()) {
        check_mpi(MPI_Irecv(down_.data(), static_cast<int>(off_cols_.size()), rc.row_type, 0,
                            kTagDown, hc, &reqs_.emplace_back()),
                  "MPI_Irecv");
      }
    }
    double waited = 0;
    if (leader) {
      // Step 2 (inter): one message per destination host, each row once.
      const double w0 = now_seconds();
      check_mpi(
          MPI_Waitall(static_cast<int>(up_reqs_.size()), up_reqs_.data(), MPI_STATUSES_IGNORE),
          "MPI_Waitall");
      waited += now_seconds() - w0;
      gather_rows(gather_.data(), out_index_.data(), static_cast<std::int64_t>(out_index_.size()),
                  k, outbound_.data());
      const Posted sent = post_blocks(MPI_Isend, "MPI_Isend", outbound_.data(), out_displs_, 0, rc,
                                      kTagInter, lc, reqs_);
      inter_msgs += sent.msgs;
      inter_rows += sent.rows;
    }
    const double tc = now_seconds();
    stats.post_seconds += tc - tp - waited;
    compute.local(pat, rc, ops);
    const double t0 = now_seconds();
    if (leader) {
      // Step 3 (down): wait for the other hosts' rows, hand each rank of the host its own.
      // The inbound receives are the first ones after the on-host ones; waiting for all the
      // receives posted so far is simplest (the sends complete meanwhile or later).
      check_mpi(MPI_Waitall(static_cast<int>(reqs_.size()), reqs_.data(), MPI_STATUSES_IGNORE),
                "MPI_Waitall");
      reqs_.clear();
      gather_rows(inbound_.data(), down_index_.data(),
                  static_cast<std::int64_t>(down_index_.size()), k, down_packed_.data());
      const Posted sent = post_blocks(MPI_Isend, "MPI_Isend", down_packed_.data(), down_displs_, 1,
                                      rc, kTagDown, hc, reqs_);
      intra_msgs += sent.msgs;
      intra_rows += sent.rows;
      // The leader's own off-host rows, from its packed block 0.
      scatter_rows(down_packed_.data(), static_cast<std::int64_t>(off_pos_.size()), k);
    }
    check_mpi(MPI_Waitall(static_cast<int>(reqs_.size()), reqs_.data(), MPI_STATUSES_IGNORE),
              "MPI_Waitall");
    if (!leader) scatter_rows(down_.data(), static_cast<std::int64_t>(off_pos_.size()), k);
    const double t1 = now_seconds();
    stats.wait_seconds += waited + (t1 - t0);
    compute.remote_all(layout_.compact(), rc, ops,
                       BasicDenseConstView<T>{ghost_.data(), 0, rc.k,
                                              static_cast<gidx_t>(layout_.ghosts().size())});
    compute.finish(pat, rc, ops);
    stats.compute_seconds += (t0 - tc) + (now_seconds() - t1);

    add_traffic(stats, row_bytes, intra_msgs, intra_rows, inter_msgs, inter_rows);
  }

 private:
  struct Posted {
    std::uint64_t msgs = 0;
    std::uint64_t rows = 0;
  };

  // Posts `op` (MPI_Irecv or MPI_Isend, named `call`) of block p of `rows` -- rows [displs[p],
  // displs[p + 1]), rc.k values each -- with rank p of comm, for every p >= first whose block
  // is not empty, into `reqs`. Returns the messages and rows it posted.
  template <class Op>
  static Posted post_blocks(Op op, const char* call, T* rows,
                            const std::vector<std::int64_t>& displs, int first,
                            const RunContext& rc, int tag, MPI_Comm comm,
                            std::vector<MPI_Request>& reqs) {
    Posted posted;
    for (int p = first; p + 1 < static_cast<int>(displs.size()); ++p) {
      const std::int64_t n = displs[p + 1] - displs[p];
      if (n == 0) continue;
      check_mpi(op(rows + displs[p] * rc.k, static_cast<int>(n), rc.row_type, p, tag, comm,
                   &reqs.emplace_back()),
                call);
      ++posted.msgs;
      posted.rows += static_cast<std::uint64_t>(n);
    }
    return posted;
  }

  // On-host rows, straight from their owners: posts this rank's receives and sends of them.
  void post_near(const RunContext& rc, const Operands<T>& ops, std::uint64_t& intra_msgs,
                 std::uint64_t& intra_rows) {
    const int k = rc.k;
    const MPI_Comm hc = topo_->host_comm();
    for (int i = 0; i < hsize_; ++i) {
      if (near_recv_counts_[i] == 0) continue;
      check_mpi(MPI_Irecv(ghost_.data() + near_recv_displs_[i] * k, near_recv_counts_[i],
                          rc.row_type, i, kTagNear, hc, &reqs_.emplace_back()),
                "MPI_Irecv");
    }
    gather_rows(ops.b, near_send_local_.data(), static_cast<std::int64_t>(near_send_local_.size()),
                k, near_packed_.data());
    for (int i = 0, off = 0; i < hsize_; off += near_send_counts_[i], ++i) {
      if (near_send_counts_[i] == 0) continue;
      check_mpi(MPI_Isend(near_packed_.data() + std::size_t(off) * k, near_send_counts_[i],
                          rc.row_type, i, kTagNear, hc, &reqs_.emplace_back()),
                "MPI_Isend");
      ++intra_msgs;
      intra_rows += static_cast<std::uint64_t>(near_send_counts_[i]);
    }
  }

  // One run's messages and rows, on this host and to other hosts, priced by the wire model.
  void add_traffic(CommStats& stats, std::uint64_t row_bytes, std::uint64_t intra_msgs,
                   std::uint64_t intra_rows, std::uint64_t inter_msgs,
                   std::uint64_t inter_rows) const {
    const std::uint64_t intra = concat::mpi_messages_wire_bytes(intra_msgs, intra_rows * row_bytes);
    const std::uint64_t inter = concat::mpi_messages_wire_bytes(inter_msgs, inter_rows * row_bytes);
    stats.bytes_sent += intra + inter;
    stats.messages_sent += intra_msgs + inter_msgs;
    stats.payload_bytes_in += layout_.ghosts().size() * row_bytes;
    stats.inter_host_bytes += inter;
    stats.inter_host_payload_bytes += inter_rows * row_bytes;
    stats.inter_host_messages += inter_msgs;
    stats.intra_host_bytes += intra;
  }

  // Global rows this rank owns -> local row numbers.
  static std::vector<std::int64_t> to_local(const std::vector<gidx_t>& rows, gidx_t cb, gidx_t ce) {
    std::vector<std::int64_t> out(rows.size());
    for (std::size_t i = 0; i < rows.size(); ++i) {
      if (rows[i] < cb || rows[i] >= ce) {
        throw std::logic_error("node-aware-ie: asked for a row this rank does not own");
      }
      out[i] = rows[i] - cb;
    }
    return out;
  }

  // ghost_ row off_pos_[i] = src row i.
  void scatter_rows(const T* src, std::int64_t n, int k) {
#pragma omp parallel for schedule(static) if (n * k > 65536)
    for (std::int64_t i = 0; i < n; ++i) {
      std::copy_n(src + i * k, k, ghost_.data() + off_pos_[i] * k);
    }
  }

  // The leader's part of the inspector: merge the host's off-host requests per owner host,
  // exchange them with the other leaders, split the rows asked of this host per owner rank.
  void leader_setup(const RunContext& rc, const std::vector<gidx_t>& gathered,
                    const std::vector<int>& off_counts, const std::vector<int>& off_displs,
                    std::vector<std::vector<gidx_t>>& up) {
    const Topology& t = *topo_;
    const int nhosts = t.nhosts();
    // Each row the host needs from host h, once (sorted).
    std::vector<std::vector<gidx_t>> wanted(static_cast<std::size_t>(nhosts));
    for (const gidx_t c : gathered) wanted[t.host_of(rc.cols->owner(c))].push_back(c);
    std::vector<std::int64_t> in_sizes(static_cast<std::size_t>(nhosts));
    for (int h = 0; h < nhosts; ++h) {
      auto& w = wanted[h];
      std::sort(w.begin(), w.end());
      w.erase(std::unique(w.begin(), w.end()), w.end());
      in_sizes[h] = static_cast<std::int64_t>(w.size());
    }
    in_displs_ = offsets_of(in_sizes);
    // Step 3's index: for rank i's requests in its order, where the row lands in inbound_.
    down_index_.resize(gathered.size());
    std::vector<std::int64_t> down_sizes(static_cast<std::size_t>(hsize_));
    for (int i = 0; i < hsize_; ++i) {
      down_sizes[i] = off_counts[i];
      for (int j = off_displs[i]; j < off_displs[i + 1]; ++j) {
        const gidx_t c = gathered[j];
        const int h = t.host_of(rc.cols->owner(c));
        down_index_[j] = in_displs_[h] + position_of(wanted[h], c);
      }
    }
    down_displs_ = offsets_of(down_sizes);

    // The leaders exchange their merged requests: rank h of the leaders' communicator is host
    // h's leader.
    std::vector<int> asked_counts;
    const std::vector<gidx_t> asked = exchange_all_to_all(t.leaders_comm(), wanted, &asked_counts);
    // Rows asked of this host, per owner rank of the host, each once however many hosts ask.
    for (const gidx_t c : asked) {
      const int owner = rc.cols->owner(c);
      if (t.host_of(owner) != t.host()) {
        throw std::logic_error("node-aware-ie: a host was asked for a row it does not own");
      }
      up[host_index_[owner]].push_back(c);
    }
    std::vector<std::int64_t> up_sizes(static_cast<std::size_t>(hsize_));
    for (int i = 0; i < hsize_; ++i) {
      std::sort(up[i].begin(), up[i].end());
      up[i].erase(std::unique(up[i].begin(), up[i].end()), up[i].end());
      up_sizes[i] = static_cast<std::int64_t>(up[i].size());
    }
    up_displs_ = offsets_of(up_sizes);
    // Step 2's index: for each requesting host in order, its rows' places in gather_.
    out_index_.resize(asked.size());
    std::vector<std::int64_t> out_sizes(asked_counts.begin(), asked_counts.end());
    for (std::size_t j = 0; j < asked.size(); ++j) {
      const int i = host_index_[rc.cols->owner(asked[j])];
      out_index_[j] = up_displs_[i] + position_of(up[i], asked[j]);
    }
    out_displs_ = offsets_of(out_sizes);

    const std::size_t k = static_cast<std::size_t>(rc.k);
    gather_.resize(static_cast<std::size_t>(up_displs_.back()) * k);
    outbound_.resize(out_index_.size() * k);
    inbound_.resize(static_cast<std::size_t>(in_displs_.back()) * k);
    down_packed_.resize(down_index_.size() * k);
  }

  const Topology* topo_ = nullptr;  // the kernel's (RunContext::hosts)
  int hsize_ = 0, hrank_ = 0;       // ranks of this host, this rank's place among them
  std::vector<int> host_index_;     // per rank of the job: its place in its host (this host only)
  GhostLayout layout_;              // as inspector-executor: sorted ghosts, compact remote part
  std::vector<T> ghost_;            // the gathered ghost rows, in ghost order
  // On-host exchange (per host rank).
  std::vector<int> near_recv_counts_, near_send_counts_;
  std::vector<std::int64_t> near_recv_displs_;  // in ghost rows
  std::vector<std::int64_t> near_send_local_;   // local rows to send, grouped by requester
  std::vector<T> near_packed_;
  // Off-host rows of this rank: ghost order, and their ghost positions.
  std::vector<gidx_t> off_cols_;
  std::vector<std::int64_t> off_pos_;
  std::vector<std::int64_t> up_local_;  // step 1: local rows for the leader
  std::vector<T> up_packed_, down_;     // (non-leaders) step 1 out, step 3 in
  // Leader only (offsets in rows; *_displs_ have one entry more than blocks).
  std::vector<std::int64_t> up_displs_;    // gather_ block of each host rank
  std::vector<std::int64_t> in_displs_;    // inbound_ block of each source host
  std::vector<std::int64_t> out_index_;    // outbound_ row -> gather_ row
  std::vector<std::int64_t> out_displs_;   // outbound_ block of each destination host
  std::vector<std::int64_t> down_index_;   // down_packed_ row -> inbound_ row
  std::vector<std::int64_t> down_displs_;  // down_packed_ block of each host rank
  std::vector<T> gather_, outbound_, inbound_, down_packed_;
  std::vector<MPI_Request> reqs_, up_reqs_;
};

}  // namespace

NETSPARSE_EXCHANGE_FACTORY(make_node_ie_exchange, NodeIeExchange);

}  // namespace netsparse::dist
