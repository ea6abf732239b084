// The read unit: NS_WR_RDMA_READ, a plain one-sided read of one property, beside the RIG path
// (the paper's "vanilla" baseline, sa-vanilla). Each read lands in a unit-owned bounce slot (the
// transport's cookie is the slot) and is copied to the caller's buffer on completion, so a read
// the watchdog gave up on can still land safely: its slot is abandoned, the late data discarded,
// and the slot reused only once the transport has finished with it. Talks to the engine through
// the same narrow port as the client and server units.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "rig/port.hpp"
#include "rig/queues.hpp"
#include "transport/transport.hpp"

namespace netsparse::rig {

class ReadUnit {
 public:
  ReadUnit(const UnitPort& port, transport::Transport& tx);
  // Starts (or completes at once: local row, bad idx, dead owner, deadline passed) one read;
  // false = no resource now, retry on a later step (in order).
  bool start(Command& c, std::uint64_t now);
  // Completes the reads the transport finished; returns how many it returned.
  std::size_t poll();
  // Completes reads past their deadline with NS_WC_WATCHDOG_TIMEOUT (slots stay abandoned).
  void watchdog(std::uint64_t now);
  // Completes every read in flight with `status` (the engine failed).
  void fail_all(int status);
  bool busy() const noexcept { return outstanding_ != 0; }
  std::uint64_t reads() const noexcept { return reads_; }
  void reset_stats() noexcept { reads_ = 0; }

 private:
  static constexpr std::size_t kMaxSlots = 65536;  // reads in flight
  struct Slot {
    Command* cmd = nullptr;  // nullptr: free, or abandoned while `busy`
    bool busy = false;       // the transport may still write into it
    std::vector<std::byte> bounce;
  };
  void finish(Command& c, int status);

  const UnitPort& port_;
  transport::Transport& tx_;
  std::vector<Slot> slots_;
  std::vector<std::uint32_t> free_;
  std::vector<transport::ReadCompletion> completions_;
  std::uint64_t reads_ = 0;
  std::uint64_t outstanding_ = 0;  // slots the transport still holds
};

}  // namespace netsparse::rig
