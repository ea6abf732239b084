// Memory shared by the ranks of one host, and a barrier in it that can fail (issue 22 item 2:
// the node-wide NetSparse engine keeps its Idx Filter, the host's operand rows and the store of
// arrived remote rows here, so every rank of the host reads them in place).
//
// HostSegment is MPI-3 shared memory (MPI_Win_allocate_shared on the host's communicator): the
// host's rank 0 allocates, every rank maps the same bytes. HostBarrier lives inside a segment and
// is the per-run synchronization of the host's ranks. Unlike MPI_Barrier it has a deadline and a
// shared "failed" flag: a rank that dies (or gives up) makes every other rank of its host throw
// within the deadline instead of waiting forever, which is what lets a dead rank take its host
// down cleanly.
#pragma once

#include <mpi.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>

namespace netsparse::dist {

class HostSegment {
 public:
  HostSegment() = default;
  // Collective over host_comm: `bytes` must be the same on every rank (rank 0 allocates them,
  // 64-byte aligned; the others map rank 0's memory). The contents are not initialized.
  HostSegment(MPI_Comm host_comm, std::size_t bytes);
  ~HostSegment();  // collective (MPI_Win_free) when a segment is held
  HostSegment(HostSegment&& other) noexcept;
  HostSegment& operator=(HostSegment&& other) noexcept;
  HostSegment(const HostSegment&) = delete;
  HostSegment& operator=(const HostSegment&) = delete;

  [[nodiscard]] std::byte* data() const noexcept { return base_; }
  [[nodiscard]] std::size_t size() const noexcept { return bytes_; }
  // Frees the segment (collective over the host, like the destructor).
  void release() noexcept;

 private:
  MPI_Win win_ = MPI_WIN_NULL;
  std::byte* base_ = nullptr;
  std::size_t bytes_ = 0;
};

// A sense-reversing barrier of `ranks` processes in shared memory. Construct it in place in a
// segment on one rank (placement new) before the others use it.
class HostBarrier {
 public:
  explicit HostBarrier(int ranks) noexcept : ranks_(static_cast<std::uint32_t>(ranks)) {}

  // Waits until every rank of the host arrived. Throws std::runtime_error when the deadline
  // passes first (then marks the barrier failed) or when another rank marked it failed; `what`
  // names the step in the message. A failed barrier stays failed: every later wait throws.
  void wait(std::chrono::milliseconds deadline, const char* what);
  // Marks the barrier failed (a rank that gives up tells its host at once).
  void fail() noexcept { failed_.store(1, std::memory_order_release); }
  [[nodiscard]] bool failed() const noexcept {
    return failed_.load(std::memory_order_acquire) != 0;
  }

 private:
  const std::uint32_t ranks_;
  std::atomic<std::uint32_t> arrived_{0};
  std::atomic<std::uint32_t> generation_{0};
  std::atomic<std::uint32_t> failed_{0};
};

static_assert(std::atomic<std::uint32_t>::is_always_lock_free &&
                  std::atomic<std::uint64_t>::is_always_lock_free,
              "host-shared atomics must be lock-free (address-free across processes)");

}  // namespace netsparse::dist
