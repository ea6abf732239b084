// The Property Cache against its specification (MICRO '25 §6.2) and against a reference model
// written independently of it: a map from virtual set to an LRU list of entries.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <list>
#include <map>
#include <random>
#include <stdexcept>
#include <vector>

#include "switch/property_cache.hpp"

namespace {

using netsparse::sw::PropertyCache;
using netsparse::sw::PropertyCacheConfig;

// The bytes owner `owner` sends for idx at `version`: every byte depends on all three, so a
// property returned for the wrong idx, owner or version does not compare equal.
std::vector<std::byte> property_bytes(std::uint64_t idx, std::uint32_t owner, std::uint32_t version,
                                      std::uint32_t bytes) {
  std::vector<std::byte> v(bytes);
  std::uint64_t x = idx * 0x9E3779B97F4A7C15ull ^ (std::uint64_t{owner} << 40) ^ version;
  for (std::uint32_t i = 0; i < bytes; ++i) {
    x ^= x >> 29;
    x *= 0xBF58476D1CE4E5B9ull;
    x ^= x >> 32;
    v[i] = static_cast<std::byte>(x & 0xFF);
  }
  return v;
}

// The reference: the geometry as the paper states it, computed here from the configuration,
// and per virtual set a list of entries, most recently used first.
class ReferenceCache {
 public:
  ReferenceCache(const PropertyCacheConfig& c, std::uint32_t prop_bytes)
      : ways_(c.ways), prop_(prop_bytes) {
    const std::uint64_t line = std::uint64_t{c.segment_bytes} * c.segments_per_line;
    const std::uint64_t sets = c.capacity_bytes / (c.ways * line);
    chunks_ = static_cast<std::uint32_t>((prop_bytes + line - 1) / line);
    const std::uint64_t widest = std::min<std::uint64_t>(prop_bytes, line);
    const std::uint64_t mode = (widest + c.segment_bytes - 1) / c.segment_bytes;
    vsets_ = sets * (c.segments_per_line / mode);
    line_ = static_cast<std::uint32_t>(line);
  }
  void fill(std::uint32_t owner, std::uint64_t idx, const std::vector<std::byte>& prop) {
    for (std::uint32_t c = 0; c < chunks_; ++c) {
      const std::uint64_t key = idx * chunks_ + c;
      auto& lru = sets_[key % vsets_];
      auto it = std::find_if(lru.begin(), lru.end(), [&](const Entry& e) { return e.key == key; });
      if (it != lru.end())
        lru.erase(it);
      else if (lru.size() == ways_) {
        lru.pop_back();
        ++evictions;
      }
      const std::size_t begin = std::size_t{c} * line_;
      const std::size_t end = std::min<std::size_t>(prop_, begin + line_);
      lru.push_front(Entry{key, owner, {prop.begin() + begin, prop.begin() + end}});
    }
  }
  bool lookup(std::uint32_t owner, std::uint64_t idx, std::vector<std::byte>* out) {
    std::vector<std::list<Entry>::iterator> found;
    for (std::uint32_t c = 0; c < chunks_; ++c) {
      const std::uint64_t key = idx * chunks_ + c;
      auto& lru = sets_[key % vsets_];
      auto it = std::find_if(lru.begin(), lru.end(), [&](const Entry& e) { return e.key == key; });
      if (it == lru.end() || it->owner != owner) return false;
      found.push_back(it);
    }
    out->clear();
    for (std::uint32_t c = 0; c < chunks_; ++c) {
      auto& lru = sets_[(idx * chunks_ + c) % vsets_];
      out->insert(out->end(), found[c]->bytes.begin(), found[c]->bytes.end());
      lru.splice(lru.begin(), lru, found[c]);
    }
    return true;
  }
  void invalidate() { sets_.clear(); }
  std::uint64_t evictions = 0;

