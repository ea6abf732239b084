// task-packets: data-centric task packets (the SmartNIC dissertation, ch. 4) beside the
// inspector-executor's row fetch and a whole-block fetch, chosen per owner pair.
//
// For an owner q, a rank takes one of three ways:
//   rows   fetch the distinct rows of B it needs from q (u_q rows of K values, as
//          inspector-executor does; the owner packs them);
//   block  fetch q's whole block of B (n_q rows), which q sends straight from its operand, no
//          packing and no list of rows (su's fetch-all, for one pair: it pays where a rank needs
//          most of q's rows);
//   tasks  send q the sparse work on its rows -- one (reply slot, owner-local column, value)
//          triple per nonzero whose column q owns (task_packet.hpp) -- and get back one partial
//          sum of K values per distinct local row touched (r_q slots), added into C.
// By default the setup prices rows and tasks with the one wire model (concat/wire_model.hpp:
// payload + 50 B per message) and takes task packets only where they move at least a quarter
// fewer bytes per run:
//   packet(nnz_q) + r_q x K x s  (+ 2 messages)   <=   3/4 x (u_q x K x s  (+ 1 message))
// so a rank whose few rows reach many of q's rows sends its work, and a rank whose many rows share
// few of q's rows fetches them. The margin prices what bytes do not show: the owner's extra pass
// over the task packet and the requester's pass adding the partial sums, and the owner's reply
// waiting for that pass (NotreDame_www np 4 K = 4: one pair at 0.76x the bytes lost 4 %; every
// pair at or below 0.74x was part of a win; docs/benchmarks.md, task packets).
// With DistOptions::tune_owners (auto's candidate) or NETSPARSE_TASK_PACKETS=measure the way of
// each pair is chosen by measurement instead (the paper's run-time tuning, per owner pair; Two-
// Face's per-stripe choice by cost): the kernel's first runs try each way on every pair at once
// (a warm-up run, then DistOptions::tune_runs measured ones, each a steady run: per owner the
// wait its data left exposed after the local kernel, plus the work that owner's data leaves
// this rank -- its share of the remote kernel, or adding its partial sums), after a round on
// the bytes model's ways; keep per owner the cheapest way on average (ties to rows, then
// tasks), try that mix the same way, and keep the round whose slowest rank's median run is the
// lowest (one allreduce) if it beats the bytes model's by 5 % (task::kKeepMargin: the trials'
// spread on this machine), else the bytes model's ways. Pairs are not separable in a concurrent
// exchange, which is why the mix is tried whole before it is kept. A new pattern tunes again.
// NETSPARSE_TASK_PACKETS=rows / tasks / block forces a way (A/B runs). SDDMM's output is per
// nonzero, not per row: no task packets.
//
// Everything travels as MPI point-to-point messages on the exchange's own duplicate of the
// kernel's communicator, one message per (rank, peer, kind) and run. Owners check a task packet
// whole before using it (task::check_packet) and answer a bad one with an empty reply, so the
// requester fails at once; every wait of a run is polled against a deadline
// (node_wait_deadline: 2 x the engine watchdog + 1 s, else 120 s), so a dead peer makes the run
// throw instead of hanging, and the run ends with the failure agreement (with the same deadline):
// if any rank failed, every rank throws.
#include <algorithm>
#include <array>
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
#include "distributed/modes/owner_ways.hpp"
#include "distributed/modes/task_packet.hpp"
#include "sparse/csr_part.hpp"
#include "support/peer_failure.hpp"

namespace netsparse::dist {

namespace {

using task::kWays;
using task::Way;

// What a requester announces to an owner at setup (one per peer it takes tasks or a block
// from; a rows owner gets its list of rows instead).
struct OwnerChoice {
  std::uint32_t way = 0;
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
    counts_ = count_per_owner(pat.remote_csr, rc);
    const std::string forced = config::choice(config::Env::kTaskPackets);
    trial_ = Trial{};
    trial_.on = !rc.options->dynamic_pattern && (rc.options->tune_owners || forced == "measure");
    if (trial_.on) {
      start_trials(pat, rc);  // the trials' ways: tasks only where the kernel has them
    } else {
      apply_ways(pat, rc, bytes_model_ways(rc, forced));
    }
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
      // The trials' collectives (a round's setup, the choice) run here, at the start of a run:
      // DistKernel's argument agreement, polled against the deadline, has just found every
      // rank alive -- at the end of the previous run a peer dying after it could leave the
      // others in MPI_Alltoall for ever.
      if (trial_.on) prepare_trial_step(pat, rc);
      run_exchange(pat, rc, ops, compute, stats);
    } catch (...) {
      error = std::current_exception();
    }
    // Every rank fails the run if one did (a refused packet, a peer past the deadline).
    agree_on_failure(comm_, error, deadline_);
    if (trial_.on) ++trial_.step;  // a failed run is tried again at the same step
  }

