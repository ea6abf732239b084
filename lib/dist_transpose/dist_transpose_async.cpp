// The non-blocking distributed transpose (dist_transpose.hpp, transpose_start): the steps of
// transpose() as a state machine over non-blocking MPI, advanced by test() / wait() or by a
// progress thread.
#include <mpi.h>
#include <omp.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstring>
#include <exception>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "agreement/mpi_util.hpp"
#include "dist_transpose/dist_transpose_steps.hpp"
#include "distributed/deadlines.hpp"
#include "netsparse/dist_transpose.hpp"
#include "support/enum_names.hpp"
#include "support/visibility.hpp"

namespace netsparse {

using dist::check_mpi;

constexpr auto kTransposeProgressNames = std::to_array<support::EnumName<TransposeProgress>>({
    {TransposeProgress::automatic, "automatic"},
    {TransposeProgress::calls, "calls"},
    {TransposeProgress::thread, "thread"},
});

const char* to_string(TransposeProgress progress) noexcept {
  return support::name_of<kTransposeProgressNames>(progress, "unknown");
}

namespace {

// The private duplicate of a communicator the non-blocking transposes on it exchange through,
// made on the first transpose_start on that communicator (MPI_Comm_dup: the one blocking
// collective, once) and freed with it (an attribute's delete callback). A non-blocking duplicate
// per transpose (MPI_Comm_idup) was tried first: Open MPI 4.1 deadlocks when a blocking
// communicator creation on the parent (MPI_Comm_split_type in a DistKernel's setup) meets a
// pending MPI_Comm_idup. Each transpose on it takes the next sequence number, the same on every
// rank (the starts are collective, in order), so concurrent transposes use distinct tags.
struct TransposeChannel {
  MPI_Comm comm = MPI_COMM_NULL;
  std::uint64_t next_seq = 0;
  // TransposeProgress::automatic's choice on this rank: a progress thread only where a core is
  // free for it beside the host's ranks and their OpenMP threads (as the RIG engine's AUTO
  // decides): on a 2-core host with 2 ranks a thread would run on a compute core and slow both.
  bool core_free = false;
};

int free_channel(MPI_Comm, int, void* attribute, void*) {
  auto* channel = static_cast<TransposeChannel*>(attribute);
  if (channel->comm != MPI_COMM_NULL) MPI_Comm_free(&channel->comm);
  delete channel;
  return MPI_SUCCESS;
}

TransposeChannel& channel_of(MPI_Comm parent) {
  static const int keyval = [] {
    int key = MPI_KEYVAL_INVALID;
    check_mpi(MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, &free_channel, &key, nullptr),
              "MPI_Comm_create_keyval");
    return key;
  }();
  void* attribute = nullptr;
  int found = 0;
  check_mpi(MPI_Comm_get_attr(parent, keyval, &attribute, &found), "MPI_Comm_get_attr");
  if (found) return *static_cast<TransposeChannel*>(attribute);
  auto channel = std::make_unique<TransposeChannel>();
  check_mpi(MPI_Comm_dup(parent, &channel->comm), "MPI_Comm_dup");
  MPI_Comm host = MPI_COMM_NULL;
  check_mpi(MPI_Comm_split_type(channel->comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &host),
            "MPI_Comm_split_type");
  const int ranks_on_host = dist::comm_size(host);
  MPI_Comm_free(&host);
  cpu_set_t cores;
  CPU_ZERO(&cores);
  const int usable = sched_getaffinity(0, sizeof cores, &cores) == 0
                         ? CPU_COUNT(&cores)
                         : static_cast<int>(std::max(1L, sysconf(_SC_NPROCESSORS_ONLN)));
  channel->core_free = usable > ranks_on_host * std::max(1, omp_get_max_threads());
  check_mpi(MPI_Comm_set_attr(parent, keyval, channel.get()), "MPI_Comm_set_attr");
  return *channel.release();
}

// Tags of one transpose: its counts and its nonzeros (MPI guarantees tags up to 32767).
constexpr std::uint64_t kTransposeTagSlots = 16383;

}  // namespace

struct NETSPARSE_LOCAL PendingTranspose::Impl {
  enum class Stage {
    counting,  // {count, block valid} to and from every other rank in flight
    moving,    // the peers' nonzeros in flight
    finished,  // this rank's block merged, or the transpose refused
  };

  const DistMatrix* a = nullptr;
  TransposeProgress progress = TransposeProgress::calls;
  Stage stage = Stage::counting;
  double t_start = 0, pending_seconds = 0, local_seconds = 0;

  MPI_Comm comm = MPI_COMM_NULL;  // the channel's (not owned)
  int count_tag = 0, data_tag = 1;
  std::vector<MPI_Request> count_requests;  // to and from every other rank
  std::vector<MPI_Request> peer_requests;   // one per peer that sends or receives nonzeros
  std::optional<dist::ByteBlockType> item;

  std::optional<std::string> problem;  // this rank's block refused: why
  std::vector<int> refused_ranks;      // every rank whose block was refused
  dist::PackedTranspose packed;
  std::vector<std::int64_t> send_info, recv_info;  // {count, valid} per rank
  std::vector<dist::TransposeEntry> got;
  std::vector<std::int64_t> from;
  CsrMatrix block;  // this rank's block of A^T once finished
  std::optional<DistMatrix> result;

