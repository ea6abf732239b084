#include "rig/finalize_hook.hpp"

#include <mpi.h>

#include <atomic>
#include <mutex>
#include <utility>
#include <vector>

#include <stdexcept>
#include <string>

#include "agreement/mpi.hpp"

namespace netsparse::rig {

namespace {

struct Registry {
  std::mutex mu;
  std::vector<std::pair<std::uint64_t, std::function<void()>>> hooks;  // registration order
  std::uint64_t next_id = 1;
  bool armed = false;
};

Registry& registry() {
  static Registry* r = new Registry;  // never destroyed: hooks may outlive static destructors
  return *r;
}

std::atomic<bool> g_finalizing{false};

// MPI_COMM_SELF's attribute delete callback: MPI_Finalize runs it first, with MPI intact.
int on_finalize(MPI_Comm, int, void*, void*) {
  g_finalizing.store(true);
  Registry& r = registry();
  for (;;) {
    std::function<void()> teardown;
    {
      std::lock_guard<std::mutex> lk(r.mu);
      if (r.hooks.empty()) break;
      teardown = std::move(r.hooks.back().second);
      r.hooks.pop_back();
    }
    // Outside the lock: a teardown may destroy objects whose own hooks then unregister.
    try {
      teardown();
    } catch (...) {
    }
  }
  return MPI_SUCCESS;
}

using agreement::check_mpi;

void arm(Registry& r) {
  // Under r.mu. One attribute per process (MPI cannot be initialized twice).
  if (r.armed) return;
  int keyval = MPI_KEYVAL_INVALID;
  check_mpi(MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, &on_finalize, &keyval, nullptr),
            "MPI_Comm_create_keyval");
  check_mpi(MPI_Comm_set_attr(MPI_COMM_SELF, keyval, nullptr), "MPI_Comm_set_attr");
  r.armed = true;
}

}  // namespace

FinalizeHook::FinalizeHook(std::function<void()> teardown) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lk(r.mu);
  arm(r);
  id_ = r.next_id++;
  r.hooks.emplace_back(id_, std::move(teardown));
}

FinalizeHook::~FinalizeHook() {
  release();
}

FinalizeHook::FinalizeHook(FinalizeHook&& other) noexcept : id_(std::exchange(other.id_, 0)) {}

FinalizeHook& FinalizeHook::operator=(FinalizeHook&& other) noexcept {
  if (this != &other) {
    release();
    id_ = std::exchange(other.id_, 0);
  }
  return *this;
}

void FinalizeHook::release() noexcept {
  if (id_ == 0) return;
  Registry& r = registry();
  std::lock_guard<std::mutex> lk(r.mu);
  for (auto it = r.hooks.begin(); it != r.hooks.end(); ++it) {
    if (it->first == id_) {
      r.hooks.erase(it);
      break;
    }
  }
  id_ = 0;
}

bool mpi_finalizing() noexcept {
  if (g_finalizing.load()) return true;
  int finalized = 0;
  MPI_Finalized(&finalized);
  return finalized != 0;
}

int live_finalize_hooks() noexcept {
  Registry& r = registry();
  std::lock_guard<std::mutex> lk(r.mu);
  return static_cast<int>(r.hooks.size());
}

}  // namespace netsparse::rig
