#include "rig/server_unit.hpp"

#include <algorithm>

#include "rig/copy.hpp"
#include "rig/outbox.hpp"
#include "rig/region.hpp"

namespace netsparse::rig {

namespace {
// Position of the first row >= limit in a read's body of n rows of T, or n if none. One pass
// with no early exit, so that the compiler can vectorise it.
template <class T>
std::uint32_t first_out_of_range(const std::byte* body, std::uint32_t n, std::uint64_t limit) {
  std::uint64_t worst = 0;
  for (std::uint32_t k = 0; k < n; ++k) {
    worst =
        std::max<std::uint64_t>(worst, concat::wire::load<T>(body + std::size_t{k} * sizeof(T)));
  }
  if (worst < limit) return n;
  std::uint32_t k = 0;
  while (concat::wire::load<T>(body + std::size_t{k} * sizeof(T)) < limit) ++k;
  return k;
}
}  // namespace

std::size_t ServerUnit::serve_compact(std::uint32_t src, const concat::GatherPacket& pkt) {
  using concat::GatherHeader;
  using concat::GatherType;
  const GatherHeader& h = pkt.header;
  ++counters.packets;
  // No engine has a unit >= kMaxUnits, nor is a read from itself or naming another source.
  if (h.src_node != src || src >= port_.size || src == port_.rank || h.unit >= kMaxUnits) {
    ++counters.malformed_prs;
    return 0;
  }
  const Region& r = *port_.region;
  Outbox& out = *port_.outbox;
  const std::uint32_t P = r.prop_bytes;
  const std::byte* body = pkt.body.data();
  const bool wide = h.rec_len == 8;
  const std::uint32_t bad = wide ? first_out_of_range<std::uint64_t>(body, h.n, r.local_rows)
                                 : first_out_of_range<std::uint32_t>(body, h.n, r.local_rows);
  counters.answered += h.n;
  if (bad != h.n) {
    std::byte* at = out.packet_room(src, concat::kGatherHeaderBytes);
    concat::encode_gather_header(
        at,
        GatherHeader{{GatherType::kGatherRefuse, src, 0, 0, port_.rank}, h.tag, h.unit, bad, h.n});
    out.commit_packet(src, concat::kGatherHeaderBytes);
    ++counters.compact_packets;
    counters.compact_bytes += concat::kGatherHeaderBytes;
    counters.invalid += h.n;
    return h.n;
  }
  const std::uint32_t per_packet = static_cast<std::uint32_t>(
      std::max<std::size_t>(1, (out.frame_capacity() - concat::kGatherHeaderBytes) / P));
  constexpr std::uint32_t kPrefetch = 8;  // rows are read at random: overlap the misses
  const auto row_at = [&](std::uint32_t k) -> std::uint64_t {
    return wide ? concat::wire::load<std::uint64_t>(body + std::size_t{k} * 8)
                : concat::wire::load<std::uint32_t>(body + std::size_t{k} * 4);
  };
  for (std::uint32_t first = 0; first < h.n; first += per_packet) {
    const std::uint32_t n = std::min(per_packet, h.n - first);
    const std::size_t bytes = concat::kGatherHeaderBytes + std::size_t{n} * P;
    std::byte* at = out.packet_room(src, bytes);
    concat::encode_gather_header(
        at,
        GatherHeader{{GatherType::kGatherRows, src, P, n, port_.rank}, h.tag, h.unit, first, h.n});
    std::byte* dst = at + concat::kGatherHeaderBytes;
    for (std::uint32_t k = 0; k < n; ++k) {
      if (k + kPrefetch < n) {
        const std::byte* ahead = r.base + row_at(first + k + kPrefetch) * P;
        for (std::uint32_t l = 0; l < P; l += 64) __builtin_prefetch(ahead + l);
      }
      copy_prop(dst + std::size_t{k} * P, r.base + row_at(first + k) * P, P);
    }
    out.commit_packet(src, bytes);
    ++counters.compact_packets;
    counters.compact_bytes += bytes;
  }
  port_.concat->account_model(concat::PrType::kResponse, h.n);
  return h.n;
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
