#include "rig/plan_unit.hpp"

#include <algorithm>
#include <cstring>

#include "rig/copy.hpp"
#include "rig/region.hpp"
#include "rig/row_packing.hpp"

namespace netsparse::rig {

using concat::PlanHeader;
using concat::PlanPacket;
using concat::PlanRefusal;
using concat::PlanType;

void PlanUnit::region_changed() noexcept {
  ++region_gen_;
  stored_.clear();
  stored_per_peer_.clear();
}

bool PlanUnit::needs_recording(const Command& c) const noexcept {
  return c.plan->region_gen() != region_gen_;
}

// ---- client ----------------------------------------------------------------------------------
void PlanUnit::send_header_only(std::uint32_t dest, PlanType type, std::uint32_t plan,
                                std::uint32_t version, std::uint16_t seq, std::uint32_t first) {
  std::byte* at = outbox_.packet_room(dest, concat::kPlanHeaderBytes);
  concat::encode_plan_header(at,
                             PlanHeader{{type, dest, 0, 0, port_.rank}, plan, version, seq, first});
  outbox_.commit_packet(dest, concat::kPlanHeaderBytes);
  ++counters.packets_out;
  counters.bytes_out += concat::kPlanHeaderBytes;
}

void PlanUnit::send_arming_start(std::uint32_t owner, const Plan& p, std::uint32_t tag,
                                 std::uint32_t round, std::uint32_t list_rows) {
  constexpr std::size_t bytes = concat::kPlanHeaderBytes + 8;
  std::byte* at = outbox_.packet_room(owner, bytes);
  concat::encode_plan_header(
      at,
      PlanHeader{{PlanType::kStart, owner, 4, 2, port_.rank}, p.id, p.version(), p.seq, list_rows});
  concat::wire::store<std::uint32_t>(at + concat::kPlanHeaderBytes, tag);
  concat::wire::store<std::uint32_t>(at + concat::kPlanHeaderBytes + 4, round);
  outbox_.commit_packet(owner, bytes);
  ++counters.packets_out;
  counters.bytes_out += bytes;
}

void PlanUnit::send_install(std::uint32_t owner, const Plan& p, const PlanPeer& peer) {
  // 4-byte rows where the owner's rows fit (they almost always do), else 8.
  const std::uint64_t max_row = *std::max_element(peer.rows.begin(), peer.rows.end());
  const std::uint32_t width = max_row <= UINT32_MAX ? 4 : 8;
  const std::size_t per_packet = (outbox_.frame_capacity() - concat::kPlanHeaderBytes) / width;
  const std::size_t n_rows = peer.rows.size();
  for (std::size_t first = 0; first < n_rows; first += per_packet) {
    const auto n = static_cast<std::uint32_t>(std::min(per_packet, n_rows - first));
    const std::size_t bytes = concat::kPlanHeaderBytes + std::size_t{n} * width;
    std::byte* at = outbox_.packet_room(owner, bytes);
    concat::encode_plan_header(at, PlanHeader{{PlanType::kInstall, owner, width, n, port_.rank},
                                              p.id,
                                              p.version(),
                                              0,
                                              static_cast<std::uint32_t>(first)});
    std::byte* body = at + concat::kPlanHeaderBytes;
    for (std::uint32_t k = 0; k < n; ++k) {
      if (width == 4) {
        concat::wire::store<std::uint32_t>(body + 4 * k,
                                           static_cast<std::uint32_t>(peer.rows[first + k]));
      } else {
        concat::wire::store<std::uint64_t>(body + 8 * k, peer.rows[first + k]);
      }
    }
    outbox_.commit_packet(owner, bytes);
    ++counters.packets_out;
    counters.bytes_out += bytes;
  }
  ++counters.installs;
}

void PlanUnit::start(Command& c, std::uint64_t now) {
  Plan& p = *c.plan;
  const Region& r = *port_.region;
  const std::uint32_t P = r.prop_bytes;
  c.outstanding = 0;
  if (c.deadline_ns <= now) {
    port_.sink->note_timeout();
    c.status = NS_WC_WATCHDOG_TIMEOUT;
    port_.sink->complete(c);
    return;
  }
  for (const PlanPeer& peer : p.peers()) {
    if (port_.peer_dead(peer.owner)) {
      c.status = NS_WC_TRANSPORT_ERR;
      port_.sink->complete(c);
      return;
    }
  }
  ++counters.replays;
  p.active = &c;
  ++p.seq;
  const bool pushed = (c.flags & NS_SEND_PUSHED) != 0;
  for (PlanPeer& peer : p.peers()) {
    if (peer.rows.empty()) continue;
    if (peer.installed != p.version()) {
      send_install(peer.owner, p, peer);
      peer.installed = p.version();
      peer.pushed = 0;
    }
    if (pushed && peer.pushed == p.version()) {
      // The owner pushes this start: nothing leaves; what it pushed already is in place.
      if (!peer.early || peer.early_seq != p.seq) peer.arrived = 0;
      peer.early = false;
      ++counters.pushed_starts;
      if (peer.arrived < peer.rows.size()) ++c.outstanding;
      continue;
    }
    peer.early = false;
    peer.arrived = 0;
    peer.pushed = 0;
    peer.arming = pushed;
    ++counters.starts_sent;
    if (pushed) {
      send_arming_start(peer.owner, p, c.push_tag, c.push_round,
                        static_cast<std::uint32_t>(peer.rows.size()));
    } else {
      send_header_only(peer.owner, PlanType::kStart, p.id, p.version(), p.seq,
                       static_cast<std::uint32_t>(peer.rows.size()));
    }
    ++c.outstanding;
  }
  // This node's rows while the owners answer.
  for (const auto& [dst, row] : p.local()) copy_prop(c.out + dst, r.base + row * P, P);
  if (c.outstanding == 0) {
    finish(p, NS_WC_SUCCESS);
  } else {
    active_.push_back(&p);
  }
}

void PlanUnit::finish(Plan& p, int status) {
  Command& c = *p.active;
  p.active = nullptr;
  if (c.status == NS_WC_SUCCESS) c.status = status;
  if (c.status == NS_WC_SUCCESS) {
    const std::uint32_t P = p.prop_bytes;
    for (const auto& [dst, src] : p.copies()) copy_prop(c.out + dst, c.out + src, P);
  }
  const auto it = std::find(active_.begin(), active_.end(), &p);
  if (it != active_.end()) {
    *it = active_.back();
    active_.pop_back();
  }
  port_.sink->complete(c);
}

void PlanUnit::peer_done(Plan& p) {
  if (--p.active->outstanding == 0) finish(p, NS_WC_SUCCESS);
}

void PlanUnit::on_complete(Command& c) noexcept {
  Plan& p = *c.plan;
  if (c.recording) {
    const bool ok = c.status == NS_WC_SUCCESS;
    p.end_recording(ok, region_gen_, ok ? next_version_++ : 0);
    if (next_version_ == 0) next_version_ = 1;  // 0 means "none installed"
    if (ok) ++counters.recorded;
  }
  p.busy.store(false, std::memory_order_release);
}

PlanUnit::Answer PlanUnit::answer_to(int src, const PlanHeader& h) {
  const auto it = plans_.find(h.plan);
  Plan* p = it == plans_.end() ? nullptr : it->second;
  if (p == nullptr || p->active == nullptr || h.seq != p->seq || h.version != p->version()) {
    ++counters.stale;  // a start that completed (watchdog) or an older plan
    return {};
  }
  const int at = p->peer_of(static_cast<std::uint32_t>(src));
  if (at < 0) {
    ++counters.malformed;  // src sends nothing for this plan
    return {};
  }
  return {p, &p->peers()[static_cast<std::size_t>(at)]};
}

bool PlanUnit::land_early(int src, const PlanPacket& pkt) {
  // Rows an owner pushed for the plan's next start, before it was posted (ns_plan_push): they
  // land now (the output is the plan's own, and the pusher's fence guarantees it is free).
  const PlanHeader& h = pkt.header;
  const auto it = plans_.find(h.plan);
  if (it == plans_.end()) return false;
  Plan& p = *it->second;
  const std::uint16_t next = static_cast<std::uint16_t>(p.seq + 1);
  if (p.active != nullptr || h.seq != next || h.version != p.version() || !p.recorded()) {
    return false;
  }
  const int at = p.peer_of(static_cast<std::uint32_t>(src));
  if (at < 0) return false;
  PlanPeer& peer = p.peers()[static_cast<std::size_t>(at)];
  if (peer.pushed != h.version) return false;
  if (!peer.early || peer.early_seq != next) {
    peer.early = true;
    peer.early_seq = next;
    peer.arrived = 0;
  }
  if (h.first != peer.arrived || h.n > peer.rows.size() - peer.arrived) {
    ++counters.malformed;  // out of order: the start will wait for the rest (watchdog)
    return true;
  }
  land(p, peer, pkt);
  ++counters.rows_early;
  return true;
}

void PlanUnit::land(Plan& p, PlanPeer& peer, const PlanPacket& pkt) {
  const PlanHeader& h = pkt.header;
  std::byte* const out = p.out;
  const std::uint32_t P = p.prop_bytes;
  const std::byte* body = pkt.body.data();
  if (peer.contiguous) {
    std::memcpy(out + peer.dst[0] + std::uint64_t{h.first} * P, body, std::size_t{h.n} * P);
  } else {
    const std::uint64_t* dst = peer.dst.data() + h.first;
    constexpr std::uint32_t kPrefetch = 8;  // destinations are scattered: overlap the misses
    for (std::uint32_t k = 0; k < h.n; ++k) {
      if (k + kPrefetch < h.n) __builtin_prefetch(out + dst[k + kPrefetch], 1);
      copy_prop(out + dst[k], body + std::size_t{k} * P, P);
    }
  }
  peer.arrived += h.n;
  counters.rows_in += h.n;
}

void PlanUnit::on_rows(int src, const PlanPacket& pkt) {
  const PlanHeader& h = pkt.header;
  if (land_early(src, pkt)) return;
  const auto [p, found] = answer_to(src, h);
  if (p == nullptr) return;
  PlanPeer& peer = *found;
  // In order, within the list: anything else is a broken owner; the start fails, nothing lands.
  if (h.first != peer.arrived || h.n > peer.rows.size() - peer.arrived) {
    ++counters.malformed;
    p->active->status = NS_WC_TRANSPORT_ERR;
    peer.arrived = static_cast<std::uint32_t>(peer.rows.size());
    peer_done(*p);
    return;
  }
  land(*p, peer, pkt);
  if (peer.arrived == peer.rows.size()) {
    if (peer.arming) {  // answered whole: the owner pushes the next starts
      peer.arming = false;
      peer.pushed = h.version;
    }
    peer_done(*p);
  }
}

void PlanUnit::on_refuse(int src, const PlanPacket& pkt) {
  const auto [p, found] = answer_to(src, pkt.header);
  if (p == nullptr) return;
  PlanPeer& peer = *found;
  // The owner lost or refused the list: the next start installs it again (and asks).
  peer.installed = 0;
  peer.pushed = 0;
  peer.arming = false;
  if (peer.arrived == peer.rows.size()) return;  // already done (cannot happen with ordering)
  peer.arrived = static_cast<std::uint32_t>(peer.rows.size());
  p->active->status = NS_WC_REM_INV_REQ;
  peer_done(*p);
}

// ---- owner -----------------------------------------------------------------------------------
void PlanUnit::on_install(int src, const PlanPacket& pkt) {
  const PlanHeader& h = pkt.header;
  const std::uint64_t key = (std::uint64_t(static_cast<std::uint32_t>(src)) << 32) | h.plan;
  auto it = stored_.find(key);
  if (it == stored_.end()) {
    std::size_t& n = stored_per_peer_[static_cast<std::uint32_t>(src)];
    if (n == kMaxStoredPerPeer) {
      ++counters.malformed;  // a peer never has this many plans: refused at its kStart
      return;
    }
    ++n;
    it = stored_.emplace(key, Stored{}).first;
  }
  Stored& s = it->second;
  if (s.version != h.version) {  // a new recording replaces the old list
    s.version = h.version;
    s.bad = PlanRefusal{};
    s.rows.clear();
    s.armed = false;
  }
  if (s.bad != PlanRefusal{}) return;
  if (h.first != s.rows.size()) {
    s.bad = PlanRefusal::kBadList;
    return;
  }
  const Region& r = *port_.region;
  const std::byte* b = pkt.body.data();
  for (std::uint32_t k = 0; k < h.n; ++k) {
    const std::uint64_t row = h.rec_len == 4 ? concat::wire::load<std::uint32_t>(b + 4 * k)
                                             : concat::wire::load<std::uint64_t>(b + 8 * k);
    if (row >= r.local_rows) {  // checked once here, so serving never reads outside the rows
      s.bad = PlanRefusal::kOutOfRange;
      s.rows.clear();
      return;
    }
    s.rows.push_back(row);
  }
}

void PlanUnit::on_start(int src, const PlanPacket& pkt) {
  const PlanHeader& h = pkt.header;
  const auto dest = static_cast<std::uint32_t>(src);
  const std::uint64_t key = (std::uint64_t(dest) << 32) | h.plan;
  const auto it = stored_.find(key);
  PlanRefusal why{};
  if (it == stored_.end() || it->second.version != h.version) {
    why = PlanRefusal::kUnknown;
  } else if (it->second.bad != PlanRefusal{}) {
    why = it->second.bad;
  } else if (it->second.rows.size() != h.first) {
    why = PlanRefusal::kBadList;
  }
  if (why != PlanRefusal{}) {
    ++counters.refused;
    send_header_only(dest, PlanType::kRefuse, h.plan, h.version, h.seq,
                     static_cast<std::uint32_t>(why));
    return;
  }
  Stored& s = it->second;
  s.armed = h.n == 2;  // a start with a push tag: its later rounds are pushed (ns_plan_push)
  if (s.armed) {
    s.push_tag = concat::wire::load<std::uint32_t>(pkt.body.data());
    s.armed_round = concat::wire::load<std::uint32_t>(pkt.body.data() + 4);
    s.armed_seq = h.seq;
  }
  answer(Serving{key, dest, h.plan, h.version, h.seq, 0});
}

void PlanUnit::answer(Serving job) {
  // Behind an earlier answer to the same peer: its rows are in the ring's order first.
  if (serving_.waiting_for(job.dest) || !serve_one(job)) serving_.push(job);
}

int PlanUnit::push(std::uint32_t tag, std::uint32_t round) {
  int lists = 0;
  // Rounds up to the arming one were asked for (an arming start of this very round may have
  // arrived before this call: pushing it now would answer the peer's next start early).
  const auto pushed = [&](const Stored& s) {
    return s.armed && s.push_tag == tag && s.bad == PlanRefusal{} &&
           static_cast<std::int32_t>(round - s.armed_round) > 0;
  };
  // The rows pushed to each peer this round, so that each answer asks its frame for the rest of
  // the peer's (stored_ is ordered by peer: a peer's lists are consecutive).
  const std::size_t row_bytes = port_.region != nullptr ? port_.region->prop_bytes : 0;
  const auto bytes_of = [&](const Stored& s) {
    return s.rows.size() * row_bytes + concat::kPlanHeaderBytes;
  };
  std::size_t after = 0;
  std::uint32_t after_dest = ~0u;
  for (auto it = stored_.begin(); it != stored_.end(); ++it) {
    auto& [key, s] = *it;
    if (!pushed(s)) continue;
    const auto dest = static_cast<std::uint32_t>(key >> 32);
    if (outbox_.dead(dest)) continue;
    if (dest != after_dest) {  // the first of dest's lists: the bytes of the others
      after_dest = dest;
      after = 0;
      for (auto later = std::next(it); later != stored_.end() && (later->first >> 32) == dest;
           ++later)
        if (pushed(later->second)) after += bytes_of(later->second);
    } else {
      after -= std::min(after, bytes_of(s));
    }
    const auto ahead = static_cast<std::int32_t>(round - s.armed_round);
    const auto seq = static_cast<std::uint16_t>(s.armed_seq + static_cast<std::uint32_t>(ahead));
    answer(Serving{key, dest, static_cast<std::uint32_t>(key), s.version, seq, 0, after});
    ++lists;
  }
  counters.pushes += static_cast<std::uint64_t>(lists);
  return lists;
}

bool PlanUnit::serve_one(Serving& job) {
  const auto it = stored_.find(job.key);
  if (it == stored_.end() || it->second.version != job.version || it->second.bad != PlanRefusal{}) {
    // The list went while its answer was being packed (the region changed, or the peer
    // recorded again): what is left is refused, never read from a region that may be gone.
    ++counters.refused;
    send_header_only(job.dest, PlanType::kRefuse, job.plan, job.version, job.seq,
                     static_cast<std::uint32_t>(PlanRefusal::kUnknown));
    return true;
  }
  if (outbox_.dead(job.dest)) return true;  // nobody to answer
  const std::vector<std::uint64_t>& rows = it->second.rows;
  const Region& r = *port_.region;
  PackTally tally;
  const bool done = pack_rows(
      outbox_, job.dest, r, concat::kPlanHeaderBytes, rows.size(), job.next,
      [&](std::size_t k) { return rows[k]; },
      [&](std::byte* at, std::size_t first, std::size_t n) {
        concat::encode_plan_header(at, PlanHeader{{PlanType::kRows, job.dest, r.prop_bytes,
                                                   static_cast<std::uint32_t>(n), port_.rank},
                                                  job.plan,
                                                  job.version,
                                                  job.seq,
                                                  static_cast<std::uint32_t>(first)});
      },
      tally, job.after);
  counters.packets_out += tally.packets;
  counters.bytes_out += tally.bytes;
  counters.rows_served += tally.rows;
  counters.rows_queued += tally.rows_queued;
  return done;
}

std::size_t PlanUnit::serve() {
  if (serving_.empty()) return 0;
  const std::uint64_t before = counters.packets_out;
  serving_.pack_more([&](Serving& job) { return serve_one(job); });
  return static_cast<std::size_t>(counters.packets_out - before);
}

void PlanUnit::on_packet(int src, std::span<const std::byte> bytes, std::uint64_t) {
  PlanPacket pkt;
  if (!accept_bulk_packet(port_.region, port_.rank, src, bytes, concat::decode_plan_packet, &pkt)) {
    ++counters.malformed;
    return;
  }
  switch (pkt.header.type) {
    case PlanType::kInstall:
      on_install(src, pkt);
      return;
    case PlanType::kStart:
      on_start(src, pkt);
      return;
    case PlanType::kRows:
      on_rows(src, pkt);
      return;
    case PlanType::kRefuse:
      on_refuse(src, pkt);
      return;
  }
}

// ---- failures --------------------------------------------------------------------------------
void PlanUnit::watchdog(std::uint64_t now) {
  for (std::size_t k = active_.size(); k-- > 0;) {
    Plan& p = *active_[k];
    int status = NS_WC_SUCCESS;
    if (p.active->deadline_ns <= now) {
      port_.sink->note_timeout();
      status = NS_WC_WATCHDOG_TIMEOUT;
    } else {
      for (const PlanPeer& peer : p.peers()) {
        if (peer.arrived < peer.rows.size() && port_.peer_dead(peer.owner)) {
          status = NS_WC_TRANSPORT_ERR;
        }
      }
    }
    if (status != NS_WC_SUCCESS) {
      p.active->status = status;
      finish(p, status);
    }
  }
}

void PlanUnit::fail_all(int status) {
  serving_.clear();  // the engine failed: nothing more leaves
  while (!active_.empty()) {
    Plan& p = *active_.back();
    p.active->status = status;
    finish(p, status);
  }
}

}  // namespace netsparse::rig
