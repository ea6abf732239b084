// SimilarityBatcher: reuse-aware batch formation by min-hash signatures and greedy growth
// (docs/embedding.md, "Reuse-aware batching").
//
// An epoch is an order of all samples, served front to back in batches. At the epoch's start
// and every refresh_batches batches the part not yet served is re-ordered: only that suffix
// moves, so the served prefix and the suffix stay disjoint and together hold every sample once
// -- each epoch is a permutation whatever the refresh period. The re-ordering first sorts the
// remaining samples by min-hash signatures of their shared keys under fresh hash seeds: two
// samples agree on a min-hash with probability equal to the Jaccard similarity of their key
// sets, so equal signatures (an LSH bucket) hold samples sharing keys. Sorting alone groups
// little, though: a batch of 1024 samples spans hundreds of unrelated buckets (on the bench's
// samples it cut a batch's distinct ids by 2-4 %). So the batches until the next refresh are
// grown from that order, each taking next the sample that shares the most keys with it (11 %
// fewer distinct ids). Fresh seeds at each refresh start the batches from other samples.
#include <algorithm>
#include <bit>
#include <numeric>
#include <random>
#include <string>

#include "netsparse/embedding.hpp"
#include "support/hash.hpp"
#include "support/visibility.hpp"

namespace netsparse {

namespace {

// splitmix64: a good 64-bit mix, so min over mix64(key ^ seed) behaves as the minimum under a
// random permutation of the keys.
constexpr std::uint64_t mix64(std::uint64_t x) noexcept {
  return support::splitmix64(x);
}

[[noreturn]] void refuse(const std::string& what) {
  throw Error(NS_ERR_INVALID, "SimilarityBatcher: " + what);
}

}  // namespace

struct NETSPARSE_LOCAL SimilarityBatcher::Impl {
  std::vector<std::uint64_t> offsets, keys;
  SimilarityBatchingOptions options;
  std::vector<std::uint32_t> order;  // this epoch's order; [0, served) already returned
  std::size_t served = 0;
  bool started = false;
  std::uint64_t epoch = 0, refreshes = 0;
  std::uint32_t since_refresh = 0;

  // Per re-bucketing, over the n remaining samples (numbered i = 0..n-1 as order[served + i]):
  // every key's cell in an open-addressing table (linear probing, load <= 1/2) with the number
  // of remaining samples holding it and, for a shared key, where its samples are listed.
  struct KeyCell {
    std::uint64_t key;
    std::uint32_t count;   // 0: empty cell (a key twice in one sample counts twice)
    std::uint32_t first;   // a shared key's samples: members[first .. first + count); else none
    std::uint32_t filled;  // of them listed so far (index_keys)
    std::uint32_t stamp;   // 1 + the batch that last took this key in (grow_batches)
  };
  static constexpr std::uint32_t kNone = UINT32_MAX;
  std::vector<KeyCell> cells;
  std::uint64_t cell_salt = 0;
  int cell_shift = 64;
  std::vector<std::uint32_t> key_cell;  // per key occurrence of the remaining samples
  std::vector<std::uint32_t> members;   // samples (i) of each shared key
  std::vector<std::uint64_t> signatures;
  std::vector<std::uint32_t> by_signature, score;  // score: shared keys with the growing batch

  std::size_t samples() const { return offsets.size() - 1; }
  std::uint32_t sample(std::size_t i) const { return order[served + i]; }

  // The keys batching can save fetches of: a key of one sample is fetched once wherever it goes,
  // and a very frequent key is in most batches wherever they go. Keys in more than
  // max(16, batch_samples / 16) remaining samples are left out as well: they tie many candidates
  // (little signal) and they are what the growth costs (a key taken into a batch raises the
  // score of each of its samples). By measurement on bench_embedding's samples (np 2, alpha 1,
  // batches of 1024 samples): distinct ids per batch 9710 with this cap, 9797 with a cap of a
  // whole batch, 10926 for random batches.
  bool shared(const KeyCell& c) const {
    return c.count >= 2 && c.count <= std::max<std::size_t>(16, options.batch_samples / 16);
  }

