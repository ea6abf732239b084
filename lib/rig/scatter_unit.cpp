#include "rig/scatter_unit.hpp"

#include <algorithm>
#include <bit>
#include <cstring>
#include <type_traits>

#include "rig/region.hpp"
#include "support/hash.hpp"

namespace netsparse::rig {

using concat::ScatterHeader;
using concat::ScatterPacket;
using concat::ScatterStatus;
using concat::ScatterType;

// ---- combining ---------------------------------------------------------------------------
namespace {

template <class T, class Op>
void combine_as(std::byte* dst, const std::byte* src, std::uint32_t bytes, Op op) noexcept {
  for (std::uint32_t at = 0; at + sizeof(T) <= bytes; at += sizeof(T)) {
    T a, b;
    std::memcpy(&a, dst + at, sizeof(T));
    std::memcpy(&b, src + at, sizeof(T));
    a = op(a, b);
    std::memcpy(dst + at, &a, sizeof(T));
  }
}

// Integer sums wrap (computed unsigned: no overflow UB); min and max as std::min / std::max.
template <class T, class U>
struct Sum {
  T operator()(T a, T b) const noexcept {
    if constexpr (std::is_integral_v<T>) {
      return static_cast<T>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
    } else {
      return a + b;
    }
  }
};
template <class T>
struct Min {
  T operator()(T a, T b) const noexcept { return std::min(a, b); }
};
template <class T>
struct Max {
  T operator()(T a, T b) const noexcept { return std::max(a, b); }
};

template <class T, class Op>
void combine_fixed(std::byte* dst, const std::byte* src, std::uint32_t bytes) noexcept {
  combine_as<T>(dst, src, bytes, Op{});
}

template <class T, class U>
CombineFn combine_fn_of(int op) noexcept {
  switch (op) {
    case NS_RIS_MIN:
      return &combine_fixed<T, Min<T>>;
    case NS_RIS_MAX:
      return &combine_fixed<T, Max<T>>;
    default:
      return &combine_fixed<T, Sum<T, U>>;
  }
}

}  // namespace

CombineFn combine_fn(int op, int datatype) noexcept {
  switch (datatype) {
    case NS_RIS_FLOAT64:
      return combine_fn_of<double, double>(op);
    case NS_RIS_INT32:
      return combine_fn_of<std::int32_t, std::uint32_t>(op);
    case NS_RIS_INT64:
      return combine_fn_of<std::int64_t, std::uint64_t>(op);
    default:
      return combine_fn_of<float, float>(op);
  }
}

void combine_row(std::byte* dst, const std::byte* src, std::uint32_t bytes, int op,
                 int datatype) noexcept {
  combine_fn(op, datatype)(dst, src, bytes);
}

// ---- client ------------------------------------------------------------------------------
void ScatterUnit::grow_slots() {
  std::vector<Slot> old(slots_.size() * 2, Slot{kEmpty, 0});
  old.swap(slots_);
  slot_shift_ = 64 - std::countr_zero(slots_.size());
  const std::size_t mask = slots_.size() - 1;
  for (const Slot& s : old) {
    if (s.key == kEmpty) continue;
    std::size_t h = support::fibonacci_slot(s.key, slot_shift_);
    while (slots_[h].key != kEmpty) h = (h + 1) & mask;
    slots_[h] = s;
  }
}

std::uint64_t ScatterUnit::append_record(std::uint32_t node, std::uint64_t idx,
                                         const std::byte* value, std::uint32_t P) {
  std::vector<std::byte>& recs = recs_[node];
  if (recs.empty()) touched_.push_back(node);
  const std::size_t rec_len = concat::kScatterRowBytes + P;
  const std::size_t at = recs.size();
  recs.resize(at + rec_len);
  concat::wire::store<std::uint64_t>(recs.data() + at, idx);
  std::memcpy(recs.data() + at + concat::kScatterRowBytes, value, P);
  return at / rec_len;
}

bool ScatterUnit::combine(Command& c) {
  const Region& r = *port_.region;
  const std::uint32_t P = r.prop_bytes;
  const std::size_t rec_len = concat::kScatterRowBytes + P;
  const std::uint64_t total = r.solver.total_rows();
  if (recs_.size() != port_.size) recs_.resize(port_.size);
  for (const std::uint32_t node : touched_) recs_[node].clear();
  touched_.clear();
  if ((c.flags & NS_SEND_UNIQUE) != 0) return bucket_unique(c, total);
  // Open addressing at load <= 1/2, grown as distinct idxs appear: the table stays as small as
  // the WR's distinct rows (the hot rows of a skewed list stay in cache), never the list's size.
  slots_.assign(kFirstSlots, Slot{kEmpty, 0});
  slot_shift_ = 64 - std::countr_zero(kFirstSlots);
  used_slots_ = 0;
  const CombineFn fold = combine_fn(c.op, c.datatype);
  for (std::uint64_t j = 0; j < c.count; ++j) {
    const std::uint64_t idx = c.idx[j];
    const std::byte* value = c.values + j * P;
    if (idx >= total) {
      c.status = NS_WC_LOC_INV_REQ;
      c.bad_pos = j;
      return false;
    }
    const std::size_t mask = slots_.size() - 1;
    std::size_t h = support::fibonacci_slot(idx, slot_shift_);
    while (slots_[h].key != kEmpty && slots_[h].key != idx) h = (h + 1) & mask;
    if (slots_[h].key == idx) {
      const std::uint64_t where = slots_[h].where;
      const std::uint64_t rec = where & ((std::uint64_t{1} << kRecBits) - 1);
      fold(recs_[where >> kRecBits].data() + rec * rec_len + concat::kScatterRowBytes, value, P);
      ++counters.combined;
      continue;
    }
    const auto node = static_cast<std::uint32_t>(r.solver.owner(idx));
    slots_[h] = Slot{idx, (std::uint64_t{node} << kRecBits) | append_record(node, idx, value, P)};
    if (2 * ++used_slots_ > slots_.size()) grow_slots();
  }
  counters.records += c.count;
  return true;
}

// NS_SEND_UNIQUE: the caller states its idxs are distinct, so nothing can combine: each record
// goes straight to its owner's list, no table of idxs (a hash probe and the table's growth per
// record saved). A repeat anyway is sent twice and applied twice, in the WR's order: the same
// result as combining it first for every op (sums, min, max add or pick alike; a replace keeps
// the last).
bool ScatterUnit::bucket_unique(Command& c, std::uint64_t total) {
  const Region& r = *port_.region;
  const std::uint32_t P = r.prop_bytes;
  for (std::uint64_t j = 0; j < c.count; ++j) {  // checked whole first: nothing sent on a refusal
    if (c.idx[j] >= total) {
      c.status = NS_WC_LOC_INV_REQ;
      c.bad_pos = j;
      return false;
    }
  }
  for (std::uint64_t j = 0; j < c.count; ++j) {
    const std::uint64_t idx = c.idx[j];
    append_record(static_cast<std::uint32_t>(r.solver.owner(idx)), idx, c.values + j * P, P);
  }
  counters.records += c.count;
  return true;
}

void ScatterUnit::apply_local(const Command& c) {
  const Region& r = *port_.region;
  const std::vector<std::byte>& recs = recs_[port_.rank];
  const std::uint32_t P = r.prop_bytes;
  const std::size_t rec_len = concat::kScatterRowBytes + P;
  const CombineFn fold = combine_fn(c.op, c.datatype);
  for (std::size_t at = 0; at < recs.size(); at += rec_len) {
    const std::uint64_t row = concat::wire::load<std::uint64_t>(recs.data() + at) - r.row_begin;
    fold(r.base + row * P, recs.data() + at + concat::kScatterRowBytes, P);
  }
  counters.local += recs.size() / rec_len;
}

void ScatterUnit::send_updates(Command& c, Active& a, std::uint32_t req) {
  const std::uint32_t P = port_.region->prop_bytes;
  const std::size_t rec_len = concat::kScatterRowBytes + P;
  const std::size_t per_packet =
      std::max<std::size_t>(1, (outbox_.frame_capacity() - concat::kScatterHeaderBytes) / rec_len);
  for (const std::uint32_t node : touched_) {
    if (node == port_.rank) continue;
    const std::vector<std::byte>& recs = recs_[node];
    const std::size_t n_recs = recs.size() / rec_len;
    Owner o{node, 0};
    for (std::size_t first = 0; first < n_recs; first += per_packet) {
      const auto n = static_cast<std::uint32_t>(std::min(per_packet, n_recs - first));
      const std::size_t bytes = concat::kScatterHeaderBytes + n * rec_len;
      std::byte* at = outbox_.packet_room(node, bytes);
      concat::encode_scatter_header(
          at, ScatterHeader{
                  {ScatterType::kUpdate, node, static_cast<std::uint32_t>(rec_len), n, port_.rank},
                  req,
                  static_cast<std::uint16_t>(c.op),
                  static_cast<std::uint16_t>(c.datatype),
                  ScatterStatus::kApplied});
      std::memcpy(at + concat::kScatterHeaderBytes, recs.data() + first * rec_len, n * rec_len);
      outbox_.commit_packet(node, bytes);
      ++o.packets;
      ++counters.packets_out;
      counters.bytes_out += bytes;
    }
    counters.sent += n_recs;
    a.left += o.packets;
    a.owners.push_back(o);
  }
}

void ScatterUnit::start(Command& c, std::uint64_t now) {
  if (c.deadline_ns <= now) {
    port_.sink->note_timeout();
    c.status = NS_WC_WATCHDOG_TIMEOUT;
    port_.sink->complete(c);
    return;
  }
  if (c.count == 0) {
    port_.sink->complete(c);
    return;
  }
  if (!combine(c)) {  // nothing sent, nothing written
    port_.sink->complete(c);
    return;
  }
  for (const std::uint32_t node : touched_) {
    if (node != port_.rank && port_.peer_dead(node)) {
      c.status = NS_WC_TRANSPORT_ERR;  // before anything is written: the WR has no effect
      port_.sink->complete(c);
      return;
    }
  }
  const std::uint32_t req = next_req_++;
  if (next_req_ == 0) next_req_ = 1;
  Active a{&c, {}, 0};
  send_updates(c, a, req);
  apply_local(c);  // while the owners apply theirs
  if (a.left == 0) {
    port_.sink->complete(c);
    return;
  }
  active_.insert_or_assign(req, std::move(a));
}

void ScatterUnit::finish(std::uint32_t req, int status) {
  const auto it = active_.find(req);
  Command& c = *it->second.cmd;
  active_.erase(it);
  if (c.status == NS_WC_SUCCESS) c.status = status;
  port_.sink->complete(c);
}

void ScatterUnit::on_ack(int src, const ScatterPacket& pkt) {
  const ScatterHeader& h = pkt.header;
  const auto it = active_.find(h.req_id);
  if (it == active_.end()) {
    ++counters.stale;  // completed by the watchdog, or a forged id
    return;
  }
  Active& a = it->second;
  const auto o = std::find_if(a.owners.begin(), a.owners.end(), [&](const Owner& w) {
    return w.node == static_cast<std::uint32_t>(src);
  });
  if (o == a.owners.end() || o->packets == 0) {
    ++counters.malformed;  // src owes this WR nothing
    return;
  }
  --o->packets;
  if (h.status != ScatterStatus::kApplied) a.cmd->status = NS_WC_REM_INV_REQ;
  if (--a.left == 0) finish(h.req_id, NS_WC_SUCCESS);
}

// ---- owner -------------------------------------------------------------------------------
void ScatterUnit::send_ack(std::uint32_t dest, const ScatterHeader& u, ScatterStatus s) {
  std::byte* at = outbox_.packet_room(dest, concat::kScatterHeaderBytes);
  concat::encode_scatter_header(
      at,
      ScatterHeader{{ScatterType::kAck, dest, 0, 0, port_.rank}, u.req_id, u.op, u.datatype, s});
  outbox_.commit_packet(dest, concat::kScatterHeaderBytes);
  ++counters.packets_out;
  counters.bytes_out += concat::kScatterHeaderBytes;
}

void ScatterUnit::on_update(int src, const ScatterPacket& pkt) {
  const ScatterHeader& h = pkt.header;
  const Region& r = *port_.region;
  const std::uint32_t P = r.prop_bytes;
  const std::uint32_t elem = h.datatype == NS_RIS_FLOAT32 || h.datatype == NS_RIS_INT32 ? 4 : 8;
  ScatterStatus s = ScatterStatus::kApplied;
  if (P % elem != 0) {
    s = ScatterStatus::kBadRow;
  } else {
    // The whole packet first: it is applied whole or not at all.
    for (std::uint32_t k = 0; k < h.n; ++k) {
      const std::uint64_t row = pkt.row(k);
      if (row < r.row_begin || row >= r.row_end) {
        s = ScatterStatus::kOutOfRange;
        break;
      }
    }
  }
  if (s == ScatterStatus::kApplied) {
    const CombineFn fold = combine_fn(h.op, h.datatype);
    constexpr std::uint32_t kPrefetch = 8;  // rows are written at random: overlap the misses
    for (std::uint32_t k = 0; k < h.n; ++k) {
      if (k + kPrefetch < h.n) {
        __builtin_prefetch(r.base + (pkt.row(k + kPrefetch) - r.row_begin) * P, 1);
      }
      fold(r.base + (pkt.row(k) - r.row_begin) * P, pkt.value(k), P);
    }
    counters.applied += h.n;
  } else {
    ++counters.refused;
  }
  send_ack(static_cast<std::uint32_t>(src), h, s);
}

void ScatterUnit::on_packet(int src, std::span<const std::byte> bytes) {
  ScatterPacket pkt;
  if (!accept_bulk_packet(port_.region, port_.rank, src, bytes, concat::decode_scatter_packet,
                          &pkt)) {
    ++counters.malformed;
    return;
  }
  if (pkt.header.type == ScatterType::kUpdate) {
    on_update(src, pkt);
  } else {
    on_ack(src, pkt);
  }
}

// ---- failures ----------------------------------------------------------------------------
void ScatterUnit::watchdog(std::uint64_t now) {
  std::vector<std::pair<std::uint32_t, int>> done;
  for (const auto& [req, a] : active_) {
    if (a.cmd->deadline_ns <= now) {
      port_.sink->note_timeout();
      done.emplace_back(req, NS_WC_WATCHDOG_TIMEOUT);
      continue;
    }
    for (const Owner& o : a.owners) {
      if (o.packets != 0 && port_.peer_dead(o.node)) {
        done.emplace_back(req, NS_WC_TRANSPORT_ERR);
        break;
      }
    }
  }
  for (const auto& [req, status] : done) {
    active_.find(req)->second.cmd->status = status;
    finish(req, status);
  }
}

void ScatterUnit::fail_all(int status) {
  while (!active_.empty()) {
    const std::uint32_t req = active_.begin()->first;
    active_.begin()->second.cmd->status = status;
    finish(req, status);
  }
}

}  // namespace netsparse::rig
