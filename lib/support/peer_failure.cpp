// The record of a peer failure and ns_peer_failed (netsparse.h).
#include "support/peer_failure.hpp"

#include "netsparse/netsparse.h"

#include <atomic>
#include <mutex>

namespace netsparse::support {
namespace {

std::atomic<bool> g_recorded{false};
std::atomic<std::uint64_t> g_count{0};
std::mutex g_what_mu;
std::string g_what;  // guarded by g_what_mu

}  // namespace

void record_peer_failure(const char* what) noexcept {
  g_count.fetch_add(1, std::memory_order_acq_rel);
  if (g_recorded.load(std::memory_order_acquire)) return;
  try {
    std::lock_guard<std::mutex> lk(g_what_mu);
    if (g_what.empty()) g_what = what != nullptr ? what : "a peer failed";
  } catch (...) {  // the flag below is what matters; the text is a courtesy
  }
  g_recorded.store(true, std::memory_order_release);
}

bool peer_failure_recorded() noexcept {
  return g_recorded.load(std::memory_order_acquire);
}

std::uint64_t peer_failure_count() noexcept {
  return g_count.load(std::memory_order_acquire);
}

std::string peer_failure_what() {
  std::lock_guard<std::mutex> lk(g_what_mu);
  return g_what;
}

}  // namespace netsparse::support

extern "C" int ns_peer_failed(void) {
  return netsparse::support::peer_failure_recorded() ? 1 : 0;
}