  void index_keys(std::size_t n, std::uint64_t salt) {
    std::size_t total = 0;
    for (std::size_t i = 0; i < n; ++i) total += offsets[sample(i) + 1] - offsets[sample(i)];
    const std::size_t size = std::bit_ceil(std::max<std::size_t>(16, 2 * total));
    cells.assign(size, KeyCell{0, 0, kNone, 0, 0});
    cell_shift = 64 - std::countr_zero(size);
    cell_salt = salt;
    // The remaining samples' keys in a row, their home cells computed (and prefetched) 16 keys
    // ahead: the probes are independent random accesses into a table larger than the caches.
    key_cell.clear();
    for (std::size_t i = 0; i < n; ++i) {
      for (std::uint64_t j = offsets[sample(i)]; j < offsets[sample(i) + 1]; ++j)
        key_cell.push_back(static_cast<std::uint32_t>(j));  // the key's index for now
    }
    const auto home = [&](std::uint64_t key) {
      return static_cast<std::size_t>(mix64(key ^ cell_salt) >> cell_shift);
    };
    constexpr std::size_t kAhead = 16;
    for (std::size_t o = 0; o < key_cell.size(); ++o) {
      if (o + kAhead < key_cell.size())
        __builtin_prefetch(&cells[home(keys[key_cell[o + kAhead]])]);
      const std::uint64_t key = keys[key_cell[o]];
      std::size_t c = home(key);
      while (cells[c].count != 0 && cells[c].key != key) c = (c + 1) & (size - 1);
      cells[c].key = key;
      ++cells[c].count;
      key_cell[o] = static_cast<std::uint32_t>(c);
    }
    std::uint32_t at = 0;
    for (KeyCell& c : cells) {
      if (!shared(c)) continue;
      c.first = at;
      at += c.count;
    }
    members.resize(at);
    for (std::size_t i = 0, occurrence = 0; i < n; ++i) {
      for (std::uint64_t j = offsets[sample(i)]; j < offsets[sample(i) + 1]; ++j) {
        KeyCell& c = cells[key_cell[occurrence++]];
        if (c.first != kNone) members[c.first + c.filled++] = static_cast<std::uint32_t>(i);
      }
    }
  }

  // Min-hash signatures over each sample's shared keys (all its keys if it has none), and the
  // samples sorted by them: by_signature. Two samples agree on a min-hash with probability the
  // Jaccard similarity of their key sets, so an LSH bucket (equal first min-hash) holds samples
  // sharing that key, and those that also agree on the next min-hashes sit together inside it.
  void sort_by_signature(std::size_t n, const std::vector<std::uint64_t>& seeds) {
    const std::size_t h = seeds.size();
    signatures.assign(n * h, UINT64_MAX);  // a sample without keys sorts last
    for (std::size_t i = 0, occurrence = 0; i < n; ++i) {
      const std::size_t first = occurrence;
      std::uint64_t* sig = signatures.data() + i * h;
      bool any = false;
      for (int pass = 0; pass < 2 && !any; ++pass) {
        occurrence = first;
        for (std::uint64_t j = offsets[sample(i)]; j < offsets[sample(i) + 1]; ++j) {
          if (pass == 0 && cells[key_cell[occurrence++]].first == kNone) continue;
          any = true;
          for (std::size_t k = 0; k < h; ++k) sig[k] = std::min(sig[k], mix64(keys[j] ^ seeds[k]));
        }
      }
      occurrence = first + (offsets[sample(i) + 1] - offsets[sample(i)]);
    }
    by_signature.resize(n);
    std::iota(by_signature.begin(), by_signature.end(), 0u);
    std::sort(by_signature.begin(), by_signature.end(), [&](std::uint32_t a, std::uint32_t b) {
      const std::uint64_t* sa = signatures.data() + std::size_t{a} * h;
      const std::uint64_t* sb = signatures.data() + std::size_t{b} * h;
      for (std::size_t k = 0; k < h; ++k)
        if (sa[k] != sb[k]) return sa[k] < sb[k];
      return a < b;  // deterministic
    });
  }

  // Batches grown from the signature order: a batch starts at the first sample of the order not
  // yet taken and then takes, while it has room, the sample sharing the most keys already in
  // the batch (its shared keys' member lists give the candidates: a lazy max-heap of (score,
  // earlier in the signature order)); with no candidate left, the next in signature order. Only
  // the batches until the next refresh are grown; the rest keep the signature order (they are
  // re-bucketed before they are served).
  void grow_batches(std::size_t n) {
    const std::size_t b = options.batch_samples;
    const std::size_t grow =
        options.refresh_batches == 0 ? n : std::min(n, std::size_t{options.refresh_batches} * b);
    std::vector<std::uint32_t> rank_of(n), out;
    for (std::size_t r = 0; r < n; ++r) rank_of[by_signature[r]] = static_cast<std::uint32_t>(r);
    std::vector<std::uint8_t> taken(n, 0);
    std::vector<std::size_t> first_key(n + 1, 0);
    for (std::size_t i = 0; i < n; ++i)
      first_key[i + 1] = first_key[i] + (offsets[sample(i) + 1] - offsets[sample(i)]);
    score.assign(n, 0);
    out.reserve(n);
    std::vector<std::uint64_t> heap;  // (score << 32) | (kNone - signature rank): max first
    std::size_t next_seed = 0;
    for (std::uint32_t batch = 1; out.size() < grow; ++batch) {
      heap.clear();
      std::vector<std::uint32_t> touched;
      for (std::size_t k = 0; k < b && out.size() < n; ++k) {
        std::uint32_t pick = kNone;
        while (!heap.empty() && pick == kNone) {
          std::pop_heap(heap.begin(), heap.end());
          const std::uint64_t top = heap.back();
          heap.pop_back();
          const std::uint32_t i = by_signature[kNone - static_cast<std::uint32_t>(top)];
          if (!taken[i] && score[i] == top >> 32) pick = i;
        }
        if (pick == kNone) {
          while (taken[by_signature[next_seed]]) ++next_seed;
          pick = by_signature[next_seed];
        }
        taken[pick] = 1;
        out.push_back(pick);
        for (std::size_t o = first_key[pick]; o < first_key[pick + 1]; ++o) {
          KeyCell& c = cells[key_cell[o]];
          if (c.first == kNone || c.stamp == batch) continue;
          c.stamp = batch;
          for (std::uint32_t m = c.first; m < c.first + c.count; ++m) {
            const std::uint32_t i = members[m];
            if (taken[i]) continue;
            if (score[i] == 0) touched.push_back(i);
            heap.push_back(std::uint64_t{++score[i]} << 32 | (kNone - rank_of[i]));
            std::push_heap(heap.begin(), heap.end());
          }
        }
      }
      for (const std::uint32_t i : touched) score[i] = 0;  // scores are per batch
    }
    for (const std::uint32_t i : by_signature)
      if (!taken[i]) out.push_back(i);
    for (std::size_t r = 0; r < n; ++r) out[r] = sample(out[r]);
    std::copy(out.begin(), out.end(), order.begin() + static_cast<std::ptrdiff_t>(served));
  }

