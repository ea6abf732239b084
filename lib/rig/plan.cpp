#include "rig/plan.hpp"

namespace netsparse::rig {

Plan::Plan(std::uint32_t plan_id, const ns_send_wr& wr, std::uint32_t prop, const PostTarget* t)
    : id(plan_id),
      idx(wr.wr.rig.idx, wr.wr.rig.idx + wr.wr.rig.count),
      out(static_cast<std::byte*>(wr.wr.rig.out)),
      layout(wr.wr.rig.layout),
      window_base(wr.wr.rig.window_base),
      window_len(wr.wr.rig.window_len),
      prop_bytes(prop),
      flags(wr.send_flags & NS_SEND_REMOTE_ONLY),
      target(t) {}

void Plan::begin_recording(std::uint32_t nodes) {
  region_gen_ = 0;
  peers_.clear();
  peer_index_.assign(nodes, -1);
  local_.clear();
  copies_.clear();
}

void Plan::end_recording(bool ok, std::uint64_t gen, std::uint32_t v) {
  if (!ok) {
    begin_recording(static_cast<std::uint32_t>(peer_index_.size()));
    return;
  }
  region_gen_ = gen;
  version_ = v;
  for (PlanPeer& p : peers_) {
    p.installed = 0;
    // Contiguous destinations (a compact ghost buffer grouped by owner) land with one memcpy
    // per packet; their offset list is not needed then.
    p.contiguous = true;
    for (std::size_t k = 1; k < p.dst.size() && p.contiguous; ++k) {
      p.contiguous = p.dst[k] == p.dst[0] + k * prop_bytes;
    }
    if (p.contiguous && !p.dst.empty()) p.dst.resize(1);
  }
}

void Plan::add_remote(std::uint32_t owner, std::uint64_t row, std::uint64_t dst) {
  int& at = peer_index_[owner];
  if (at < 0) {
    at = static_cast<int>(peers_.size());
    peers_.emplace_back();
    peers_.back().owner = owner;
  }
  PlanPeer& p = peers_[static_cast<std::size_t>(at)];
  p.rows.push_back(row);
  p.dst.push_back(dst);
}

std::uint64_t Plan::remote_rows() const noexcept {
  std::uint64_t n = 0;
  for (const PlanPeer& p : peers_) n += p.rows.size();
  return n;
}

}  // namespace netsparse::rig
