// The in-switch Property Cache of a ToR switch (MICRO '25 §6.2). Responses passing through the
// switch fill it; a read PR that finds its property here is answered by the switch (a response
// sent back to the requester) instead of travelling on to the owner.
//
// Geometry (every size configurable; the paper's defaults in PropertyCacheConfig):
//   capacity / (ways * line bytes) sets, each of `ways` lines (16-way, LRU);
//   a line is `segments_per_line` segments of `segment_bytes` (32 x 16 B = 512 B).
// Segmented access: the control plane sets a Mode before each kernel, the number of adjacent
// segments one access enables (16 B .. 512 B). A line then holds floor(32 / mode) entries, so
// the capacity is used whatever the property size: small properties do not waste a 512 B line
// each. We model the line's entry slots as extra index bits: an entry lives in *virtual set*
//   v = key mod (sets * entries_per_line),   line-slot v mod entries_per_line of set v / epl,
// and each virtual set is an independent `ways`-way LRU set (the 16 ways of its set, each way's
// same slot). A property larger than one line is split into chunks of at most one line
// (512 B), chunk c of idx i is stored under key i * chunks + c; a read hits only when every
// chunk of its property is present (a partial property cannot answer a PR).
//
// Correctness: an entry remembers the owner whose response filled it and is returned only to a
// read addressed to that owner; configure() and invalidate() (the per-kernel control-plane
// call) drop every entry in O(1) by a generation number. The cache never returns bytes other
// than the last ones the owner sent for that idx.
//
// Single-threaded (one cache per switch pipeline). No allocation except in configure() when
// the number of entries changes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace netsparse::sw {

struct PropertyCacheConfig {
  std::uint64_t capacity_bytes = std::uint64_t{32} << 20;  // 32 MB per switch
  std::uint32_t ways = 16;                                 // associativity (<= 255)
  std::uint32_t segment_bytes = 16;
  std::uint32_t segments_per_line = 32;  // line = 512 B = the largest Mode
};

struct PropertyCacheStats {
  std::uint64_t lookups = 0;    // read PRs looked up
  std::uint64_t hits = 0;       // answered by the cache (every chunk present)
  std::uint64_t fills = 0;      // responses stored (all their chunks)
  std::uint64_t evictions = 0;  // valid entries (chunks) replaced to make room
  std::uint64_t refreshes = 0;  // chunks already present, overwritten by a passing response
  double hit_rate() const noexcept {
    return lookups == 0 ? 0.0 : static_cast<double>(hits) / static_cast<double>(lookups);
  }
};

class PropertyCache {
 public:
  // std::invalid_argument when a size is zero, ways > 255, or the capacity holds less than one
  // set. The cache starts unconfigured: every lookup misses and fills are ignored.
  explicit PropertyCache(const PropertyCacheConfig& config = {});

  // Control plane, before each kernel: properties of prop_bytes (>= 1) from now on. Drops every
  // entry and resets the statistics. Sets the Mode (segments per access) and the chunking.
  void configure(std::uint32_t prop_bytes);
  // Control plane: drops every entry (O(1)); the configuration stays.
  void invalidate() noexcept;

  bool configured() const noexcept { return prop_bytes_ != 0; }
  std::uint32_t prop_bytes() const noexcept { return prop_bytes_; }
  // Segments one access enables (1 .. segments_per_line) and its bytes (the Mode).
  std::uint32_t mode_segments() const noexcept { return mode_segments_; }
  std::uint32_t mode_bytes() const noexcept { return mode_segments_ * config_.segment_bytes; }
  // Chunks one property is stored as (1 unless prop_bytes > line bytes).
  std::uint32_t chunks_per_property() const noexcept { return chunks_; }
  std::uint32_t entries_per_line() const noexcept { return entries_per_line_; }
  std::uint64_t sets() const noexcept { return sets_; }
  std::uint64_t virtual_sets() const noexcept { return virtual_sets_; }
  // Entries (chunks) the cache holds at most under the current Mode.
  std::uint64_t entry_capacity() const noexcept { return virtual_sets_ * config_.ways; }
  const PropertyCacheConfig& config() const noexcept { return config_; }

  // A response from `owner` for `idx` passes: stores its prop_bytes bytes (every chunk),
  // evicting the least recently used entry of each chunk's set when the set is full.
  void fill(std::uint32_t owner, std::uint64_t idx, const std::byte* property);
  // A read PR for `idx` addressed to `owner` passes: true, with the prop_bytes bytes copied to
  // `out`, when every chunk is present and was filled by that owner; every chunk then becomes
  // its set's most recently used. false: a miss; `out` and the LRU order are untouched.
  bool lookup(std::uint32_t owner, std::uint64_t idx, std::byte* out);
  // True when every chunk of idx from owner is present; changes nothing (no LRU update, no
  // statistics).
  bool contains(std::uint32_t owner, std::uint64_t idx) const noexcept;

  const PropertyCacheStats& stats() const noexcept { return stats_; }
  void reset_stats() noexcept { stats_ = PropertyCacheStats{}; }
  // Bytes of data array and metadata currently allocated.
  std::size_t memory_bytes() const noexcept;

 private:
  struct Way {
    std::uint64_t key = 0;         // idx * chunks + chunk
    std::uint32_t owner = 0;       // node whose response filled it
    std::uint32_t generation = 0;  // valid iff == generation_
  };
  static constexpr std::uint32_t kNoWay = 0xFFFFFFFFu;

  std::uint64_t vset_of(std::uint64_t key) const noexcept { return key % virtual_sets_; }
  // Way index of key in its virtual set (any owner), or kNoWay.
  std::uint32_t find_way(std::uint64_t vset, std::uint64_t key) const noexcept;
  void touch(std::uint64_t vset, std::uint32_t way) noexcept;  // make way the MRU of vset
  std::byte* data_of(std::uint64_t vset, std::uint32_t way) noexcept;
  std::uint32_t chunk_bytes(std::uint32_t chunk) const noexcept;

  PropertyCacheConfig config_;
  std::uint64_t sets_ = 0;
  std::uint32_t line_bytes_ = 0;
  std::uint32_t prop_bytes_ = 0;  // 0 = unconfigured
  std::uint32_t mode_segments_ = 0;
  std::uint32_t chunks_ = 0;
  std::uint32_t entries_per_line_ = 0;
  std::uint64_t virtual_sets_ = 0;
  std::uint32_t generation_ = 1;
  std::vector<Way> ways_;          // virtual_sets_ * ways
  std::vector<std::uint8_t> lru_;  // per virtual set: way ids, most recent first
  std::vector<std::byte> data_;    // capacity_bytes: set s, way w, slot e at line (s,w)
  PropertyCacheStats stats_;
};

}  // namespace netsparse::sw
