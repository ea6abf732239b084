#include "filter/model/idx_filter.hpp"

#include <bit>
#include <cstdio>
#include <cstdlib>

namespace netsparse::filter {

namespace {
constexpr std::uint64_t tag_of(std::uint64_t word) {
  return word >> 32;
}
constexpr std::uint64_t with_tag(std::uint32_t epoch) {
  return std::uint64_t{epoch} << 32;
}
}  // namespace

IdxFilter::IdxFilter(std::uint64_t n_bits) {
  resize(n_bits);
}

void IdxFilter::out_of_range(std::uint64_t i, std::uint64_t n) noexcept {
  std::fprintf(stderr, "netsparse IdxFilter: idx %llu outside the window [0, %llu)\n",
               static_cast<unsigned long long>(i), static_cast<unsigned long long>(n));
  std::abort();
}

void IdxFilter::clear_words() noexcept {
  for (std::uint64_t w = 0; w < capacity_words_; ++w) {
    words_[w].store(0, std::memory_order_relaxed);
  }
}

void IdxFilter::resize(std::uint64_t n_bits) {
  const std::uint64_t words = (n_bits + kBitsPerWord - 1) / kBitsPerWord;
  n_bits_ = n_bits;
  if (words <= capacity_words_) {
    new_epoch();  // a smaller window reuses the storage: stale tags read as clear
    return;
  }
  // Value-initialized: every word is 0, i.e. tag 0, which no live epoch uses.
  words_ = std::make_unique<std::atomic<std::uint64_t>[]>(words);
  capacity_words_ = words;
  epoch_.store(1, std::memory_order_relaxed);
}

bool IdxFilter::test(std::uint64_t i) const noexcept {
  if (i >= n_bits_) out_of_range(i, n_bits_);
  const std::uint64_t word = words_[i / kBitsPerWord].load(std::memory_order_acquire);
  return tag_of(word) == epoch_.load(std::memory_order_relaxed) &&
         (word >> (i % kBitsPerWord)) & 1u;
}

bool IdxFilter::test_and_set(std::uint64_t i) noexcept {
  if (i >= n_bits_) out_of_range(i, n_bits_);
  std::atomic<std::uint64_t>& slot = words_[i / kBitsPerWord];
  const std::uint32_t epoch = epoch_.load(std::memory_order_relaxed);
  const std::uint64_t bit = std::uint64_t{1} << (i % kBitsPerWord);
  std::uint64_t word = slot.load(std::memory_order_acquire);
  while (tag_of(word) != epoch) {
    // Stale word: it reads as all-zero. Claim it for this epoch with only our bit set; if
    // another thread claimed it first the CAS fails, `word` is reloaded and carries our tag.
    if (slot.compare_exchange_weak(word, with_tag(epoch) | bit, std::memory_order_acq_rel,
                                   std::memory_order_acquire)) {
      return false;
    }
  }
  if (word & bit) return true;  // already set: no write, no cache-line ping-pong
  // The tag cannot change within an epoch, so a plain fetch_or on the filter bits is safe.
  return (slot.fetch_or(bit, std::memory_order_acq_rel) & bit) != 0;
}

void IdxFilter::new_epoch() noexcept {
  advance_epochs(1);
}

void IdxFilter::advance_epochs(std::uint64_t n) noexcept {
  const std::uint64_t next = std::uint64_t{epoch_.load(std::memory_order_relaxed)} + n;
  if (next > 0xFFFFFFFFull) {
    // Tag wrap: words written 2^32 - 1 epochs ago would look current again. Clear for real;
    // every word is then tag 0, stale for any epoch >= 1.
    clear_words();
    epoch_.store(1, std::memory_order_relaxed);
    return;
  }
  epoch_.store(static_cast<std::uint32_t>(next), std::memory_order_relaxed);
}

std::uint64_t IdxFilter::count() const noexcept {
  const std::uint32_t epoch = epoch_.load(std::memory_order_relaxed);
  const std::uint64_t words = (n_bits_ + kBitsPerWord - 1) / kBitsPerWord;
  std::uint64_t total = 0;
  for (std::uint64_t w = 0; w < words; ++w) {
    const std::uint64_t word = words_[w].load(std::memory_order_acquire);
    if (tag_of(word) == epoch) total += std::popcount(word & 0xFFFFFFFFull);
  }
  return total;
}

}  // namespace netsparse::filter
