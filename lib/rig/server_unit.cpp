#include "rig/server_unit.hpp"

#include "rig/region.hpp"

namespace netsparse::rig {

void ServerCounters::add(const ServerCounters& o) {
  packets += o.packets;
  answered += o.answered;
  invalid += o.invalid;
  malformed_prs += o.malformed_prs;
}

std::size_t ServerUnit::serve(const concat::PacketView& v, std::uint64_t now) {
  const Region& r = *port_.region;
  concat::ConcatPoint& cp = *port_.concat;
  const std::uint32_t self = port_.rank;
  const std::uint32_t nodes = port_.size;
  const std::uint32_t P = r.prop_bytes;
  ++counters.packets;
  std::size_t answered = 0;
  constexpr std::uint32_t kPrefetch = 8;  // rows are read at random: overlap the misses
  const std::uint32_t n = v.size();
  for (std::uint32_t i = 0; i < n; ++i) {
    if (i + kPrefetch < n) {
      const std::uint64_t ahead = v.pr(i + kPrefetch).idx - r.row_begin;
      if (ahead < r.local_rows) {
        const std::byte* row = r.base + ahead * P;
        for (std::uint32_t l = 0; l < P; l += 64) __builtin_prefetch(row + l);
      }
    }
    const concat::PrHeader pr = v.pr(i);
    // No engine has a unit >= kMaxUnits: such a read is forged, answering it is pointless.
    if (pr.src_node >= nodes || pr.src_node == self || pr.src_unit >= kMaxUnits) {
      ++counters.malformed_prs;
      continue;
    }
    const concat::PrHeader resp{self, pr.src_unit, pr.idx, pr.req_id};
    const std::uint64_t off = pr.idx - r.row_begin;  // wraps for idx < row_begin
    if (pr.idx >= r.row_begin && off < r.local_rows) {
      cp.push(concat::PrType::kResponse, pr.src_node, resp, r.base + off * P, now);
    } else {
      cp.push(concat::PrType::kInvalid, pr.src_node, resp, nullptr, now);
      ++counters.invalid;
    }
    ++counters.answered;
    ++answered;
  }
  return answered;
}

}  // namespace netsparse::rig