  // thread: the progress thread owns every MPI call on the requests; the caller reads `done`.
  std::thread worker;
  std::atomic<bool> done{false};
  std::exception_ptr error;

  ~Impl() {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (worker.joinable()) worker.join();
    if (finalized) return;
    try {
      finish_locally();
    } catch (...) {  // a destructor must not throw; the exchange's failure was reported by wait()
    }
  }

  void pack() {
    const double t0 = dist::now_seconds();
    problem = dist::transpose_block_problem("transpose_start", *a, a->local());
    if (!problem) packed = dist::pack_transpose(a->cols(), a->local());
    const int nranks = a->nranks();
    send_info.assign(2 * static_cast<std::size_t>(nranks), 0);
    recv_info.assign(2 * static_cast<std::size_t>(nranks), 0);
    for (int q = 0; q < nranks; ++q) {
      send_info[2 * q] = problem ? 0 : packed.offsets[q + 1] - packed.offsets[q];
      send_info[2 * q + 1] = problem ? 0 : 1;
    }
    local_seconds += dist::now_seconds() - t0;
    // The counts: every other rank may own columns of this rank's rows.
    const int me = a->rank();
    recv_info[2 * me] = send_info[2 * me];
    recv_info[2 * me + 1] = send_info[2 * me + 1];
    count_requests.reserve(2 * static_cast<std::size_t>(nranks));
    for (int q = 0; q < nranks; ++q) {
      if (q == me) continue;
      check_mpi(MPI_Irecv(recv_info.data() + 2 * q, 2, MPI_INT64_T, q, count_tag, comm,
                          &count_requests.emplace_back(MPI_REQUEST_NULL)),
                "MPI_Irecv");
    }
    for (int q = 0; q < nranks; ++q) {
      if (q == me) continue;
      check_mpi(MPI_Isend(send_info.data() + 2 * q, 2, MPI_INT64_T, q, count_tag, comm,
                          &count_requests.emplace_back(MPI_REQUEST_NULL)),
                "MPI_Isend");
    }
  }

  [[nodiscard]] static bool all_done(std::vector<MPI_Request>& requests) {
    int flag = 0;
    check_mpi(
        MPI_Testall(static_cast<int>(requests.size()), requests.data(), &flag, MPI_STATUSES_IGNORE),
        "MPI_Testall");
    return flag != 0;
  }

  // Advances every step that can advance without blocking; true once finished. Called by one
  // thread at a time (the caller in calls mode, the progress thread in thread mode).
  bool advance() {
    if (stage == Stage::counting) {
      if (!all_done(count_requests)) return false;
      post_moves();
    }
    if (stage == Stage::moving) {
      if (!all_done(peer_requests)) return false;
      const double t0 = dist::now_seconds();
      block = dist::merge_transpose(a->rank(), a->rows(), a->cols(), got, from);
      got = {};
      packed = {};
      local_seconds += dist::now_seconds() - t0;
      stage = Stage::finished;
    }
    if (pending_seconds == 0) pending_seconds = dist::now_seconds() - t_start;
    return true;
  }

  // The counts arrived: receive from every peer with nonzeros for this rank, send to every peer
  // this rank has nonzeros for, and copy this rank's own run in place.
  void post_moves() {
    const int nranks = a->nranks(), me = a->rank();
    for (int q = 0; q < nranks; ++q) {
      if (recv_info[2 * q + 1] == 0) refused_ranks.push_back(q);
    }
    if (!refused_ranks.empty()) {  // nothing moves: every rank saw the same flags
      stage = Stage::finished;
      return;
    }
    from.assign(static_cast<std::size_t>(nranks), 0);
    std::vector<std::int64_t> at(static_cast<std::size_t>(nranks) + 1, 0);
    for (int q = 0; q < nranks; ++q) {
      from[q] = recv_info[2 * q];
      at[q + 1] = at[q] + from[q];
    }
    got.resize(static_cast<std::size_t>(at[nranks]));
    item.emplace(sizeof(dist::TransposeEntry));
    const auto count = [](std::int64_t n) {
      return dist::to_mpi_count(static_cast<std::uint64_t>(n), "transpose_start: one message");
    };
    for (int q = 0; q < nranks; ++q) {
      if (q == me || from[q] == 0) continue;
      MPI_Request& r = peer_requests.emplace_back(MPI_REQUEST_NULL);
      check_mpi(MPI_Irecv(got.data() + at[q], count(from[q]), item->get(), q, data_tag, comm, &r),
                "MPI_Irecv");
    }
    for (int q = 0; q < nranks; ++q) {
      const std::int64_t n = packed.offsets[q + 1] - packed.offsets[q];
      if (q == me || n == 0) continue;
      MPI_Request& r = peer_requests.emplace_back(MPI_REQUEST_NULL);
      check_mpi(MPI_Isend(packed.entries.data() + packed.offsets[q], count(n), item->get(), q,
                          data_tag, comm, &r),
                "MPI_Isend");
    }
    const std::int64_t own = packed.offsets[me + 1] - packed.offsets[me];
    if (own > 0) {
      std::memcpy(got.data() + at[me], packed.entries.data() + packed.offsets[me],
                  static_cast<std::size_t>(own) * sizeof(dist::TransposeEntry));
    }
    stage = Stage::moving;
  }

