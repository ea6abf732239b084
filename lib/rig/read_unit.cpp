#include "rig/read_unit.hpp"

#include "rig/copy.hpp"
#include "rig/region.hpp"

namespace netsparse::rig {

namespace {
constexpr int kPollReads = 64;
}

ReadUnit::ReadUnit(const UnitPort& port, transport::Transport& tx)
    : port_(port), tx_(tx), completions_(kPollReads) {}

void ReadUnit::finish(Command& c, int status) {
  c.status = status;
  port_.sink->complete(c);
}

bool ReadUnit::start(Command& c, std::uint64_t now) {
  Region& r = *c.mr;
  const std::uint64_t i = c.read_idx;
  const std::uint32_t P = r.prop_bytes;
  ++reads_;
  if (i >= r.solver.total_rows()) {
    finish(c, NS_WC_REM_INV_REQ);
    return true;
  }
  const int owner = r.solver.owner(i);
  if (owner == static_cast<int>(port_.rank)) {
    copy_prop(c.out, r.base + (i - r.row_begin) * P, P);
    finish(c, NS_WC_SUCCESS);
    return true;
  }
  if (port_.peer_dead(static_cast<std::uint32_t>(owner))) {
    finish(c, NS_WC_TRANSPORT_ERR);
    return true;
  }
  if (c.deadline_ns <= now) {
    port_.sink->note_timeout();
    finish(c, NS_WC_WATCHDOG_TIMEOUT);
    return true;
  }
  if (free_.empty()) {
    if (slots_.size() >= kMaxSlots) {  // all busy: retried later
      --reads_;
      return false;
    }
    slots_.emplace_back();
    free_.push_back(static_cast<std::uint32_t>(slots_.size() - 1));
  }
  const std::uint32_t slot = free_.back();
  Slot& s = slots_[slot];
  s.bounce.resize(P);
  const std::uint64_t offset = (i - r.solver.begin(owner)) * P;
  switch (tx_.read(owner, r.tx_region, offset, s.bounce.data(), P, slot)) {
    case transport::TxStatus::kOk:
      free_.pop_back();
      s.cmd = &c;
      s.busy = true;
      ++outstanding_;
      return true;
    case transport::TxStatus::kNoResource:
      --reads_;
      return false;  // retried on a later step, in order
    case transport::TxStatus::kPeerFailed:
      port_.mark_dead(static_cast<std::uint32_t>(owner));
      port_.sink->note_failure();
      finish(c, NS_WC_TRANSPORT_ERR);
      return true;
    case transport::TxStatus::kError:
      finish(c, NS_WC_TRANSPORT_ERR);
      return true;
  }
  return true;
}

std::size_t ReadUnit::poll() {
  if (outstanding_ == 0) return 0;
  const int n = tx_.poll_reads(completions_.data(), static_cast<int>(completions_.size()));
  for (int k = 0; k < n; ++k) {
    const transport::ReadCompletion& rc = completions_[static_cast<std::size_t>(k)];
    if (rc.cookie >= slots_.size()) continue;
    Slot& s = slots_[rc.cookie];
    s.busy = false;
    free_.push_back(static_cast<std::uint32_t>(rc.cookie));
    --outstanding_;
    Command* c = s.cmd;
    s.cmd = nullptr;
    if (c == nullptr) continue;  // abandoned at its deadline: the late data is discarded
    if (rc.ok) copy_prop(c->out, s.bounce.data(), c->mr->prop_bytes);
    finish(*c, rc.ok ? NS_WC_SUCCESS : NS_WC_TRANSPORT_ERR);
  }
  return n > 0 ? static_cast<std::size_t>(n) : 0;
}

void ReadUnit::watchdog(std::uint64_t now) {
  for (Slot& s : slots_) {
    if (s.cmd == nullptr || s.cmd->deadline_ns > now) continue;
    Command* c = s.cmd;
    s.cmd = nullptr;  // abandoned: a late answer lands in the bounce buffer and is dropped
    port_.sink->note_timeout();
    finish(*c, NS_WC_WATCHDOG_TIMEOUT);
  }
}

void ReadUnit::fail_all(int status) {
  for (Slot& s : slots_) {
    if (s.cmd == nullptr) continue;
    Command* c = s.cmd;
    s.cmd = nullptr;  // abandoned: the transport may still write into the bounce buffer
    finish(*c, status);
  }
}

}  // namespace netsparse::rig
