// Packing a list of this node's rows into answer packets (a header, then the rows back to back),
// for the two answers that carry rows in bulk: a plan replay (plan_unit) and a compact read
// (server_unit). Where the transport lends its memory to the requester (the shared-memory rings),
// rows are packed only into that memory and packing stops when it is full: the caller keeps
// where it stopped and continues at a later engine step, once the requester has drained some.
// An answer larger than the ring then costs one copy per row, not a copy into the outbox's queue
// and a second one into the ring (docs/architecture.md, "A replay's answer waits for ring room").
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

#include "rig/copy.hpp"
#include "rig/outbox.hpp"
#include "rig/region.hpp"

namespace netsparse::rig {

struct PackTally {
  std::uint64_t packets = 0, bytes = 0, rows = 0;
  std::uint64_t rows_queued = 0;  // of `rows`, packed into the outbox's queue, not lent memory
};

// Copies rows [first, first + n) of the list into body, back to back. kP > 0: the property size
// known at compile time (the loop's copies become plain moves; a call through copy_prop's size
// tests per row cost more than the copy itself at 4-16 B). Rows of several cache lines are
// prefetched a few rows ahead: they are read at random, and the core issues one row's lines
// only after the previous row's copy.
template <std::uint32_t kP, class RowAt>
inline void copy_rows(std::byte* __restrict body, const std::byte* __restrict base, std::uint32_t p,
                      std::size_t first, std::size_t n, RowAt& row_at) noexcept {
  const std::uint32_t P = kP > 0 ? kP : p;
  constexpr std::size_t kPrefetch = 8;
  if (P >= 128) {
    for (std::size_t k = 0; k < n; ++k) {
      if (k + kPrefetch < n) {
        const std::byte* ahead = base + row_at(first + k + kPrefetch) * P;
        for (std::uint32_t l = 0; l < P; l += 64) __builtin_prefetch(ahead + l);
      }
      std::memcpy(body + k * P, base + row_at(first + k) * P, P);
    }
  } else {
    for (std::size_t k = 0; k < n; ++k) std::memcpy(body + k * P, base + row_at(first + k) * P, P);
  }
}

// Packs rows [next, count) of an answer to dest, as many per packet as one frame holds:
// row_at(k) is the k-th row (owner-local; the caller checked every one against the region),
// encode(at, first, n) writes the header of the packet holding rows [first, first + n) at `at`.
// Returns true when every row is packed, false when the transport has no room now; `next`
// advances past what was packed either way. `after`: bytes of the answers to dest packed right
// after this one (a new frame is asked to hold them too).
template <class RowAt, class Encode>
bool pack_rows(Outbox& out, std::uint32_t dest, const Region& r, std::size_t header_bytes,
               std::size_t count, std::size_t& next, RowAt&& row_at, Encode&& encode,
               PackTally& tally, std::size_t after = 0) {
  const std::uint32_t P = r.prop_bytes;
  const std::size_t per_packet =
      std::max<std::size_t>(1, (out.frame_capacity() - header_bytes) / P);
  while (next < count) {
    const std::size_t first = next;
    const std::size_t n = std::min(per_packet, count - first);
    const std::size_t bytes = header_bytes + n * P;
    // The rest of the answer, headers included, and the answers after it: a new frame is asked
    // to hold all of it.
    const std::size_t rest = (count - first) * P +
                             ((count - first + per_packet - 1) / per_packet) * header_bytes + after;
    std::byte* at = out.packet_room_or_later(dest, bytes, rest);
    if (at == nullptr) return false;
    encode(at, first, n);
    std::byte* body = at + header_bytes;
    with_prop_size(P,
                   [&]<std::uint32_t kP>() { copy_rows<kP>(body, r.base, P, first, n, row_at); });
    out.commit_packet(dest, bytes);
    ++tally.packets;
    tally.bytes += bytes;
    tally.rows += n;
    if (!out.last_room_lent()) tally.rows_queued += n;
    next += n;
  }
  return true;
}

// The answers a unit is still packing, in arrival order (a Job has a `dest`). At most one answer
// per peer is packed at a time, oldest first: a later one to the same peer waits behind it, so a
// peer's answers reach it in the order it asked and no two interleave in its ring.
template <class Job>
class AnswerQueue {
 public:
  [[nodiscard]] bool empty() const noexcept { return jobs_.empty(); }
  // Whether an answer to dest is waiting: a new one to dest must queue behind it.
  [[nodiscard]] bool waiting_for(std::uint32_t dest) const noexcept {
    return std::any_of(jobs_.begin(), jobs_.end(), [&](const Job& j) { return j.dest == dest; });
  }
  void push(Job job) { jobs_.push_back(std::move(job)); }
  // pack(job) packs what room allows and returns true when the job is done (it leaves the queue).
  template <class Pack>
  void pack_more(Pack&& pack) {
    std::size_t keep = 0;
    for (std::size_t k = 0; k < jobs_.size(); ++k) {
      bool blocked = false;
      for (std::size_t j = 0; j < keep && !blocked; ++j) blocked = jobs_[j].dest == jobs_[k].dest;
      if (blocked || !pack(jobs_[k])) {
        if (keep != k) jobs_[keep] = std::move(jobs_[k]);
        ++keep;
      }
    }
    jobs_.resize(keep);
  }
  // Hands every waiting job to f and empties the queue (the region went: each is refused).
  template <class F>
  void drop_all(F&& f) {
    for (Job& j : jobs_) f(j);
    jobs_.clear();
  }
  void clear() noexcept { jobs_.clear(); }  // the engine failed: nothing more leaves

 private:
  std::vector<Job> jobs_;
};

}  // namespace netsparse::rig