 private:
  static constexpr std::uint64_t kMaxInt = std::numeric_limits<int>::max();
  static constexpr double kNone = task::kNotMeasured;

  // Per owner: remote nonzeros, distinct rows touched, distinct columns, all values 1?
  struct OwnerCounts {
    std::vector<std::uint64_t> nnz, rows_touched, cols_touched;
    std::vector<char> unit;
    std::vector<int> owner_of;  // per remote nonzero
  };
  OwnerCounts count_per_owner(const CsrMatrix& remote, const RunContext& rc) {
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
    peers_.clear();
    for (int q = 0; q < p; ++q) {
      if (q != rc.rank && n.nnz[q] > 0) peers_.push_back(q);
    }
    return n;
  }

  // Whether owner q's pairs can take `way` here: task packets need the kernel's rows (not
  // SDDMM's per-nonzero output) and counts within the packet's and MPI's; a block must be an MPI
  // count of rows.
  bool possible(int q, Way way, const RunContext& rc) const {
    const OwnerCounts& n = counts_;
    switch (way) {
      case Way::rows:
        return true;
      case Way::tasks: {
        const std::uint64_t packet = task::packet_bytes(n.nnz[q], n.unit[q] != 0, sizeof(T));
        return rc.kernel != KernelKind::sddmm &&
               n.nnz[q] <= std::numeric_limits<std::uint32_t>::max() && packet <= kMaxInt &&
               n.rows_touched[q] * static_cast<std::uint64_t>(rc.k) <= kMaxInt;
      }
      case Way::block:
        return static_cast<std::uint64_t>(rc.cols->size(q)) <= kMaxInt;
    }
    return false;
  }

  // The default choice per owner: task packets only where they move fewer bytes per run (or
  // the way NETSPARSE_TASK_PACKETS forces, where the pair can take it).
  std::vector<Way> bytes_model_ways(const RunContext& rc, const std::string& forced) const {
    const std::uint64_t row_bytes = rc.row_bytes();
    std::vector<Way> ways(peers_.size(), Way::rows);
    for (std::size_t i = 0; i < peers_.size(); ++i) {
      const int q = peers_[i];
      const OwnerCounts& n = counts_;
      if (forced == "tasks" || forced == "block") {
        const Way w = forced == "tasks" ? Way::tasks : Way::block;
        if (possible(q, w, rc)) ways[i] = w;
        continue;
      }
      if (forced != "auto" && forced != "measure") continue;  // rows
      const std::uint64_t packet = task::packet_bytes(n.nnz[q], n.unit[q] != 0, sizeof(T));
      const std::uint64_t tasks_wire =
          concat::mpi_messages_wire_bytes(1, packet) +
          concat::mpi_messages_wire_bytes(1, n.rows_touched[q] * row_bytes);
      const std::uint64_t rows_wire =
          concat::mpi_messages_wire_bytes(1, n.cols_touched[q] * row_bytes);
      if (possible(q, Way::tasks, rc) && 4 * tasks_wire <= 3 * rows_wire) ways[i] = Way::tasks;
    }
    return ways;
  }

  // A trial's ways: `way` for every owner that can take it, rows for the others. The block's
  // trial skips owners this rank needs fewer than half the rows of (a block more than twice
  // what rows move cannot be the cheaper way; and it bounds what the trial allocates).
  std::vector<Way> uniform_ways(const RunContext& rc, Way way) const {
    std::vector<Way> ways(peers_.size(), Way::rows);
    for (std::size_t i = 0; i < peers_.size(); ++i) {
      const int q = peers_[i];
      const bool worth_it = way != Way::block || 2 * counts_.cols_touched[q] >=
                                                     static_cast<std::uint64_t>(rc.cols->size(q));
      if (worth_it && possible(q, way, rc)) ways[i] = way;
    }
    return ways;
  }