  // Re-orders order[served, end) under the seeds of this (epoch, refresh).
  void rebucket() {
    const std::uint64_t stamp = mix64(options.seed ^ mix64(epoch ^ mix64(refreshes)));
    ++refreshes;
    since_refresh = 0;
    const auto rest = order.begin() + static_cast<std::ptrdiff_t>(served);
    if (!options.similarity) {
      std::mt19937_64 rng(stamp);
      std::shuffle(rest, order.end(), rng);
      return;
    }
    const std::size_t n = order.size() - served, h = options.signature_hashes;
    std::vector<std::uint64_t> seeds(h);
    for (std::size_t k = 0; k < h; ++k) seeds[k] = mix64(stamp + k + 1);
    index_keys(n, seeds[0]);
    sort_by_signature(n, seeds);
    grow_batches(n);
  }
};

SimilarityBatcher::SimilarityBatcher(std::span<const std::uint64_t> sample_offsets,
                                     std::span<const std::uint64_t> keys,
                                     const SimilarityBatchingOptions& options)
    : impl_(std::make_unique<Impl>()) {
  if (options.batch_samples == 0) refuse("batch_samples must be at least 1");
  if (options.signature_hashes == 0 || options.signature_hashes > 16) {
    refuse("signature_hashes must be 1-16, not " + std::to_string(options.signature_hashes));
  }
  if (sample_offsets.size() < 2) refuse("sample_offsets: at least one sample is needed");
  if (sample_offsets.size() - 1 >= UINT32_MAX) refuse("sample_offsets: fewer than 2^32 samples");
  if (keys.size() >= (std::size_t{1} << 31)) refuse("keys: fewer than 2^31 keys");  // 32-bit cells
  if (sample_offsets.front() != 0 ||
      !std::is_sorted(sample_offsets.begin(), sample_offsets.end()) ||
      sample_offsets.back() != keys.size()) {
    refuse("sample_offsets must be non-decreasing from 0 to keys.size() (" +
           std::to_string(keys.size()) + ")");
  }
  impl_->offsets.assign(sample_offsets.begin(), sample_offsets.end());
  impl_->keys.assign(keys.begin(), keys.end());
  impl_->options = options;
}

SimilarityBatcher::~SimilarityBatcher() = default;
SimilarityBatcher::SimilarityBatcher(SimilarityBatcher&&) noexcept = default;
SimilarityBatcher& SimilarityBatcher::operator=(SimilarityBatcher&&) noexcept = default;

std::span<const std::uint32_t> SimilarityBatcher::next_batch() {
  Impl& m = *impl_;
  if (!m.started || m.served == m.order.size()) {
    if (m.started) ++m.epoch;
    m.started = true;
    m.order.resize(m.samples());
    std::iota(m.order.begin(), m.order.end(), 0u);
    m.served = 0;
    m.rebucket();
  } else if (m.options.refresh_batches != 0 && m.since_refresh == m.options.refresh_batches) {
    m.rebucket();
  }
  const std::size_t take = std::min(m.options.batch_samples, m.order.size() - m.served);
  const std::span<const std::uint32_t> batch(m.order.data() + m.served, take);
  m.served += take;
  ++m.since_refresh;
  return batch;
}

std::size_t SimilarityBatcher::samples() const noexcept {
  return impl_->samples();
}
std::uint64_t SimilarityBatcher::epoch() const noexcept {
  return impl_->epoch;
}
std::uint64_t SimilarityBatcher::refreshes() const noexcept {
  return impl_->refreshes;
}
std::uint64_t SimilarityBatcher::table_key(std::size_t table, std::uint64_t id) noexcept {
  return mix64(id ^ mix64(table));
}

}  // namespace netsparse
