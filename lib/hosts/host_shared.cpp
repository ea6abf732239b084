#include "hosts/host_shared.hpp"

#include <sched.h>

#include <stdexcept>
#include <string>
#include <thread>
#include <utility>

#include "agreement/mpi_util.hpp"

namespace netsparse::dist {

HostSegment::HostSegment(MPI_Comm host_comm, std::size_t bytes) {
  const bool owner = comm_rank(host_comm) == 0;
  void* base = nullptr;
  MPI_Info info = MPI_INFO_NULL;
  check_mpi(MPI_Info_create(&info), "MPI_Info_create");
  // One contiguous block at rank 0: the other ranks' (empty) parts need not follow it.
  MPI_Info_set(info, "alloc_shared_noncontig", "true");
  const int rc = MPI_Win_allocate_shared(static_cast<MPI_Aint>(owner ? bytes : 0), 1, info,
                                         host_comm, &base, &win_);
  MPI_Info_free(&info);
  check_mpi(rc, "MPI_Win_allocate_shared");
  MPI_Aint size = 0;
  int unit = 0;
  check_mpi(MPI_Win_shared_query(win_, 0, &size, &unit, &base), "MPI_Win_shared_query");
  if (static_cast<std::size_t>(size) < bytes) {
    throw std::runtime_error("host segment: " + std::to_string(size) + " bytes mapped, " +
                             std::to_string(bytes) + " asked");
  }
  base_ = static_cast<std::byte*>(base);
  bytes_ = bytes;
}

HostSegment::~HostSegment() {
  release();
}

HostSegment::HostSegment(HostSegment&& other) noexcept
    : win_(std::exchange(other.win_, MPI_WIN_NULL)),
      base_(std::exchange(other.base_, nullptr)),
      bytes_(std::exchange(other.bytes_, 0)) {}

HostSegment& HostSegment::operator=(HostSegment&& other) noexcept {
  if (this != &other) {
    release();
    win_ = std::exchange(other.win_, MPI_WIN_NULL);
    base_ = std::exchange(other.base_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

void HostSegment::release() noexcept {
  if (win_ != MPI_WIN_NULL) MPI_Win_free(&win_);
  win_ = MPI_WIN_NULL;
  base_ = nullptr;
  bytes_ = 0;
}

void HostBarrier::wait(std::chrono::milliseconds deadline, const char* what) {
  if (failed()) {
    throw std::runtime_error(std::string("netsparse-node: ") + what +
                             ": another rank of this host failed");
  }
  const std::uint32_t gen = generation_.load(std::memory_order_acquire);
  if (arrived_.fetch_add(1, std::memory_order_acq_rel) + 1 == ranks_) {
    arrived_.store(0, std::memory_order_relaxed);
    generation_.fetch_add(1, std::memory_order_acq_rel);
    return;
  }
  // Ranks oversubscribe the cores (several per core on small machines): spin briefly, then
  // yield, then sleep, so that a waiting rank does not starve the one it waits for.
  const auto start = std::chrono::steady_clock::now();
  for (std::uint64_t spins = 0; generation_.load(std::memory_order_acquire) == gen; ++spins) {
    if (failed()) {
      throw std::runtime_error(std::string("netsparse-node: ") + what +
                               ": another rank of this host failed");
    }
    if (spins < 64) continue;
    if (spins < 4096) {
      sched_yield();
      continue;
    }
    if (std::chrono::steady_clock::now() - start > deadline) {
      fail();
      throw std::runtime_error(std::string("netsparse-node: ") + what + ": a rank of this host " +
                               "did not arrive within " + std::to_string(deadline.count()) +
                               " ms (dead or stuck); the host's engine stops");
    }
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

}  // namespace netsparse::dist
