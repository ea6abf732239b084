// A bounded single-producer single-consumer ring: the host -> engine command ring of a queue
// pair, the engine -> host free-slot ring and the completion queue.
//
// One side writes, the other reads; each side may be driven by different threads over time as
// long as calls on one side are serialized (a mutex hand-off gives the needed happens-before).
// The producer publishes with a release store of `tail_`, the consumer with a release store of
// `head_`; each side caches the other's index to touch the shared cache line only when the
// cached value says full/empty. Batched publication (`write` + `publish`) lets a chain of work
// requests become visible with one doorbell.
#pragma once

#include <atomic>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <new>
#include <vector>

#include "support/raw_vector.hpp"

namespace netsparse::rig {

template <class T>
class SpscRing {
 public:
  explicit SpscRing(std::size_t capacity)
      : buf_(std::bit_ceil(capacity < 1 ? std::size_t{1} : capacity)),
        mask_(buf_.size() - 1),
        capacity_(capacity < 1 ? 1 : capacity) {}
  SpscRing(const SpscRing&) = delete;
  SpscRing& operator=(const SpscRing&) = delete;

  std::size_t capacity() const noexcept { return capacity_; }

  // ---- producer side ----
  // Slots the producer may fill before publishing.
  std::size_t free_space() noexcept {
    const std::uint64_t tail = tail_.load(std::memory_order_relaxed);
    if (tail - cached_head_ >= capacity_) cached_head_ = head_.load(std::memory_order_acquire);
    return capacity_ - static_cast<std::size_t>(tail - cached_head_);
  }
  // Writes the element `offset` places after the last published one (offset < free_space()).
  void write(std::size_t offset, const T& value) noexcept {
    buf_[(tail_.load(std::memory_order_relaxed) + offset) & mask_] = value;
  }
  // Makes the first n written elements visible to the consumer (the doorbell).
  void publish(std::size_t n) noexcept {
    tail_.store(tail_.load(std::memory_order_relaxed) + n, std::memory_order_release);
  }
  bool push(const T& value) noexcept {
    if (free_space() == 0) return false;
    write(0, value);
    publish(1);
    return true;
  }

  // ---- consumer side ----
  // The oldest element, or nullptr when empty; stays valid until pop().
  T* peek() noexcept {
    const std::uint64_t head = head_.load(std::memory_order_relaxed);
    if (head == cached_tail_) {
      cached_tail_ = tail_.load(std::memory_order_acquire);
      if (head == cached_tail_) return nullptr;
    }
    return &buf_[head & mask_];
  }
  void pop() noexcept {
    head_.store(head_.load(std::memory_order_relaxed) + 1, std::memory_order_release);
  }
  bool pop(T& out) noexcept {
    T* p = peek();
    if (p == nullptr) return false;
    out = *p;
    pop();
    return true;
  }
  // Approximate (exact when called by either side with the other idle).
  std::size_t size() const noexcept {
    return static_cast<std::size_t>(tail_.load(std::memory_order_acquire) -
                                    head_.load(std::memory_order_acquire));
  }
  bool empty() const noexcept { return size() == 0; }

 private:
  static constexpr std::size_t kLine = 64;
  // Not zero-filled: an element is read only after the producer wrote and published it, and a
  // completion queue of 8192 entries zeroed at every engine open was page faults for nothing.
  support::RawVector<T> buf_;
  std::size_t mask_;
  std::size_t capacity_;
  alignas(kLine) std::atomic<std::uint64_t> head_{0};  // next to read (consumer writes)
  std::uint64_t cached_tail_ = 0;                      // consumer's copy of tail_
  alignas(kLine) std::atomic<std::uint64_t> tail_{0};  // next to write (producer writes)
  std::uint64_t cached_head_ = 0;                      // producer's copy of head_
};

}  // namespace netsparse::rig