  // The progress thread's loop: pack, post, poll until finished. A poll that finds nothing to do
  // yields the core (the caller computes on it), then sleeps briefly once polls keep failing.
  void run_worker() {
    try {
      pack();
      int idle = 0;
      while (!advance()) {
        if (++idle < 64) {
          std::this_thread::yield();
        } else {
          std::this_thread::sleep_for(std::chrono::microseconds(20));
        }
      }
    } catch (...) {
      error = std::current_exception();
    }
    done.store(true, std::memory_order_release);
  }

  // This rank's part finished (blocking, advancing it); rethrows the progress thread's failure.
  void finish_locally() {
    if (progress == TransposeProgress::thread) {
      if (worker.joinable()) worker.join();
      if (error) std::rethrow_exception(std::exchange(error, nullptr));
      return;
    }
    while (!advance()) std::this_thread::yield();
  }
};

PendingTranspose::PendingTranspose() noexcept = default;
PendingTranspose::PendingTranspose(std::unique_ptr<Impl> impl) noexcept : impl_(std::move(impl)) {}
PendingTranspose::~PendingTranspose() = default;
PendingTranspose::PendingTranspose(PendingTranspose&&) noexcept = default;
PendingTranspose& PendingTranspose::operator=(PendingTranspose&&) noexcept = default;

bool PendingTranspose::valid() const noexcept {
  return impl_ != nullptr;
}

bool PendingTranspose::test() {
  if (!impl_) throw std::logic_error("PendingTranspose::test: no transpose (moved from?)");
  Impl& s = *impl_;
  if (s.progress == TransposeProgress::thread) {
    return s.done.load(std::memory_order_acquire);
  }
  return s.advance();
}

const DistMatrix& PendingTranspose::wait() {
  if (!impl_) throw std::logic_error("PendingTranspose::wait: no transpose (moved from?)");
  Impl& s = *impl_;
  if (s.result) return *s.result;
  s.finish_locally();
  if (!s.refused_ranks.empty()) {
    if (s.problem) throw std::invalid_argument(*s.problem);
    std::string ranks;
    for (int q : s.refused_ranks) ranks += (ranks.empty() ? "" : ", ") + std::to_string(q);
    throw std::invalid_argument("transpose_start (rank " + std::to_string(s.a->rank()) +
                                "): the block of rank(s) " + ranks +
                                " does not fit the matrix's partitions (their error says how)");
  }
  s.result.emplace(s.a->comm(), std::move(s.block), s.a->cols(), s.a->rows(), s.a->name() + "^T");
  return *s.result;
}

const DistMatrix* PendingTranspose::result() const noexcept {
  return impl_ && impl_->result ? &*impl_->result : nullptr;
}
TransposeProgress PendingTranspose::progress() const noexcept {
  return impl_ ? impl_->progress : TransposeProgress::automatic;
}
double PendingTranspose::pending_seconds() const noexcept {
  return impl_ ? impl_->pending_seconds : 0.0;
}
double PendingTranspose::local_seconds() const noexcept {
  return impl_ ? impl_->local_seconds : 0.0;
}

PendingTranspose transpose_start(const DistMatrix& a, TransposeProgress progress) {
  if (a.comm() == MPI_COMM_NULL) {
    throw std::invalid_argument(
        "transpose_start: the matrix has no communicator (a default-constructed DistMatrix)");
  }
  int level = MPI_THREAD_SINGLE;
  check_mpi(MPI_Query_thread(&level), "MPI_Query_thread");
  if (progress == TransposeProgress::thread && level != MPI_THREAD_MULTIPLE) {
    throw std::invalid_argument(
        "transpose_start: TransposeProgress::thread needs MPI_THREAD_MULTIPLE (MPI_Init_thread); "
        "use TransposeProgress::calls");
  }
  TransposeChannel& channel = channel_of(a.comm());
  if (progress == TransposeProgress::automatic) {
    progress = level == MPI_THREAD_MULTIPLE && channel.core_free ? TransposeProgress::thread
                                                                 : TransposeProgress::calls;
  }
  auto impl = std::make_unique<PendingTranspose::Impl>();
  PendingTranspose::Impl& s = *impl;
  s.a = &a;
  s.progress = progress;
  s.t_start = dist::now_seconds();
  s.comm = channel.comm;
  const std::uint64_t slot = channel.next_seq++ % kTransposeTagSlots;
  s.count_tag = static_cast<int>(2 * slot);
  s.data_tag = static_cast<int>(2 * slot + 1);
  if (progress == TransposeProgress::thread) {
    s.worker = std::thread([&s] { s.run_worker(); });
  } else {
    s.pack();
    s.advance();
  }
  return PendingTranspose(std::move(impl));
}

}  // namespace netsparse
