// Idle back-off for polling loops (the progress thread, ns_cq_wait, ns_quiesce): spin briefly
// (a response is often microseconds away), then yield (another rank's thread on the same core
// gets to run: two ranks on a two-core machine must not starve each other), then sleep with a
// growing but short timeout so an idle engine costs almost no CPU and still reacts quickly.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <thread>

namespace netsparse::support {

inline void cpu_relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#endif
}

class Backoff {
 public:
  enum class Action { kSpin, kYield, kSleep };
  static constexpr std::chrono::microseconds kFirstSleep{5};

  // The progress thread spins longest (a response is often microseconds away); an application
  // thread waiting for completions spins less, since every cycle it burns is taken from the
  // progress threads when cores are scarce.
  explicit Backoff(int spins = 64, int yields = 64) noexcept : spins_(spins), yields_(yields) {}

  void reset() noexcept { idle_ = 0; }
  // What the next idle iteration should do; sleep_for() says how long for kSleep.
  Action next() noexcept {
    ++idle_;
    if (idle_ <= spins_) return Action::kSpin;
    if (idle_ <= spins_ + yields_) return Action::kYield;
    return Action::kSleep;
  }
  // Doubles from kFirstSleep up to cap.
  std::chrono::microseconds sleep_for(std::chrono::microseconds cap) const noexcept {
    const int doublings = std::min(idle_ - spins_ - yields_ - 1, 20);
    const auto d = kFirstSleep * (std::int64_t{1} << std::max(doublings, 0));
    return std::min(d, cap);
  }
  // Runs the spin/yield actions itself; returns true when the caller should sleep.
  bool pause() noexcept {
    switch (next()) {
      case Action::kSpin:
        for (int i = 0; i < 16; ++i) cpu_relax();
        return false;
      case Action::kYield:
        std::this_thread::yield();
        return false;
      case Action::kSleep:
        return true;
    }
    return true;
  }

 private:
  int spins_;
  int yields_;
  int idle_ = 0;
};

}  // namespace netsparse::support
