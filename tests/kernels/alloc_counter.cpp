// Replaces the global operator new/delete to count allocations, so a test can check that the
// kernels allocate nothing. In its own file: when the replacements are inlined next to a
// `new`, GCC 12 warns (-Wmismatched-new-delete) about the malloc/free pairing.
#include <atomic>
#include <cstdlib>
#include <new>

namespace {
std::atomic<long> g_allocations{0};
}

namespace netsparse::test {
long allocation_count() noexcept {
  return g_allocations.load(std::memory_order_relaxed);
}
}  // namespace netsparse::test

void* operator new(std::size_t n) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept {
  std::free(p);
}
void operator delete(void* p, std::size_t) noexcept {
  std::free(p);
}