 private:
  struct Entry {
    std::uint64_t key;
    std::uint32_t owner;
    std::vector<std::byte> bytes;
  };
  std::size_t ways_;
  std::uint32_t prop_, chunks_, line_;
  std::uint64_t vsets_;
  std::map<std::uint64_t, std::list<Entry>> sets_;
};

// A cache of `sets` sets of `ways` lines of 512 B (32 x 16 B segments).
PropertyCacheConfig small_config(std::uint64_t sets, std::uint32_t ways) {
  PropertyCacheConfig c;
  c.ways = ways;
  c.capacity_bytes = sets * ways * 512;
  return c;
}

TEST(PropertyCache, PaperGeometryAndModes) {
  PropertyCache cache;  // 32 MB, 16-way, 32 x 16 B segments
  EXPECT_EQ(cache.sets(), (32u << 20) / (16 * 512));
  EXPECT_FALSE(cache.configured());
  struct Case {
    std::uint32_t prop, mode_segments, chunks;
  };
  for (const Case k : {Case{4, 1, 1}, Case{16, 1, 1}, Case{17, 2, 1}, Case{48, 3, 1},
                       Case{64, 4, 1}, Case{512, 32, 1}, Case{513, 32, 2}, Case{4096, 32, 8}}) {
    SCOPED_TRACE(k.prop);
    cache.configure(k.prop);
    EXPECT_EQ(cache.mode_segments(), k.mode_segments);
    EXPECT_EQ(cache.mode_bytes(), 16 * k.mode_segments);
    EXPECT_EQ(cache.chunks_per_property(), k.chunks);
    EXPECT_EQ(cache.entries_per_line(), 32 / k.mode_segments);
    // A power-of-two Mode uses the whole capacity: 32 MB / mode bytes entries.
    if ((k.mode_segments & (k.mode_segments - 1)) == 0) {
      EXPECT_EQ(cache.entry_capacity() * cache.mode_bytes(), std::uint64_t{32} << 20);
    }
  }
}

TEST(PropertyCache, RejectsBadConfiguration) {
  PropertyCacheConfig c;
  c.ways = 0;
  EXPECT_THROW(PropertyCache{c}, std::invalid_argument);
  c = PropertyCacheConfig{};
  c.ways = 256;
  EXPECT_THROW(PropertyCache{c}, std::invalid_argument);
  c = PropertyCacheConfig{};
  c.capacity_bytes = 16 * 512 - 1;  // less than one set
  EXPECT_THROW(PropertyCache{c}, std::invalid_argument);
  PropertyCache ok;
  EXPECT_THROW(ok.configure(0), std::invalid_argument);
}

TEST(PropertyCache, UnconfiguredCacheStoresNothing) {
  PropertyCache cache(small_config(4, 4));
  const auto p = property_bytes(7, 1, 0, 64);
  cache.fill(1, 7, p.data());
  std::vector<std::byte> out(64);
  EXPECT_FALSE(cache.lookup(1, 7, out.data()));
  cache.configure(64);
  EXPECT_FALSE(cache.lookup(1, 7, out.data()));  // the fill before configure is gone
  EXPECT_EQ(cache.stats().lookups, 1u);
  EXPECT_EQ(cache.stats().hits, 0u);
}

TEST(PropertyCache, MissFillHitReturnsTheOwnersBytes) {
  PropertyCache cache(small_config(4, 4));
  cache.configure(64);
  const auto p = property_bytes(1234, 3, 0, 64);
  std::vector<std::byte> out(64, std::byte{0xEE});
  EXPECT_FALSE(cache.lookup(3, 1234, out.data()));
  EXPECT_EQ(out, std::vector<std::byte>(64, std::byte{0xEE}));  // a miss writes nothing
  cache.fill(3, 1234, p.data());
  ASSERT_TRUE(cache.lookup(3, 1234, out.data()));
  EXPECT_EQ(out, p);
  // A read addressed to another owner never gets this owner's bytes.
  EXPECT_FALSE(cache.lookup(4, 1234, out.data()));
  EXPECT_FALSE(cache.lookup(3, 1235, out.data()));
  EXPECT_EQ(cache.stats().lookups, 4u);
  EXPECT_EQ(cache.stats().hits, 1u);
  EXPECT_EQ(cache.stats().fills, 1u);
  // A newer response from the owner replaces the bytes.
  const auto newer = property_bytes(1234, 3, 1, 64);
  cache.fill(3, 1234, newer.data());
  ASSERT_TRUE(cache.lookup(3, 1234, out.data()));
  EXPECT_EQ(out, newer);
  EXPECT_EQ(cache.stats().refreshes, 1u);
}

TEST(PropertyCache, EvictsLeastRecentlyUsedOfTheSet) {
  // One set of 4 lines, 512 B properties: one virtual set, so every idx competes.
  PropertyCache cache(small_config(1, 4));
  cache.configure(512);
  ASSERT_EQ(cache.virtual_sets(), 1u);
  std::vector<std::byte> out(512);
  for (std::uint64_t i = 0; i < 4; ++i) cache.fill(0, i, property_bytes(i, 0, 0, 512).data());
  ASSERT_TRUE(cache.lookup(0, 0, out.data()));            // order now (MRU first) 0 3 2 1
  cache.fill(0, 4, property_bytes(4, 0, 0, 512).data());  // evicts 1
  EXPECT_FALSE(cache.contains(0, 1));
  for (std::uint64_t i : {0, 2, 3, 4}) EXPECT_TRUE(cache.contains(0, i)) << i;
  cache.fill(0, 5, property_bytes(5, 0, 0, 512).data());  // evicts 2
  EXPECT_FALSE(cache.contains(0, 2));
  cache.fill(0, 3, property_bytes(3, 0, 0, 512).data());  // refresh: 3 becomes MRU
  cache.fill(0, 6, property_bytes(6, 0, 0, 512).data());  // evicts 0 (3 was refreshed)
  EXPECT_FALSE(cache.contains(0, 0));
  EXPECT_TRUE(cache.contains(0, 3));
  EXPECT_EQ(cache.stats().evictions, 3u);
  // contains() does not change the order: 6 5 3 4 → 4 goes next.
  cache.fill(0, 7, property_bytes(7, 0, 0, 512).data());
  EXPECT_FALSE(cache.contains(0, 4));
  EXPECT_TRUE(cache.contains(0, 5));
}

TEST(PropertyCache, SmallModePacksALineWithEntries) {
  // 2 sets x 2 ways; 16 B properties: Mode 1 segment, 32 entries per line, 64 virtual sets.
  PropertyCache cache(small_config(2, 2));
  cache.configure(16);
  ASSERT_EQ(cache.virtual_sets(), 64u);
  EXPECT_EQ(cache.entry_capacity(), 128u);  // the whole 2 KB: 128 x 16 B
  // 128 idxs spread over all virtual sets all fit: nothing evicted.
  for (std::uint64_t i = 0; i < 128; ++i) cache.fill(1, i, property_bytes(i, 1, 0, 16).data());
  EXPECT_EQ(cache.stats().evictions, 0u);
  std::vector<std::byte> out(16);
  for (std::uint64_t i = 0; i < 128; ++i) {
    ASSERT_TRUE(cache.lookup(1, i, out.data())) << i;
    EXPECT_EQ(out, property_bytes(i, 1, 0, 16)) << i;
  }
  // A third idx of one virtual set (i, i + 64, i + 128) evicts the older of the two.
  cache.fill(1, 128 + 5, property_bytes(128 + 5, 1, 0, 16).data());
  EXPECT_EQ(cache.stats().evictions, 1u);
  EXPECT_FALSE(cache.contains(1, 5));
  EXPECT_TRUE(cache.contains(1, 64 + 5));
  EXPECT_TRUE(cache.contains(1, 6));
  // With 512 B properties the same cache holds only 4 entries.
  cache.configure(512);
  EXPECT_EQ(cache.entry_capacity(), 4u);
}

TEST(PropertyCache, LargePropertiesAreChunkedAndNeedEveryChunk) {
  // 4 sets x 2 ways; 1200 B = chunks of 512, 512, 176 in virtual sets (3i), (3i+1), (3i+2) mod 4.
  PropertyCache cache(small_config(4, 2));
  cache.configure(1200);
  ASSERT_EQ(cache.chunks_per_property(), 3u);
  const auto p = property_bytes(10, 2, 0, 1200);
  cache.fill(2, 10, p.data());
  std::vector<std::byte> out(1200);
  ASSERT_TRUE(cache.lookup(2, 10, out.data()));
  EXPECT_EQ(out, p);
  // idx 10: keys 30, 31, 32 → virtual sets 2, 3, 0. Fill two other keys of virtual set 0
  // (idx 12: keys 36, 37, 38 → sets 0, 1, 2; idx 16: keys 48.. → sets 0, 1, 2).
  cache.fill(2, 12, property_bytes(12, 2, 0, 1200).data());
  cache.fill(2, 16, property_bytes(16, 2, 0, 1200).data());
  // Set 0 held key 32 (idx 10's last chunk) and then 36 and 48: key 32 was evicted, and so was
  // key 30 from set 2 (30, 38, 50). idx 10 is no longer whole: a miss, nothing written.
  std::vector<std::byte> untouched(1200, std::byte{0x5A});
  out = untouched;
  EXPECT_FALSE(cache.lookup(2, 10, out.data()));
  EXPECT_EQ(out, untouched);
  ASSERT_TRUE(cache.lookup(2, 16, out.data()));
  EXPECT_EQ(out, property_bytes(16, 2, 0, 1200));
}

TEST(PropertyCache, InvalidateAndConfigureDropEverything) {
  PropertyCache cache(small_config(4, 4));
  cache.configure(64);
  for (std::uint64_t i = 0; i < 10; ++i) cache.fill(0, i, property_bytes(i, 0, 0, 64).data());
  cache.invalidate();
  std::vector<std::byte> out(64);
  for (std::uint64_t i = 0; i < 10; ++i) EXPECT_FALSE(cache.lookup(0, i, out.data())) << i;
  EXPECT_EQ(cache.stats().lookups, 10u);  // invalidate keeps the statistics
  cache.fill(0, 3, property_bytes(3, 0, 1, 64).data());
  ASSERT_TRUE(cache.lookup(0, 3, out.data()));
  EXPECT_EQ(out, property_bytes(3, 0, 1, 64));
  cache.configure(64);  // a new kernel: entries and statistics gone
  EXPECT_EQ(cache.stats().lookups, 0u);
  EXPECT_FALSE(cache.contains(0, 3));
  // Entries invalidated never count as evictions when their ways are reused.
  for (std::uint64_t i = 0; i < 64; ++i) cache.fill(0, i, property_bytes(i, 0, 0, 64).data());
  EXPECT_EQ(cache.stats().evictions, 0u);
}

// Random fills, lookups and invalidations against the reference, for several geometries and
// property sizes (small caches so that evictions are frequent; an invalidation every ~2000
// operations). Every hit must return exactly the bytes the owner last sent for that idx.
TEST(PropertyCache, RandomizedAgainstReference) {
  struct Case {
    std::uint64_t sets;
    std::uint32_t ways, prop;
  };
  for (const Case k : {Case{4, 4, 4}, Case{8, 16, 48}, Case{2, 3, 64}, Case{16, 2, 512},
                       Case{4, 4, 1200}, Case{8, 5, 2000}, Case{1, 16, 100}}) {
    SCOPED_TRACE(testing::Message()
                 << "sets " << k.sets << " ways " << k.ways << " prop " << k.prop);
    const PropertyCacheConfig config = small_config(k.sets, k.ways);
    PropertyCache cache(config);
    cache.configure(k.prop);
    ReferenceCache ref(config, k.prop);
    std::mt19937_64 rng(k.sets * 1000 + k.ways * 10 + k.prop);
    const std::uint32_t nodes = 4;
    const std::uint64_t idx_space = cache.entry_capacity() * 3 / cache.chunks_per_property() + 8;
    std::map<std::uint64_t, std::uint32_t> version;  // the owner's latest version of each idx
    std::uint64_t hits = 0;
    std::vector<std::byte> got(k.prop), expected;
    for (int op = 0; op < 40000; ++op) {
      const std::uint64_t idx = rng() % idx_space;
      const std::uint32_t owner = static_cast<std::uint32_t>(idx % nodes);
      const unsigned r = rng() % 2000;
      if (r < 900) {
        if (rng() % 8 == 0) ++version[idx];  // the owner's property changed (a new kernel run)
        const auto p = property_bytes(idx, owner, version[idx], k.prop);
        cache.fill(owner, idx, p.data());
        ref.fill(owner, idx, p);
      } else if (r < 1999) {
        // Mostly the right owner; sometimes a read addressed to another node.
        const std::uint32_t asked = rng() % 10 == 0 ? (owner + 1) % nodes : owner;
        const bool hit = cache.lookup(asked, idx, got.data());
        ASSERT_EQ(hit, ref.lookup(asked, idx, &expected)) << "op " << op << " idx " << idx;
        if (hit) {
          ++hits;
          ASSERT_EQ(got, expected) << "op " << op;
          ASSERT_EQ(asked, owner);
          ASSERT_EQ(got, property_bytes(idx, owner, version[idx], k.prop)) << "op " << op;
        }
      } else {
        cache.invalidate();
        ref.invalidate();
      }
    }
    EXPECT_EQ(cache.stats().hits, hits);
    EXPECT_EQ(cache.stats().evictions, ref.evictions);
    EXPECT_GT(hits, 100u);           // the mix exercises hits ...
    EXPECT_GT(ref.evictions, 100u);  // ... and evictions
  }
}

}  // namespace
