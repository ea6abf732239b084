// Idx Filter and Pending PR Table operation rates.
#include <benchmark/benchmark.h>

#include <random>
#include <vector>

#include "filter/model/idx_filter.hpp"
#include "filter/model/pending_table.hpp"

namespace {
using netsparse::filter::IdxFilter;
using netsparse::filter::PendingInsert;
using netsparse::filter::PendingTable;

std::vector<std::uint64_t> random_idxs(std::size_t n, std::uint64_t range, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<std::uint64_t> v(n);
  for (auto& x : v) x = rng() % range;
  return v;
}

constexpr std::uint64_t kWindow = 1 << 22;  // 4 M columns: 1 MB of filter words
IdxFilter& shared_filter() {
  static IdxFilter filter(kWindow);
  return filter;
}

// First sets: a fresh epoch before every batch of 64 Ki random idxs, so most calls claim a
// stale word or set a clear bit (the epoch switch itself is outside the timed region).
void BM_FilterTestAndSetFresh(benchmark::State& state) {
  IdxFilter f(kWindow);
  const auto idxs = random_idxs(1 << 16, kWindow, 3);
  std::uint64_t hits = 0;
  for (auto _ : state) {
    state.PauseTiming();
    f.new_epoch();
    state.ResumeTiming();
    for (std::uint64_t i : idxs) hits += f.test_and_set(i);
  }
  benchmark::DoNotOptimize(hits);
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * idxs.size()));
}
BENCHMARK(BM_FilterTestAndSetFresh);

// All threads share one filter, as the client units of a process do; each thread walks its
// own random idx stream. After the first pass nearly every call finds its bit set (the
// filtering case: a load, no write).
void BM_FilterTestAndSetShared(benchmark::State& state) {
  IdxFilter& f = shared_filter();
  if (state.thread_index() == 0) f.new_epoch();
  const auto idxs = random_idxs(1 << 16, kWindow, 1 + state.thread_index());
  std::uint64_t hits = 0;
  for (auto _ : state) {
    for (std::uint64_t i : idxs) hits += f.test_and_set(i);
  }
  benchmark::DoNotOptimize(hits);
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * idxs.size()));
}
BENCHMARK(BM_FilterTestAndSetShared)->Threads(1)->Threads(2)->UseRealTime();

void BM_FilterTest(benchmark::State& state) {
  IdxFilter f(kWindow);
  for (std::uint64_t i = 0; i < kWindow; i += 3) f.set(i);
  const auto idxs = random_idxs(1 << 16, kWindow, 9);
  std::uint64_t hits = 0;
  for (auto _ : state) {
    for (std::uint64_t i : idxs) hits += f.test(i);
  }
  benchmark::DoNotOptimize(hits);
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * idxs.size()));
}
BENCHMARK(BM_FilterTest);

void BM_FilterNewEpoch(benchmark::State& state) {
  IdxFilter f(kWindow);
  for (auto _ : state) f.new_epoch();
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
}
BENCHMARK(BM_FilterNewEpoch);

// Steady state of one client unit: idxs stream in (some repeat while pending: coalesced); when
// the table is full the oldest entry completes, as its response would.
void BM_PendingInsertComplete(benchmark::State& state) {
  const auto capacity = static_cast<std::uint32_t>(state.range(0));
  PendingTable table(capacity);
  const auto idxs = random_idxs(1 << 16, 4ull * capacity, 5);
  std::vector<std::uint32_t> fifo(capacity);
  std::uint32_t head = 0, tail = 0;
  std::uint64_t woken = 0, coalesced = 0, ops = 0;
  for (auto _ : state) {
    for (std::uint64_t idx : idxs) {
      auto r = table.insert(idx, idx);
      while (r.kind == PendingInsert::kFull) {
        table.complete(fifo[head], [&](std::uint64_t) { ++woken; });
        head = (head + 1) % capacity;
        ++ops;
        r = table.insert(idx, idx);
      }
      if (r.kind == PendingInsert::kNew) {
        fifo[tail] = r.entry;
        tail = (tail + 1) % capacity;
      } else {
        ++coalesced;
      }
      ++ops;
    }
  }
  benchmark::DoNotOptimize(woken);
  state.SetItemsProcessed(static_cast<std::int64_t>(ops));
  state.counters["coalesced"] =
      static_cast<double>(coalesced) / static_cast<double>(state.iterations() * idxs.size());
}
BENCHMARK(BM_PendingInsertComplete)->Arg(256)->Arg(4096);

}  // namespace
