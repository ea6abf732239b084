#include "rig/server_unit.hpp"

#include <algorithm>

#include "rig/copy.hpp"
#include "rig/outbox.hpp"
#include "rig/region.hpp"
#include "rig/row_packing.hpp"

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

void ServerUnit::refuse(std::uint32_t dest, const concat::GatherHeader& read, std::uint32_t bad) {
  Outbox& out = *port_.outbox;
  std::byte* at = out.packet_room(dest, concat::kGatherHeaderBytes);
  concat::encode_gather_header(
      at, concat::GatherHeader{{concat::GatherType::kGatherRefuse, dest, 0, 0, port_.rank},
                               read.tag,
                               read.unit,
                               bad,
                               read.n});
  out.commit_packet(dest, concat::kGatherHeaderBytes);
  ++counters.compact_packets;
  counters.compact_bytes += concat::kGatherHeaderBytes;
}

template <class RowAt>
bool ServerUnit::pack_read(std::uint32_t dest, const concat::GatherHeader& read, std::size_t& next,
                           RowAt&& row_at) {
  const Region& r = *port_.region;
  PackTally tally;
  const bool done = pack_rows(
      *port_.outbox, dest, r, concat::kGatherHeaderBytes, read.n, next, row_at,
      [&](std::byte* at, std::size_t first, std::size_t n) {
        concat::encode_gather_header(
            at, concat::GatherHeader{{concat::GatherType::kGatherRows, dest, r.prop_bytes,
                                      static_cast<std::uint32_t>(n), port_.rank},
                                     read.tag,
                                     read.unit,
                                     static_cast<std::uint32_t>(first),
                                     read.n});
      },
      tally);
  counters.compact_packets += tally.packets;
  counters.compact_bytes += tally.bytes;
  counters.rows_queued += tally.rows_queued;
  return done;
}

std::size_t ServerUnit::serve_compact(std::uint32_t src, const concat::GatherPacket& pkt) {
  using concat::GatherHeader;
  const GatherHeader& h = pkt.header;
  ++counters.packets;
  // No engine has a unit >= kMaxUnits, nor is a read from itself or naming another source.
  if (h.src_node != src || src >= port_.size || src == port_.rank || h.unit >= kMaxUnits) {
    ++counters.malformed_prs;
    return 0;
  }
  const Region& r = *port_.region;
  const std::byte* body = pkt.body.data();
  const bool wide = h.rec_len == 8;
  const std::uint32_t bad = wide ? first_out_of_range<std::uint64_t>(body, h.n, r.local_rows)
                                 : first_out_of_range<std::uint32_t>(body, h.n, r.local_rows);
  counters.answered += h.n;
  if (bad != h.n) {
    refuse(src, h, bad);
    counters.invalid += h.n;
    return h.n;
  }
  const auto row_at = [&](std::size_t k) -> std::uint64_t {
    return wide ? concat::wire::load<std::uint64_t>(body + k * 8)
                : concat::wire::load<std::uint32_t>(body + k * 4);
  };
  port_.concat->account_model(concat::PrType::kResponse, h.n);
  // Behind an earlier read of the same peer still being answered: the ring is full for now.
  std::size_t next = 0;
  if (!answering_.waiting_for(src) && pack_read(src, h, next, row_at)) return h.n;
  // The rest waits for room: its rows leave the received frame (whose memory is the ring's).
  Answering job{src, h, next, next, std::vector<std::uint64_t>(h.n - next)};
  for (std::size_t k = next; k < h.n; ++k) job.rows[k - next] = row_at(k);
  answering_.push(std::move(job));
  return h.n;
}

std::size_t ServerUnit::serve() {
  if (answering_.empty()) return 0;
  const std::uint64_t before = counters.compact_packets;
  answering_.pack_more([&](Answering& job) {
    if (port_.outbox->dead(job.dest)) return true;  // nobody to answer
    return pack_read(job.dest, job.read, job.next,
                     [&](std::size_t k) { return job.rows[k - job.base]; });
  });
  return static_cast<std::size_t>(counters.compact_packets - before);
}

void ServerUnit::region_changed() {
  answering_.drop_all([&](const Answering& job) {
    refuse(job.dest, job.read, static_cast<std::uint32_t>(job.next));
  });
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
