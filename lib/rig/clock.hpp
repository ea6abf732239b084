// The engine's clock: steady, in nanoseconds (expiration times, watchdog deadlines).
//
// A thread may replace it with a clock of its own (ScopedClockOverride): the cluster emulator
// (lib/emulate) steps many engines from one thread in *virtual* time, so concatenation delays
// and watchdogs follow the emulated fabric, not the host. The override is per thread, so an
// engine's progress thread or another test in the process never sees it; without one, now_ns()
// is steady_clock plus one thread-local load and a predictable branch (a few calls per engine
// step, none per PR). The override is internal: it reaches the engine only in programs that
// link the component archives (the emulator); libnetsparse.so hides its own copy.
#pragma once

#include <chrono>
#include <cstdint>

namespace netsparse::rig {

struct ClockOverride {
  std::uint64_t (*now)(const void* context) = nullptr;  // nullptr: steady_clock
  const void* context = nullptr;
};

inline thread_local ClockOverride tls_clock_override{};

inline std::uint64_t now_ns() noexcept {
  if (tls_clock_override.now != nullptr) [[unlikely]] {
    return tls_clock_override.now(tls_clock_override.context);
  }
  return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                        std::chrono::steady_clock::now().time_since_epoch())
                                        .count());
}

// Installs `now` as this thread's clock for the object's lifetime (restores the previous one).
class ScopedClockOverride {
 public:
  ScopedClockOverride(std::uint64_t (*now)(const void*), const void* context) noexcept
      : previous_(tls_clock_override) {
    tls_clock_override = ClockOverride{now, context};
  }
  ~ScopedClockOverride() { tls_clock_override = previous_; }
  ScopedClockOverride(const ScopedClockOverride&) = delete;
  ScopedClockOverride& operator=(const ScopedClockOverride&) = delete;

 private:
  ClockOverride previous_;
};

}  // namespace netsparse::rig
