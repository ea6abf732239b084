// The emulator's clock and agenda: a deterministic discrete-event queue in virtual time.
//
// Time is in picoseconds (`Picos`): a byte at 400 Gbps takes exactly 20 ps, so serialisation
// times are exact integers at the paper's line rate, and 2^64 ps is 213 days of virtual time.
// Events run in (time, sequence) order, the sequence being the order in which they were
// scheduled: two events at the same time always run in the same order, whatever the host, its
// load or the heap's internal layout. Nothing here reads a wall clock.
//
// Single-threaded. Actions are std::function; captures of up to 16 bytes (e.g. `this` and an
// id) are stored without allocation by libstdc++.
#pragma once

#include <cstdint>
#include <functional>
#include <stdexcept>
#include <vector>

namespace netsparse::emulate {

using Picos = std::uint64_t;
inline constexpr Picos kPicosPerNano = 1000;
inline constexpr Picos kNever = UINT64_MAX;

class EventQueue {
 public:
  using Action = std::function<void()>;

  Picos now() const noexcept { return now_; }
  // Schedules `action` at `time` (>= now(); std::invalid_argument otherwise: virtual time never
  // goes back).
  void at(Picos time, Action action);
  void after(Picos delay, Action action) { at(now_ + delay, std::move(action)); }

  // Runs the earliest event; false when there is none.
  bool run_one();
  // Runs every event with time <= `until`, then sets now() to `until` (if it is later).
  void run_until(Picos until);
  // Runs until no event is left or `max_events` ran; returns the events run.
  std::uint64_t run(std::uint64_t max_events = UINT64_MAX);

  bool empty() const noexcept { return heap_.empty(); }
  std::size_t pending() const noexcept { return heap_.size(); }
  Picos next_time() const noexcept { return heap_.empty() ? kNever : heap_.front().time; }
  std::uint64_t events_run() const noexcept { return events_run_; }

 private:
  struct Entry {
    Picos time;
    std::uint64_t seq;
    std::uint32_t slot;  // index into actions_
  };
  // Heap order: the earliest (time, seq) at the front.
  static bool later(const Entry& a, const Entry& b) noexcept {
    return a.time != b.time ? a.time > b.time : a.seq > b.seq;
  }

  Picos now_ = 0;
  std::uint64_t next_seq_ = 0;
  std::uint64_t events_run_ = 0;
  std::vector<Entry> heap_;
  std::vector<Action> actions_;            // by slot; reused
  std::vector<std::uint32_t> free_slots_;  // slots whose action has run
};

}  // namespace netsparse::emulate
