#include "rig/region.hpp"

#include <stdexcept>
#include <string>

namespace netsparse::rig {

namespace {
std::uint64_t checked_row_begin(std::span<const std::uint64_t> offsets, int rank,
                                std::uint64_t local_rows) {
  const auto r = static_cast<std::size_t>(rank);
  if (offsets[r + 1] < offsets[r] || offsets[r + 1] - offsets[r] != local_rows) {
    throw std::invalid_argument("local_rows (" + std::to_string(local_rows) +
                                ") differs from row_offsets[rank+1] - row_offsets[rank] (" +
                                std::to_string(offsets[r + 1] - offsets[r]) + ")");
  }
  return offsets[r];
}
}  // namespace

Region::Region(std::byte* base_, std::uint64_t local_rows_, std::uint32_t prop_bytes_,
               std::span<const std::uint64_t> row_offsets, int rank, std::uint64_t max_filter_bytes)
    : base(base_),
      local_rows(local_rows_),
      prop_bytes(prop_bytes_),
      solver(row_offsets),
      row_begin(checked_row_begin(row_offsets, rank, local_rows_)),
      row_end(row_begin + local_rows_) {
  const std::uint64_t total = solver.total_rows();
  const std::uint64_t need = filter::RowStateFilter::bytes_for(total);
  if (need > max_filter_bytes) {
    throw std::length_error("the Idx Filter for " + std::to_string(total) +
                            " global rows (row_offsets[size]) needs " + std::to_string(need) +
                            " bytes, more than the limit of " + std::to_string(max_filter_bytes) +
                            " bytes (half of physical memory)");
  }
  rows_.resize(total);
}

agreement::Agreement region_agreement(std::uint32_t prop_bytes, const std::uint64_t* row_offsets,
                                      int size, std::uint32_t flags) {
  agreement::Agreement a;
  a.field("prop_bytes", prop_bytes);
  a.field("flags", flags);
  const std::uint64_t total = row_offsets != nullptr ? row_offsets[size] : 0;
  a.field("row_offsets[size] (total rows)", total);
  a.field("row_offsets",
          row_offsets != nullptr
              ? std::to_string(agreement::fnv1a(
                    row_offsets, sizeof(std::uint64_t) * (static_cast<std::size_t>(size) + 1)))
              : std::string(),
          /*show=*/false);
  return a;
}

bool Region::claim_mapping(std::uint64_t begin, std::uint64_t end, std::uint64_t mapping) {
  for (const Mapping& m : mappings_) {
    if (begin < m.end && m.begin < end) {  // overlapping windows must share the mapping
      if (m.mapping != mapping) return false;
      if (begin >= m.begin && end <= m.end) return true;
    }
  }
  if (mappings_.size() == kMaxMappings) return false;
  mappings_.push_back(Mapping{begin, end, mapping});
  return true;
}

bool Region::admit(Command& c, const Config& config) {
  if ((c.flags & NS_SEND_NEW_EPOCH) != 0) {
    // An epoch starts only when no earlier work request still relies on the filter.
    if (!idle()) return false;
    rows_.new_epoch();
    mappings_.clear();
    poison_ = NS_WC_SUCCESS;
  }
  c.coalesced_any = false;
  // NS_SEND_UNIQUE: the caller's idxs are distinct, nothing to drop; the per-idx filter word
  // (a cache miss per idx at random) is skipped. A repeat is then requested again: still right.
  const bool dedup = (config.filter_on() || config.coalesce_on()) && !(c.flags & NS_SEND_UNIQUE);
  c.filter = FilterUse::kNone;
  if (!dedup) return true;
  // A plan's recording must see every idx of its own list: nothing may be left out because an
  // earlier command of the epoch brought it (the filter), only repeats inside the list.
  if (c.recording) {
    if (c.count <= UINT32_MAX) c.filter = FilterUse::kPerWr;
    return true;
  }
  if (c.layout == NS_RIG_LAYOUT_INDEXED) {
    const std::uint64_t mapping =
        reinterpret_cast<std::uint64_t>(c.out) - c.window_base * prop_bytes;
    if (claim_mapping(c.window_base, c.window_base + c.window_len, mapping)) {
      c.filter = FilterUse::kRows;
      c.generated_seen = false;
      ++generating_;
      c.fifo_seq = fifo_base_ + fifo_.size();
      fifo_.push_back(FifoEntry{&c, false, false, UINT64_MAX});
      return true;
    }
  }
  // Per-WR de-duplication keeps 32-bit positions.
  if (c.count <= UINT32_MAX) c.filter = FilterUse::kPerWr;
  return true;
}

}  // namespace netsparse::rig