  // Sets up the exchange for `ways` (one per peer_): the split of the remote nonzeros, then the
  // owners told (the ways of task and block owners, the rows asked of the rows owners).
  // Collective.
  void apply_ways(const Pattern& pat, const RunContext& rc, std::vector<Way> ways) {
    ways_ = std::move(ways);
    split_by_way(pat, rc);
    std::vector<std::vector<OwnerChoice>> choices(rc.nranks);
    std::vector<std::vector<gidx_t>> requests(rc.nranks);
    for (const Source& s : sources_) {
      if (s.whole) {
        choices[s.rank].push_back({static_cast<std::uint32_t>(Way::block), 0, 0, 0});
        continue;
      }
      const gidx_t* g = layout_.ghosts().data() + s.offset;
      requests[s.rank].assign(g, g + s.count);
    }
    for (const TaskOwner& t : task_owners_) {
      choices[t.rank].push_back({static_cast<std::uint32_t>(Way::tasks), t.unit_values ? 1u : 0u,
                                 t.slots, static_cast<std::uint32_t>(counts_.nnz[t.rank])});
    }
    std::vector<int> choice_counts;
    const std::vector<OwnerChoice> received = exchange_all_to_all(comm_, choices, &choice_counts);
    std::vector<int> send_rows;
    const std::vector<gidx_t> asked = exchange_all_to_all(comm_, requests, &send_rows);
    take_requesters(rc, received, choice_counts);
    take_row_requests(rc, asked, send_rows);
  }

