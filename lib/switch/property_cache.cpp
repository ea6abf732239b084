#include "switch/property_cache.hpp"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>

namespace netsparse::sw {

PropertyCache::PropertyCache(const PropertyCacheConfig& config) : config_(config) {
  if (config.capacity_bytes == 0 || config.ways == 0 || config.segment_bytes == 0 ||
      config.segments_per_line == 0)
    throw std::invalid_argument("PropertyCache: capacity, ways and segment sizes must be > 0");
  if (config.ways > 255)
    throw std::invalid_argument("PropertyCache: at most 255 ways (got " +
                                std::to_string(config.ways) + ")");
  line_bytes_ = config.segment_bytes * config.segments_per_line;
  sets_ = config.capacity_bytes / (std::uint64_t{config.ways} * line_bytes_);
  if (sets_ == 0)
    throw std::invalid_argument("PropertyCache: capacity " + std::to_string(config.capacity_bytes) +
                                " B holds less than one set of " + std::to_string(config.ways) +
                                " lines of " + std::to_string(line_bytes_) + " B");
  data_.resize(sets_ * config.ways * line_bytes_);
}

void PropertyCache::configure(std::uint32_t prop_bytes) {
  if (prop_bytes == 0) throw std::invalid_argument("PropertyCache::configure: prop_bytes == 0");
  prop_bytes_ = prop_bytes;
  chunks_ = (prop_bytes + line_bytes_ - 1) / line_bytes_;
  const std::uint32_t widest = std::min(prop_bytes, line_bytes_);
  mode_segments_ = (widest + config_.segment_bytes - 1) / config_.segment_bytes;
  entries_per_line_ = config_.segments_per_line / mode_segments_;
  const std::uint64_t vsets = sets_ * entries_per_line_;
  if (vsets != virtual_sets_) {
    virtual_sets_ = vsets;
    ways_.assign(virtual_sets_ * config_.ways, Way{});
    lru_.resize(virtual_sets_ * config_.ways);
  }
  for (std::uint64_t v = 0; v < virtual_sets_; ++v)
    for (std::uint32_t w = 0; w < config_.ways; ++w)
      lru_[v * config_.ways + w] = static_cast<std::uint8_t>(w);
  invalidate();
  reset_stats();
}

void PropertyCache::invalidate() noexcept {
  if (++generation_ == 0) {  // wrapped: really clear, once every 2^32 invalidations
    for (Way& w : ways_) w.generation = 0;
    generation_ = 1;
  }
}

std::uint32_t PropertyCache::find_way(std::uint64_t vset, std::uint64_t key) const noexcept {
  const Way* set = &ways_[vset * config_.ways];
  for (std::uint32_t w = 0; w < config_.ways; ++w)
    if (set[w].generation == generation_ && set[w].key == key) return w;
  return kNoWay;
}

void PropertyCache::touch(std::uint64_t vset, std::uint32_t way) noexcept {
  std::uint8_t* order = &lru_[vset * config_.ways];
  std::uint32_t pos = 0;
  while (order[pos] != way) ++pos;
  std::memmove(order + 1, order, pos);
  order[0] = static_cast<std::uint8_t>(way);
}

std::byte* PropertyCache::data_of(std::uint64_t vset, std::uint32_t way) noexcept {
  const std::uint64_t set = vset / entries_per_line_;
  const std::uint64_t slot = vset % entries_per_line_;
  return data_.data() + (set * config_.ways + way) * line_bytes_ + slot * mode_bytes();
}

std::uint32_t PropertyCache::chunk_bytes(std::uint32_t chunk) const noexcept {
  return std::min(line_bytes_, prop_bytes_ - chunk * line_bytes_);
}

void PropertyCache::fill(std::uint32_t owner, std::uint64_t idx, const std::byte* property) {
  if (!configured()) return;
  ++stats_.fills;
  for (std::uint32_t c = 0; c < chunks_; ++c) {
    const std::uint64_t key = idx * chunks_ + c;
    const std::uint64_t vset = vset_of(key);
    std::uint32_t way = find_way(vset, key);
    if (way != kNoWay) {
      ++stats_.refreshes;
    } else {
      // An invalid way if there is one, else the least recently used (last in the order).
      const Way* set = &ways_[vset * config_.ways];
      for (std::uint32_t w = 0; w < config_.ways && way == kNoWay; ++w)
        if (set[w].generation != generation_) way = w;
      if (way == kNoWay) {
        way = lru_[vset * config_.ways + config_.ways - 1];
        ++stats_.evictions;
      }
    }
    Way& entry = ways_[vset * config_.ways + way];
    entry.key = key;
    entry.owner = owner;
    entry.generation = generation_;
    std::memcpy(data_of(vset, way), property + std::size_t{c} * line_bytes_, chunk_bytes(c));
    touch(vset, way);
  }
}

bool PropertyCache::contains(std::uint32_t owner, std::uint64_t idx) const noexcept {
  if (!configured()) return false;
  for (std::uint32_t c = 0; c < chunks_; ++c) {
    const std::uint64_t key = idx * chunks_ + c;
    const std::uint64_t vset = vset_of(key);
    const std::uint32_t way = find_way(vset, key);
    if (way == kNoWay || ways_[vset * config_.ways + way].owner != owner) return false;
  }
  return true;
}

bool PropertyCache::lookup(std::uint32_t owner, std::uint64_t idx, std::byte* out) {
  if (!configured()) return false;
  ++stats_.lookups;
  if (!contains(owner, idx)) return false;
  for (std::uint32_t c = 0; c < chunks_; ++c) {
    const std::uint64_t key = idx * chunks_ + c;
    const std::uint64_t vset = vset_of(key);
    const std::uint32_t way = find_way(vset, key);
    std::memcpy(out + std::size_t{c} * line_bytes_, data_of(vset, way), chunk_bytes(c));
    touch(vset, way);
  }
  ++stats_.hits;
  return true;
}

std::size_t PropertyCache::memory_bytes() const noexcept {
  return data_.size() + ways_.size() * sizeof(Way) + lru_.size();
}

}  // namespace netsparse::sw
