// task-packets: data-centric task packets (the SmartNIC dissertation, ch. 4) beside the
// inspector-executor's row fetch, chosen per owner by bytes.
//
// For an owner q, a rank either fetches the distinct rows of B it needs from q (u_q rows of K
// values, as inspector-executor does), or sends q the sparse work on them -- one (reply slot,
// owner-local column, value) triple per nonzero whose column q owns (task_packet.hpp) -- and gets
// back one partial sum of K values per distinct local row touched (r_q slots), which it adds into
// C. The setup prices both with the one wire model (concat/wire_model.hpp: payload + 50 B per
// message) and takes task packets only where they move at least a quarter fewer bytes per run:
//   packet(nnz_q) + r_q x K x s  (+ 2 messages)   <=   3/4 x (u_q x K x s  (+ 1 message))
// so a rank whose few rows reach many of q's rows sends its work, and a rank whose many rows share
// few of q's rows fetches them. The margin prices what bytes do not show: the owner's extra pass
// over the task packet and the requester's pass adding the partial sums, and the owner's reply
// waiting for that pass (NotreDame_www np 4 K = 4: one pair at 0.76x the bytes lost 4 %; every
// pair at or below 0.74x was part of a win; docs/benchmarks.md, task packets).
// NETSPARSE_TASK_PACKETS=rows / tasks forces the choice (A/B runs). SDDMM's output is per
// nonzero, not per row: it always fetches.
//
// Everything travels as MPI point-to-point messages on the exchange's own duplicate of the
// kernel's communicator, one message per (rank, peer, kind) and run. Owners check a task packet
// whole before using it (task::check_packet) and answer a bad one with an empty reply, so the
// requester fails at once; every wait of a run is polled against a deadline
// (node_wait_deadline: 2 x the engine watchdog + 1 s, else 120 s), so a dead peer makes the run
// throw instead of hanging, and the run ends with the failure agreement (with the same deadline):
// if any rank failed, every rank throws.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "agreement/mpi_util.hpp"
#include "concat/wire_model.hpp"
#include "config/settings.hpp"
#include "distributed/deadlines.hpp"
#include "distributed/exchange.hpp"
#include "distributed/ghosts.hpp"
#include "distributed/modes/task_packet.hpp"
#include "sparse/csr_part.hpp"
#include "support/peer_failure.hpp"

