// The read completions a transport holds until poll_reads hands them out, oldest first: a fixed
// ring sized to the transport's bound on reads in flight, so a read admitted only while there is
// room can always push its completion.
#pragma once

#include <cstddef>
#include <vector>

#include "transport/transport.hpp"

namespace netsparse::transport {

class CompletionRing {
 public:
  explicit CompletionRing(std::size_t capacity = 0) : ring_(capacity) {}
  void resize(std::size_t capacity) { ring_.assign(capacity, ReadCompletion{}); }

  std::size_t size() const noexcept { return used_; }
  bool full() const noexcept { return used_ == ring_.size(); }
  // Precondition: !full().
  void push(ReadCompletion c) noexcept {
    ring_[(head_ + used_) % ring_.size()] = c;
    ++used_;
  }
  // Moves up to max completions to out; returns how many.
  int pop(ReadCompletion* out, int max) noexcept {
    int n = 0;
    while (n < max && used_ > 0) {
      out[n++] = ring_[head_];
      head_ = (head_ + 1) % ring_.size();
      --used_;
    }
    return n;
  }

 private:
  std::vector<ReadCompletion> ring_;
  std::size_t head_ = 0;
  std::size_t used_ = 0;
};

}  // namespace netsparse::transport