  // The fetched part: the remote nonzeros of rows and block owners, renumbered onto their
  // ghosts (GhostLayout, as inspector-executor; a block owner's whole range is ghosts), and the
  // task packets of task owners.
  void split_by_way(const Pattern& pat, const RunContext& rc) {
    const OwnerCounts& n = counts_;
    const CsrMatrix& remote = pat.remote_csr;
    task_owners_.clear();
    CsrMatrix fetched = csr_with_rows_of(remote);
    std::vector<ColumnRange> whole;
    // Per rank: its task owner's index, or -1 (fetched).
    std::vector<std::ptrdiff_t> task_index(static_cast<std::size_t>(rc.nranks), -1);
    for (std::size_t i = 0; i < peers_.size(); ++i) {
      const int q = peers_[i];
      if (ways_[i] == Way::block) whole.push_back({rc.cols->begin(q), rc.cols->end(q)});
      if (ways_[i] != Way::tasks) continue;
      task_index[static_cast<std::size_t>(q)] = static_cast<std::ptrdiff_t>(task_owners_.size());
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
    std::vector<std::uint64_t> filled(task_owners_.size(), 0);
    for (gidx_t r = 0; r < remote.n_rows; ++r) {
      for (std::int64_t i = remote.row_ptr[r]; i < remote.row_ptr[r + 1]; ++i) {
        const int q = n.owner_of[i];
        const std::ptrdiff_t ti = task_index[static_cast<std::size_t>(q)];
        if (ti < 0) {
          fetched.col_idx.push_back(remote.col_idx[i]);
          fetched.values.push_back(remote.values[i]);
          continue;
        }
        TaskOwner& t = task_owners_[static_cast<std::size_t>(ti)];
        if (t.slot_rows.empty() || t.slot_rows.back() != r) t.slot_rows.push_back(r);
        const std::size_t nnz = n.nnz[q], at = filled[static_cast<std::size_t>(ti)]++;
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
    layout_.build(fetched, rc.cols->n_rows(), pat.local_part.config(), rc.scalar(), whole);
    // The ghosts are sorted and owners hold ascending ranges: each owner's ghosts are one slice.
    sources_.clear();
    const std::vector<gidx_t>& ghosts = layout_.ghosts();
    for (std::size_t g = 0; g < ghosts.size();) {
      const int q = rc.cols->owner(ghosts[g]);
      const std::size_t from = g;
      while (g < ghosts.size() && ghosts[g] < rc.cols->end(q)) ++g;
      const bool is_whole = ways_[peer_index(q)] == Way::block;
      sources_.push_back({q, static_cast<std::size_t>(from),
                          to_mpi_count(g - from, "task-packets ghost rows"), is_whole});
    }
    std::size_t sums_in = 0;
    for (TaskOwner& t : task_owners_) {
      t.sums_offset = sums_in;
      sums_in += std::size_t{t.slots} * static_cast<std::size_t>(rc.k);
    }
    sums_in_.assign(sums_in, T{0});
    ghost_.resize(ghosts.size() * static_cast<std::size_t>(rc.k));
  }

  std::size_t peer_index(int q) const {
    return static_cast<std::size_t>(std::lower_bound(peers_.begin(), peers_.end(), q) -
                                    peers_.begin());
  }

  // The owner's side: what each requester that chose task packets or this rank's block sends
  // and gets.
  void take_requesters(const RunContext& rc, const std::vector<OwnerChoice>& received,
                       const std::vector<int>& choice_counts) {
    task_requesters_.clear();
    block_dests_.clear();
    std::size_t next = 0, packet_bytes_in = 0, sums_out = 0;
    for (int q = 0; q < rc.nranks; ++q) {
      for (int j = 0; j < choice_counts[q]; ++j, ++next) {
        const OwnerChoice& c = received[next];
        const bool tasks = c.way == static_cast<std::uint32_t>(Way::tasks);
        const bool block = c.way == static_cast<std::uint32_t>(Way::block);
        if (!(tasks || block) || c.unit_values > 1 || j > 0 || q == rc.rank ||
            (block && (c.unit_values | c.slots | c.tasks) != 0)) {
          throw std::runtime_error("task-packets: malformed setup announcement from rank " +
                                   std::to_string(q));
        }
        if (block) {
          block_dests_.push_back(q);
          continue;
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
    if (!block_dests_.empty() && static_cast<std::uint64_t>(rc.cols->size(rc.rank)) > kMaxInt) {
      throw std::overflow_error("task-packets: this rank's block exceeds an MPI count of rows");
    }
    packets_in_.assign(packet_bytes_in, std::byte{0});
    sums_out_.assign(sums_out, T{0});
  }

  // The rows each peer fetches from this rank (checked to be this rank's), and the blocks of
  // the row messages out.
  void take_row_requests(const RunContext& rc, const std::vector<gidx_t>& asked,
                         const std::vector<int>& send_rows) {
    const gidx_t cb = rc.cols->begin(rc.rank), ce = rc.cols->end(rc.rank);
    send_local_.resize(asked.size());
    for (std::size_t i = 0; i < asked.size(); ++i) {
      if (asked[i] < cb || asked[i] >= ce) {
        throw std::runtime_error("task-packets: asked for row " + std::to_string(asked[i]) +
                                 ", which this rank does not own");
      }
      send_local_[i] = asked[i] - cb;
    }
    row_dests_.clear();
    for (int q = 0, offset = 0; q < rc.nranks; ++q) {
      if (send_rows[q] > 0) row_dests_.push_back({q, offset, send_rows[q]});
      offset += send_rows[q];
    }
    packed_.resize(send_local_.size() * static_cast<std::size_t>(rc.k));
  }

  struct Block {
    int rank, offset, count;  // in rows
  };
  // What this rank receives from a rows or block owner: `count` ghost rows from ghost `offset`.
  struct Source {
    int rank;
    std::size_t offset;
    int count;
    bool whole;  // the owner's whole block (Way::block), sent without a list
  };
  using Clock = std::chrono::steady_clock;

  void run_exchange(const Pattern& pat, const RunContext& rc, const Operands<T>& ops,
                    Compute<T>& compute, CommStats& stats) {
    const std::size_t k = static_cast<std::size_t>(rc.k);
    const Clock::time_point until = Clock::now() + deadline_;
    const double tp = now_seconds();
    // A measured trial run (Trial::measuring): the data's arrival per owner noted as it polls.
    const bool measured = trial_.measuring();
    run_start_ = tp;
    arrival_.assign(measured ? peers_.size() : 0, kNone);
    recvs_.clear();
    kinds_.clear();
    sends_.clear();
    // Receives: task packets (as owner), rows, blocks and partial sums (as requester).
    for (std::size_t i = 0; i < task_requesters_.size(); ++i) {
      const TaskRequester& t = task_requesters_[i];
      const std::uint64_t bytes =
          task::packet_bytes(t.choice.tasks, t.choice.unit_values != 0, sizeof(T));
      post_recv(packets_in_.data() + t.packet_offset, static_cast<int>(bytes), MPI_BYTE, t.rank,
                task::kTagTasks, {Kind::tasks, i});
    }
    for (std::size_t i = 0; i < sources_.size(); ++i) {
      const Source& s = sources_[i];
      post_recv(ghost_.data() + s.offset * k, s.count, rc.row_type, s.rank, task::kTagRows,
                {Kind::rows, i});
    }
    for (std::size_t i = 0; i < task_owners_.size(); ++i) {
      const TaskOwner& t = task_owners_[i];
      post_recv(sums_in_.data() + t.sums_offset, static_cast<int>(t.slots), rc.row_type, t.rank,
                task::kTagSums, {Kind::sums, i});
    }
    // Sends: task packets to task owners, this rank's whole block to its block requesters (from
    // the operand itself), rows to the ranks that asked for them.
    for (const TaskOwner& t : task_owners_) {
      post_send(t.packet.data(), static_cast<int>(t.packet.size()), MPI_BYTE, t.rank,
                task::kTagTasks);
    }
    const int own_rows = static_cast<int>(std::min<std::uint64_t>(rc.cols->size(rc.rank), kMaxInt));
    for (const int q : block_dests_) post_send(ops.b, own_rows, rc.row_type, q, task::kTagRows);
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
    std::string refused;
    // Serve the task packets already here, so their senders are not held by our local compute.
    poll(rc, ops, refused, false, until);
    compute.local(pat, rc, ops);
    const double t0 = now_seconds();
    poll(rc, ops, refused, true, until);
    const double t1 = now_seconds();
    stats.wait_seconds += t1 - t0;
    const double tr = now_seconds();
    compute.remote_all(layout_.compact(), rc, ops,
                       BasicDenseConstView<T>{ghost_.data(), 0, rc.k,
                                              static_cast<gidx_t>(layout_.ghosts().size())});
    const double remote_seconds = now_seconds() - tr;
    if (refused.empty()) add_sums(rc, ops, measured);
    compute.finish(pat, rc, ops);
    stats.compute_seconds += (now_seconds() - tc) - (t1 - t0);
    wait_sends(until);
    account(rc, stats);
    if (trial_.on) ++stats.owner_trial_runs;
    if (!refused.empty()) throw std::runtime_error("task-packets: " + refused);
    if (measured) record_trial(t0 - tp, remote_seconds, now_seconds() - tp);
  }

  // The tuning (DistOptions::tune_owners). Steps, one run each, the same on every rank: rounds
  // of a warm-up run and DistOptions::tune_runs measured runs -- the bytes model's ways, one
  // round per trial way, then the mix of the per-owner cheapest ways (mean cost over the runs
  // that measured them); then the choice on the rounds' median run times (one allreduce).
  struct Trial {
    bool on = false;
    int step = 0;
    int measured_runs = 2;                    // per round (DistOptions::tune_runs)
    std::vector<Way> ways;                    // the ways tried, in order
    std::vector<std::array<double, 3>> cost;  // per peer, per Way: arrival + work left here
    std::vector<std::array<int, 3>> samples;  // per peer, per Way: the runs summed in cost
    // Per round (the bytes model's, each trial way's, the mix's): this rank's measured runs.
    std::vector<std::vector<double>> run_seconds;
    std::vector<Way> defaults;  // the bytes model's ways
    std::vector<Way> mix;       // the per-owner cheapest ways
    [[nodiscard]] int round() const { return step / (measured_runs + 1); }
    [[nodiscard]] bool measuring() const { return on && step % (measured_runs + 1) != 0; }
  };

  void start_trials(const Pattern& pat, const RunContext& rc) {
    for (const Way w : kWays) {
      if (w != Way::tasks || rc.kernel != KernelKind::sddmm) trial_.ways.push_back(w);
    }
    trial_.measured_runs = std::max(1, rc.options->tune_runs);
    trial_.cost.assign(peers_.size(), {0.0, 0.0, 0.0});
    trial_.samples.assign(peers_.size(), {0, 0, 0});
    trial_.run_seconds.assign(trial_.ways.size() + 2, {});
    trial_.defaults = bytes_model_ways(rc, "auto");
    apply_ways(pat, rc, trial_.defaults);
  }

  // After a measured run: each owner's cost under the way it took in this run -- the wait its
  // data left exposed after the local kernel (0 when it arrived during it) plus the work it left
  // here. A measured run is a steady run (the overlap included), so a way that only moves its
  // data sooner gains nothing where the local kernel hid the data anyway.
  void record_trial(double local_end, double remote_seconds, double run_seconds) {
    const auto round = static_cast<std::size_t>(trial_.round());
    trial_.run_seconds[round].push_back(run_seconds);
    if (round > trial_.ways.size()) return;  // the mix's run: its time only
    // The remote kernel's time shared among the fetched owners by their nonzeros.
    std::uint64_t fetched_nnz = 0;
    for (std::size_t i = 0; i < peers_.size(); ++i) {
      if (ways_[i] != Way::tasks) fetched_nnz += counts_.nnz[peers_[i]];
    }
    // Per peer, the time adding its partial sums (task owners; add_seconds_ is per task owner).
    std::vector<double> added(peers_.size(), 0.0);
    for (std::size_t o = 0; o < add_seconds_.size(); ++o) {
      added[peer_index(task_owners_[o].rank)] = add_seconds_[o];
    }
    for (std::size_t i = 0; i < peers_.size(); ++i) {
      if (arrival_[i] == kNone) continue;
      double work = added[i];
      if (ways_[i] != Way::tasks && fetched_nnz > 0) {
        work = remote_seconds * static_cast<double>(counts_.nnz[peers_[i]]) /
               static_cast<double>(fetched_nnz);
      }
      const auto w = static_cast<std::size_t>(ways_[i]);
      trial_.cost[i][w] += std::max(0.0, arrival_[i] - local_end) + work;
      ++trial_.samples[i][w];
    }
  }

  static double median_of(std::vector<double> v) {
    if (v.empty()) return kNone;
    std::sort(v.begin(), v.end());
    const std::size_t n = v.size();
    return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
  }

  // Before each run while tuning: at a round's first step its ways (a collective setup, the same
  // on every rank), after the last round the choice.
  void prepare_trial_step(const Pattern& pat, const RunContext& rc) {
    if (trial_.step == 0 || trial_.measuring()) return;  // set up already / the round goes on
    const int round = trial_.round();
    const int ways = static_cast<int>(trial_.ways.size());
    if (round <= ways) {
      apply_ways(pat, rc, uniform_ways(rc, trial_.ways[static_cast<std::size_t>(round - 1)]));
      return;
    }
    if (round == ways + 1) {
      std::vector<std::array<double, 3>> mean(peers_.size(), {kNone, kNone, kNone});
      for (std::size_t i = 0; i < peers_.size(); ++i) {
        for (std::size_t w = 0; w < 3; ++w) {
          if (trial_.samples[i][w] > 0) mean[i][w] = trial_.cost[i][w] / trial_.samples[i][w];
        }
      }
      trial_.mix = task::cheapest_ways(mean, trial_.ways);
      apply_ways(pat, rc, trial_.mix);
      return;
    }
    // The choice: the slowest rank's median of each round; a change from the bytes model's ways
    // only where it wins by the margin.
    std::vector<double> slowest;
    for (const std::vector<double>& r : trial_.run_seconds) slowest.push_back(median_of(r));
    check_mpi(MPI_Allreduce(MPI_IN_PLACE, slowest.data(), static_cast<int>(slowest.size()),
                            MPI_DOUBLE, MPI_MAX, comm_),
              "MPI_Allreduce");
    const std::size_t best = task::kept_trial(slowest);
    trial_.on = false;
    // The kept ways set up afresh, on buffers sized for them alone (the trials' grew them).
    std::vector<T>().swap(ghost_);
    std::vector<T>().swap(packed_);
    std::vector<T>().swap(sums_in_);
    std::vector<T>().swap(sums_out_);
    apply_ways(pat, rc,
               best == 0                   ? trial_.defaults
               : best + 1 < slowest.size() ? uniform_ways(rc, trial_.ways[best - 1])
                                           : trial_.mix);
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
      const double at = now_seconds() - run_start_;
      for (int i = 0; i < count; ++i) {
        on_received(rc, ops, kinds_[done_[i]], statuses_[i], refused, at);
      }
      if (!all) return;
      if (count == 0) {
        if (Clock::now() > until) timed_out("receiving rows, task packets or partial sums");
        std::this_thread::yield();
      }
    }
  }

  void on_received(const RunContext& rc, const Operands<T>& ops, Pending what,
                   const MPI_Status& status, std::string& refused, double at) {
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
    const int owner =
        what.kind == Kind::rows ? sources_[what.index].rank : task_owners_[what.index].rank;
    if (!arrival_.empty()) arrival_[peer_index(owner)] = at;
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

  // C[row of slot] += the owner's partial sum, for every task owner (timed per owner in a
  // measured trial run).
  void add_sums(const RunContext& rc, const Operands<T>& ops, bool timed) {
    if (rc.kernel == KernelKind::sddmm) return;
    const std::size_t k = static_cast<std::size_t>(rc.k);
    add_seconds_.assign(timed ? task_owners_.size() : 0, 0.0);
    for (std::size_t o = 0; o < task_owners_.size(); ++o) {
      const TaskOwner& t = task_owners_[o];
      const double t0 = timed ? now_seconds() : 0;
      const T* sums = sums_in_.data() + t.sums_offset;
      for (std::size_t s = 0; s < t.slot_rows.size(); ++s) {
        T* out = ops.out + static_cast<std::size_t>(t.slot_rows[s]) * k;
        const T* in = sums + s * k;
        for (std::size_t j = 0; j < k; ++j) out[j] += in[j];
      }
      if (timed) add_seconds_[o] = now_seconds() - t0;
    }
  }

  void wait_sends(Clock::time_point until) {
    if (!test_all_until(sends_, until, [] { std::this_thread::yield(); })) {
      timed_out("sending rows, blocks, task packets or partial sums");
    }
  }

  void account(const RunContext& rc, CommStats& stats) const {
    const std::uint64_t row_bytes = rc.row_bytes();
    std::uint64_t messages = 0, wire = 0;
    for (const Block& b : row_dests_) {
      wire += concat::mpi_messages_wire_bytes(1, std::uint64_t(b.count) * row_bytes);
      ++messages;
    }
    wire += block_dests_.size() *
            concat::mpi_messages_wire_bytes(1, rc.cols->size(rc.rank) * row_bytes);
    messages += block_dests_.size();
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
    for (const Source& s : sources_) ++(s.whole ? stats.block_owners : stats.row_owners);
  }

  MPI_Comm comm_ = MPI_COMM_NULL;
  std::chrono::milliseconds deadline_{120000};
  bool broken_ = false;
  OwnerCounts counts_;
  std::vector<int> peers_;  // the owners this rank needs anything from, ascending
  std::vector<Way> ways_;   // per peer
  Trial trial_;
  GhostLayout layout_;  // the rows and block owners' nonzeros on their ghosts
  std::vector<TaskOwner> task_owners_;
  std::vector<TaskRequester> task_requesters_;
  std::vector<Source> sources_;
  std::vector<Block> row_dests_;
  std::vector<int> block_dests_;  // the ranks that fetch this rank's whole block
  std::vector<gidx_t> send_local_;
  std::vector<std::byte> packets_in_;
  std::vector<T> ghost_, packed_, sums_in_, sums_out_;
  std::vector<MPI_Request> recvs_, sends_;
  std::vector<Pending> kinds_;
  std::vector<int> done_;
  std::vector<MPI_Status> statuses_;
  // A measured trial run's observations: per peer the data's arrival (s after the run's start),
  // per task owner the time adding its sums.
  double run_start_ = 0;
  std::vector<double> arrival_;
  std::vector<double> add_seconds_;
};

}  // namespace

NETSPARSE_EXCHANGE_FACTORY(make_task_exchange, TaskExchange);

}  // namespace netsparse::dist