namespace netsparse::dist {

namespace {

// What a requester announces to an owner at setup (one per peer it needs anything from).
struct OwnerChoice {
  std::uint32_t tasks_mode = 0;  // 1: task packets, 0: rows (their list follows separately)
  std::uint32_t unit_values = 0;
  std::uint32_t slots = 0;
  std::uint32_t tasks = 0;
};

// The requester's side of one task owner.
struct TaskOwner {
  int rank = 0;
  bool unit_values = false;
  std::uint32_t slots = 0;
  std::vector<std::byte> packet;  // built once per pattern, sent every run
  std::vector<gidx_t> slot_rows;  // local row of each reply slot
  std::size_t sums_offset = 0;    // in sums_in_, elements
};

// The owner's side of one requester that sends task packets.
struct TaskRequester {
  int rank = 0;
  OwnerChoice choice;
  std::size_t packet_offset = 0;  // in packets_in_, bytes
  std::size_t sums_offset = 0;    // in sums_out_, elements
};

template <class T>
class TaskExchange final : public Exchange<T> {
 public:
  ~TaskExchange() override {
    if (comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
  }

  bool needs_remote_panels() const noexcept override { return false; }

  void setup(const Pattern& pat, const RunContext& rc) override {
    if (comm_ == MPI_COMM_NULL) {
      check_mpi(MPI_Comm_dup(rc.comm, &comm_), "MPI_Comm_dup");
      // Errors come back as exceptions (check_mpi), never as an abort of the job.
      check_mpi(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
    }
    deadline_ = node_wait_deadline(*rc.options);
    broken_ = false;
    const OwnerCounts counts = count_per_owner(pat.remote_csr, rc);
    const std::vector<char> tasks_mode = choose_per_owner(counts, rc);
    split_by_owner_choice(pat, rc, counts, tasks_mode);
    // Tell the owners: the choice per owner, then the rows asked of the row owners.
    std::vector<std::vector<OwnerChoice>> choices(rc.nranks);
    std::vector<std::vector<gidx_t>> requests(rc.nranks);
    for (gidx_t c : layout_.ghosts()) requests[rc.cols->owner(c)].push_back(c);
    for (const TaskOwner& t : task_owners_) {
      choices[t.rank].push_back(
          {1, t.unit_values ? 1u : 0u, t.slots, static_cast<std::uint32_t>(counts.nnz[t.rank])});
    }
    std::vector<int> choice_counts;
    const std::vector<OwnerChoice> received = exchange_all_to_all(comm_, choices, &choice_counts);
    std::vector<int> send_rows;
    const std::vector<gidx_t> asked = exchange_all_to_all(comm_, requests, &send_rows);
    take_requesters(rc, received, choice_counts);
    take_row_requests(rc, requests, asked, send_rows);
  }

  void run(const Pattern& pat, const RunContext& rc, const Operands<T>& ops, Compute<T>& compute,
           CommStats& stats) override {
    std::exception_ptr error;
    try {
      if (broken_) {
        throw std::runtime_error(
            "task-packets: an earlier run of this kernel timed out (a peer died or stalled); "
            "its messages may still be in flight, so the kernel cannot run again");
      }
      run_exchange(pat, rc, ops, compute, stats);
    } catch (...) {
      error = std::current_exception();
    }
    // Every rank fails the run if one did (a refused packet, a peer past the deadline).
    agree_on_failure(comm_, error, deadline_);
  }

 private:
  static constexpr std::uint64_t kMaxInt = std::numeric_limits<int>::max();

  // Per owner: remote nonzeros, distinct rows touched, distinct columns, all values 1?
  struct OwnerCounts {
    std::vector<std::uint64_t> nnz, rows_touched, cols_touched;
    std::vector<char> unit;
    std::vector<int> owner_of;  // per remote nonzero
  };
  static OwnerCounts count_per_owner(const CsrMatrix& remote, const RunContext& rc) {
    const int p = rc.nranks;
    OwnerCounts n{std::vector<std::uint64_t>(p, 0), std::vector<std::uint64_t>(p, 0),
                  std::vector<std::uint64_t>(p, 0), std::vector<char>(p, 1),
                  std::vector<int>(remote.col_idx.size())};
    std::vector<gidx_t> last_row(p, -1);
    std::vector<std::uint64_t> seen(static_cast<std::size_t>((rc.cols->n_rows() + 63) / 64), 0);
    for (gidx_t r = 0; r < remote.n_rows; ++r) {
      for (std::int64_t i = remote.row_ptr[r]; i < remote.row_ptr[r + 1]; ++i) {
        const gidx_t c = remote.col_idx[i];
        const int q = rc.cols->owner(c);
        n.owner_of[i] = q;
        ++n.nnz[q];
        if (last_row[q] != r) {
          last_row[q] = r;
          ++n.rows_touched[q];
        }
        std::uint64_t& word = seen[c >> 6];
        const std::uint64_t bit = std::uint64_t{1} << (c & 63);
        if ((word & bit) == 0) {
          word |= bit;
          ++n.cols_touched[q];
        }
        if (remote.values[i] != 1.0) n.unit[q] = 0;
      }
    }
    return n;
  }

  // The choice per owner: task packets only where they move fewer bytes per run.
  static std::vector<char> choose_per_owner(const OwnerCounts& n, const RunContext& rc) {
    constexpr std::uint64_t kMaxU32 = std::numeric_limits<std::uint32_t>::max();
    const std::uint64_t row_bytes = rc.row_bytes();
    std::vector<char> tasks_mode(rc.nranks, 0);
    const std::string forced = config::choice(config::Env::kTaskPackets);  // auto|rows|tasks
    for (int q = 0; q < rc.nranks; ++q) {
      if (q == rc.rank || n.nnz[q] == 0 || rc.kernel == KernelKind::sddmm) continue;
      const std::uint64_t packet = task::packet_bytes(n.nnz[q], n.unit[q] != 0, sizeof(T));
      const std::uint64_t tasks_wire =
          concat::mpi_messages_wire_bytes(1, packet) +
          concat::mpi_messages_wire_bytes(1, n.rows_touched[q] * row_bytes);
      const std::uint64_t rows_wire =
          concat::mpi_messages_wire_bytes(1, n.cols_touched[q] * row_bytes);
      const bool fits = n.nnz[q] <= kMaxU32 && packet <= kMaxInt &&
                        n.rows_touched[q] * static_cast<std::uint64_t>(rc.k) <= kMaxInt;
      const bool worth_it =
          forced == "tasks" || (forced == "auto" && 4 * tasks_wire <= 3 * rows_wire);
      tasks_mode[q] = fits && worth_it;
    }
    return tasks_mode;
  }

  // The row-fetch part: the remote nonzeros of row owners, renumbered onto their distinct
  // columns (GhostLayout, as inspector-executor), and the task packets of task owners.
  void split_by_owner_choice(const Pattern& pat, const RunContext& rc, const OwnerCounts& n,
                             const std::vector<char>& tasks_mode) {
    const int p = rc.nranks;
    const CsrMatrix& remote = pat.remote_csr;
    task_owners_.clear();
    CsrMatrix fetched = csr_with_rows_of(remote);
    std::vector<std::size_t> index_of(p, 0);
    for (int q = 0; q < p; ++q) {
      if (!tasks_mode[q]) continue;
      index_of[q] = task_owners_.size();
      TaskOwner& t = task_owners_.emplace_back();
      t.rank = q;
      t.unit_values = n.unit[q] != 0;
      t.slots = static_cast<std::uint32_t>(n.rows_touched[q]);
      t.packet.assign(task::packet_bytes(n.nnz[q], t.unit_values, sizeof(T)), std::byte{0});
      t.slot_rows.reserve(n.rows_touched[q]);
      const task::Header h{task::kMagic, t.unit_values ? task::kUnitValues : 0u, t.slots,
                           static_cast<std::uint32_t>(n.nnz[q])};
      std::memcpy(t.packet.data(), &h, sizeof h);
    }
    std::vector<std::uint64_t> filled(p, 0);
    for (gidx_t r = 0; r < remote.n_rows; ++r) {
      for (std::int64_t i = remote.row_ptr[r]; i < remote.row_ptr[r + 1]; ++i) {
        const int q = n.owner_of[i];
        if (!tasks_mode[q]) {
          fetched.col_idx.push_back(remote.col_idx[i]);
          fetched.values.push_back(remote.values[i]);
          continue;
        }
        TaskOwner& t = task_owners_[index_of[q]];
        if (t.slot_rows.empty() || t.slot_rows.back() != r) t.slot_rows.push_back(r);
        const std::size_t nnz = n.nnz[q], at = filled[q]++;
        const auto slot = static_cast<std::uint32_t>(t.slot_rows.size() - 1);
        const auto col = static_cast<std::uint32_t>(remote.col_idx[i] - rc.cols->begin(q));
        std::byte* base = t.packet.data() + task::kHeaderBytes;
        std::memcpy(base + at * 4, &slot, 4);
        std::memcpy(base + nnz * 4 + at * 4, &col, 4);
        if (!t.unit_values) {
          const T v = static_cast<T>(remote.values[i]);
          std::memcpy(base + nnz * 8 + at * sizeof(T), &v, sizeof(T));
        }
      }
      fetched.row_ptr[r + 1] = static_cast<std::int64_t>(fetched.col_idx.size());
    }
    layout_.build(fetched, rc.cols->n_rows(), pat.local_part.config(), rc.scalar());
    std::size_t sums_in = 0;
    for (TaskOwner& t : task_owners_) {
      t.sums_offset = sums_in;
      sums_in += std::size_t{t.slots} * static_cast<std::size_t>(rc.k);
    }
    sums_in_.assign(sums_in, T{0});
    ghost_.resize(layout_.ghosts().size() * static_cast<std::size_t>(rc.k));
  }

  // The owner's side: what each requester that chose task packets sends and gets.
  void take_requesters(const RunContext& rc, const std::vector<OwnerChoice>& received,
                       const std::vector<int>& choice_counts) {
    task_requesters_.clear();
    std::size_t next = 0, packet_bytes_in = 0, sums_out = 0;
    for (int q = 0; q < rc.nranks; ++q) {
      for (int j = 0; j < choice_counts[q]; ++j, ++next) {
        const OwnerChoice& c = received[next];
        if (c.tasks_mode != 1 || c.unit_values > 1 || j > 0) {
          throw std::runtime_error("task-packets: malformed setup announcement from rank " +
                                   std::to_string(q));
        }
        TaskRequester& t = task_requesters_.emplace_back();
        t.rank = q;
        t.choice = c;
        t.packet_offset = packet_bytes_in;
        t.sums_offset = sums_out;
        packet_bytes_in += task::packet_bytes(c.tasks, c.unit_values != 0, sizeof(T));
        sums_out += std::size_t{c.slots} * static_cast<std::size_t>(rc.k);
        if (packet_bytes_in > kMaxInt || sums_out > kMaxInt) {
          throw std::overflow_error("task-packets: task packets exceed an MPI count");
        }
      }
    }
    packets_in_.assign(packet_bytes_in, std::byte{0});
    sums_out_.assign(sums_out, T{0});
  }

  // The rows each peer fetches from this rank (checked to be this rank's), and the blocks of
  // the row messages both ways.
  void take_row_requests(const RunContext& rc, const std::vector<std::vector<gidx_t>>& requests,
                         const std::vector<gidx_t>& asked, const std::vector<int>& send_rows) {
    const gidx_t cb = rc.cols->begin(rc.rank), ce = rc.cols->end(rc.rank);
    send_local_.resize(asked.size());
    for (std::size_t i = 0; i < asked.size(); ++i) {
      if (asked[i] < cb || asked[i] >= ce) {
        throw std::runtime_error("task-packets: asked for row " + std::to_string(asked[i]) +
                                 ", which this rank does not own");
      }
      send_local_[i] = asked[i] - cb;
    }
    row_sources_.clear();
    row_dests_.clear();
    for (int q = 0, offset = 0; q < rc.nranks; ++q) {
      const int n = to_mpi_count(requests[q].size(), "task-packets ghost rows");
      if (n > 0) row_sources_.push_back({q, offset, n});
      offset += n;
    }
    for (int q = 0, offset = 0; q < rc.nranks; ++q) {
      if (send_rows[q] > 0) row_dests_.push_back({q, offset, send_rows[q]});
      offset += send_rows[q];
    }
    packed_.resize(send_local_.size() * static_cast<std::size_t>(rc.k));
  }

  struct Block {
    int rank, offset, count;  // in rows
  };
  using Clock = std::chrono::steady_clock;

  void run_exchange(const Pattern& pat, const RunContext& rc, const Operands<T>& ops,
                    Compute<T>& compute, CommStats& stats) {
    const std::size_t k = static_cast<std::size_t>(rc.k);
    const Clock::time_point until = Clock::now() + deadline_;
    const double tp = now_seconds();
    recvs_.clear();
    kinds_.clear();
    sends_.clear();
    // Receives: task packets (as owner), rows and partial sums (as requester).
    for (std::size_t i = 0; i < task_requesters_.size(); ++i) {
      const TaskRequester& t = task_requesters_[i];
      const std::uint64_t bytes =
          task::packet_bytes(t.choice.tasks, t.choice.unit_values != 0, sizeof(T));
      post_recv(packets_in_.data() + t.packet_offset, static_cast<int>(bytes), MPI_BYTE, t.rank,
                task::kTagTasks, {Kind::tasks, i});
    }
    for (const Block& b : row_sources_) {
      post_recv(ghost_.data() + std::size_t(b.offset) * k, b.count, rc.row_type, b.rank,
                task::kTagRows, {Kind::rows, 0});
    }
    for (std::size_t i = 0; i < task_owners_.size(); ++i) {
      const TaskOwner& t = task_owners_[i];
      post_recv(sums_in_.data() + t.sums_offset, static_cast<int>(t.slots), rc.row_type, t.rank,
                task::kTagSums, {Kind::sums, i});
    }
    // Sends: task packets to task owners, rows to the ranks that asked for them.
    for (const TaskOwner& t : task_owners_) {
      post_send(t.packet.data(), static_cast<int>(t.packet.size()), MPI_BYTE, t.rank,
                task::kTagTasks);
    }
    const auto n_send = static_cast<std::int64_t>(send_local_.size());
#pragma omp parallel for schedule(static) if (n_send * rc.k > 65536)
    for (std::int64_t i = 0; i < n_send; ++i) {
      std::copy_n(ops.b + send_local_[i] * rc.k, k, packed_.data() + i * rc.k);
    }
    for (const Block& b : row_dests_) {
      post_send(packed_.data() + std::size_t(b.offset) * k, b.count, rc.row_type, b.rank,
                task::kTagRows);
    }
    const double tc = now_seconds();
    stats.post_seconds += tc - tp;
    // Serve the task packets already here, so their senders are not held by our local compute.
    std::string refused;
    poll(rc, ops, refused, false, until);
    compute.local(pat, rc, ops);
    const double t0 = now_seconds();
    poll(rc, ops, refused, true, until);
    const double t1 = now_seconds();
    stats.wait_seconds += t1 - t0;
    compute.remote_all(layout_.compact(), rc, ops,
                       BasicDenseConstView<T>{ghost_.data(), 0, rc.k,
                                              static_cast<gidx_t>(layout_.ghosts().size())});
    if (refused.empty()) add_sums(rc, ops);
    compute.finish(pat, rc, ops);
    stats.compute_seconds += (t0 - tc) + (now_seconds() - t1);
    wait_sends(until);
    account(rc, stats);
    if (!refused.empty()) throw std::runtime_error("task-packets: " + refused);
  }

  enum class Kind { tasks, rows, sums };
  struct Pending {
    Kind kind;
    std::size_t index;
  };

  void post_recv(void* buf, int count, MPI_Datatype type, int source, int tag, Pending what) {
    recvs_.emplace_back();
    check_mpi(MPI_Irecv(buf, count, type, source, tag, comm_, &recvs_.back()), "MPI_Irecv");
    kinds_.push_back(what);
  }
  void post_send(const void* buf, int count, MPI_Datatype type, int dest, int tag) {
    sends_.emplace_back();
    check_mpi(MPI_Isend(buf, count, type, dest, tag, comm_, &sends_.back()), "MPI_Isend");
  }

  [[noreturn]] void timed_out(const char* what) {
    broken_ = true;
    support::record_peer_failure("task-packets: a run timed out");
    throw std::runtime_error(std::string("task-packets: ") + what + " not complete within " +
                             std::to_string(deadline_.count()) + " ms (a peer died or stalled)");
  }

  // Takes what has arrived: serves task packets (answering each at once), checks replies. With
  // `all`, until every receive is complete (or the deadline passes).
  void poll(const RunContext& rc, const Operands<T>& ops, std::string& refused, bool all,
            Clock::time_point until) {
    const int n = static_cast<int>(recvs_.size());
    done_.resize(recvs_.size());
    statuses_.resize(recvs_.size());
    for (;;) {
      int count = 0;
      check_mpi(MPI_Testsome(n, recvs_.data(), &count, done_.data(), statuses_.data()),
                "MPI_Testsome");
      if (count == MPI_UNDEFINED) return;  // nothing left to receive
      for (int i = 0; i < count; ++i) on_received(rc, ops, kinds_[done_[i]], statuses_[i], refused);
      if (!all) return;
      if (count == 0) {
        if (Clock::now() > until) timed_out("receiving rows, task packets or partial sums");
        std::this_thread::yield();
      }
    }
  }

  void on_received(const RunContext& rc, const Operands<T>& ops, Pending what,
                   const MPI_Status& status, std::string& refused) {
    if (what.kind == Kind::tasks) {
      const TaskRequester& t = task_requesters_[what.index];
      int bytes = 0;
      check_mpi(MPI_Get_count(&status, MPI_BYTE, &bytes), "MPI_Get_count");
      const std::span<const std::byte> packet(packets_in_.data() + t.packet_offset,
                                              static_cast<std::size_t>(bytes));
      const std::string why =
          task::check_packet<T>(packet, t.choice.slots, t.choice.tasks, t.choice.unit_values != 0,
                                static_cast<std::uint64_t>(rc.cols->size(rc.rank)));
      T* sums = sums_out_.data() + t.sums_offset;
      if (!why.empty()) {
        if (refused.empty())
          refused = "refused the task packet of rank " + std::to_string(t.rank) + ": " + why;
        post_send(sums, 0, rc.row_type, t.rank, task::kTagSums);
        return;
      }
      task::apply_packet<T>(packet, ops.b, rc.k, sums);
      post_send(sums, static_cast<int>(t.choice.slots), rc.row_type, t.rank, task::kTagSums);
      return;
    }
    if (what.kind == Kind::sums) {
      const TaskOwner& t = task_owners_[what.index];
      int rows = 0;
      check_mpi(MPI_Get_count(&status, rc.row_type, &rows), "MPI_Get_count");
      if (rows != static_cast<int>(t.slots) && refused.empty()) {
        refused = rows == 0
                      ? "rank " + std::to_string(t.rank) + " refused our task packet"
                      : "rank " + std::to_string(t.rank) + " answered " + std::to_string(rows) +
                            " partial sums, not " + std::to_string(t.slots);
      }
    }
  }

  // C[row of slot] += the owner's partial sum, for every task owner.
  void add_sums(const RunContext& rc, const Operands<T>& ops) {
    if (rc.kernel == KernelKind::sddmm) return;
    const std::size_t k = static_cast<std::size_t>(rc.k);
    for (const TaskOwner& t : task_owners_) {
      const T* sums = sums_in_.data() + t.sums_offset;
      for (std::size_t s = 0; s < t.slot_rows.size(); ++s) {
        T* out = ops.out + static_cast<std::size_t>(t.slot_rows[s]) * k;
        const T* in = sums + s * k;
        for (std::size_t j = 0; j < k; ++j) out[j] += in[j];
      }
    }
  }

  void wait_sends(Clock::time_point until) {
    if (!test_all_until(sends_, until, [] { std::this_thread::yield(); })) {
      timed_out("sending rows, task packets or partial sums");
    }
  }

  void account(const RunContext& rc, CommStats& stats) const {
    const std::uint64_t row_bytes = rc.row_bytes();
    std::uint64_t messages = 0, wire = 0;
    for (const Block& b : row_dests_) {
      wire += concat::mpi_messages_wire_bytes(1, std::uint64_t(b.count) * row_bytes);
      ++messages;
    }
    for (const TaskOwner& t : task_owners_) {
      wire += concat::mpi_messages_wire_bytes(1, t.packet.size());
      ++messages;
      stats.payload_bytes_in += std::uint64_t{t.slots} * row_bytes;
    }
    for (const TaskRequester& t : task_requesters_) {
      wire += concat::mpi_messages_wire_bytes(1, std::uint64_t{t.choice.slots} * row_bytes);
      ++messages;
    }
    stats.bytes_sent += wire;
    stats.messages_sent += messages;
    stats.payload_bytes_in += layout_.ghosts().size() * row_bytes;
    stats.task_owners += task_owners_.size();
    stats.row_owners += row_sources_.size();
  }

  MPI_Comm comm_ = MPI_COMM_NULL;
  std::chrono::milliseconds deadline_{120000};
  bool broken_ = false;
  GhostLayout layout_;  // the row owners' nonzeros on their distinct columns
  std::vector<TaskOwner> task_owners_;
  std::vector<TaskRequester> task_requesters_;
  std::vector<Block> row_sources_, row_dests_;
  std::vector<gidx_t> send_local_;
  std::vector<std::byte> packets_in_;
  std::vector<T> ghost_, packed_, sums_in_, sums_out_;
  std::vector<MPI_Request> recvs_, sends_;
  std::vector<Pending> kinds_;
  std::vector<int> done_;
  std::vector<MPI_Status> statuses_;
};

}  // namespace

NETSPARSE_EXCHANGE_FACTORY(make_task_exchange, TaskExchange);

}  // namespace netsparse::dist
