// A RIG client unit (MICRO '25 §5.1-5.3): takes RIG commands, copies chunks of idxs into its Idx
// buffer, filters and coalesces them, solves each owner, registers the PR in its Pending PR
// Table and pushes it to the concatenation point; writes responses to the host's buffer, sets
// the filter bits and completes the command when every PR was generated and answered.
#include <algorithm>
#include <bit>
#include <cstring>

#include "rig/copy.hpp"
#include "rig/engine.hpp"

namespace netsparse::rig {

// ---- PositionMap ---------------------------------------------------------------------------
bool PositionMap::begin_command(std::uint64_t count) {
  if (count > UINT32_MAX) return false;
  const std::size_t want = std::clamp<std::size_t>(
      std::bit_ceil(static_cast<std::size_t>(std::min<std::uint64_t>(count, kMaxSlots)) * 2), 1024,
      kMaxSlots);
  if (slots_.size() < want) {  // grows only; generation tags make old contents stale
    slots_.assign(want, Slot{0, 0, 0});
    bloom_.assign(want * 4 / 64, 0);
    gen_ = 0;
  }
  // This command uses a prefix of the table sized to it, so clearing its Bloom bits is O(count).
  mask_ = want - 1;
  shift_ = 64 - std::countr_zero(want);
  bloom_shift_ = shift_ - 2;  // 4 Bloom bits per slot
  if (++gen_ == 0) {          // wrapped: really clear once every 2^32 commands
    for (Slot& s : slots_) s.gen = 0;
    gen_ = 1;
  }
  std::fill_n(bloom_.begin(), want * 4 / 64, 0);
  used_ = 0;
  return true;
}

void PositionMap::insert(std::uint64_t idx, std::uint64_t pos) noexcept {
  if (2 * (used_ + 1) > mask_ + 1) return;  // keep probes short; a miss only costs filtering
  const std::uint64_t b = bloom_bit(idx);
  bloom_[b >> 6] |= std::uint64_t{1} << (b & 63);
  for (std::size_t h = home(idx);; h = (h + 1) & mask_) {
    Slot& s = slots_[h];
    if (s.gen != gen_) {
      s = Slot{idx, static_cast<std::uint32_t>(pos), gen_};
      ++used_;
      return;
    }
    if (s.idx == idx) return;
  }
}

// ---- ClientUnit ----------------------------------------------------------------------------
ClientUnit::ClientUnit(Engine& engine, std::uint16_t id, const Config& config)
    : engine_(engine),
      id_(id),
      config_(config),
      pending_(config.pending_entries),
      idx_buf_(config.idx_chunk),
      slots_(kUnitSlots) {
  retry_.reserve(4 * std::size_t{config.pending_entries});
}

void ClientUnit::take(Command& cmd) {
  std::uint32_t s = 0;
  while (slots_[s].cmd != nullptr) ++s;  // can_take() guaranteed a free slot
  slots_[s].cmd = &cmd;
  --free_slots_;
  ++live_;
  current_ = &cmd;
  current_slot_ = s;
  chunk_start_ = 0;
  chunk_len_ = 0;
  chunk_pos_ = 0;
  stalled_ = false;
  dedup_ = cmd.layout == NS_RIG_LAYOUT_POSITIONAL && config_.filter_on() &&
           positions_.begin_command(cmd.count);
}

std::size_t ClientUnit::generate(std::uint64_t now) {
  if (!retry_.empty()) {
    retry_drained(now);
    // Generation waits until every drained waiter is pending again: the positional
    // de-duplication relies on "not pending" meaning "already answered".
    if (!retry_.empty()) return 0;
  }
  if (current_ == nullptr) return 0;
  Command& c = *current_;
  std::size_t processed = 0;
  if (c.status == NS_WC_SUCCESS) {
    if (chunk_pos_ == chunk_len_) {
      // The "DMA" of the next chunk of idxs into the Idx buffer.
      const std::uint64_t next = chunk_start_ + chunk_len_;
      const auto n =
          static_cast<std::size_t>(std::min<std::uint64_t>(idx_buf_.size(), c.count - next));
      std::memcpy(idx_buf_.data(), c.idx + next, n * sizeof(std::uint64_t));
      chunk_start_ = next;
      chunk_len_ = n;
      chunk_pos_ = 0;
    }
    const std::size_t before = chunk_pos_;
    run_chunk(now);
    processed = chunk_pos_ - before;
  }
  if (c.status != NS_WC_SUCCESS ||
      (chunk_pos_ == chunk_len_ && chunk_start_ + chunk_len_ == c.count)) {
    c.generated = true;
    current_ = nullptr;
    maybe_finish(current_slot_);
    ++processed;
  }
  return processed;
}

void ClientUnit::push_read(int owner, std::uint64_t idx, std::uint32_t entry, std::uint64_t now) {
  engine_.concat().push(
      concat::PrType::kRead, static_cast<std::uint32_t>(owner),
      concat::PrHeader{static_cast<std::uint32_t>(engine_.rank()), id_, idx, entry}, nullptr, now);
}

bool ClientUnit::run_chunk(std::uint64_t now) {
  Command& c = *current_;
  Region& r = *c.mr;
  const std::uint32_t P = r.prop_bytes;
  const std::uint64_t total = r.solver.total_rows();
  const int self = engine_.rank();
  const bool indexed = c.layout == NS_RIG_LAYOUT_INDEXED;
  const bool dedup = dedup_;
  const bool coalesce = config_.coalesce_on();
  ClientCounters& k = counters;
  // Rows of this node are read from host memory at random: prefetch a few idxs ahead so the
  // local copies overlap their cache misses (the remote ones go to the concatenation queue).
  constexpr std::size_t kPrefetch = 8;
  const std::uint64_t local_rows = r.local_rows;
  for (; chunk_pos_ < chunk_len_; ++chunk_pos_) {
    if (chunk_pos_ + kPrefetch < chunk_len_) {
      const std::uint64_t ahead = idx_buf_[chunk_pos_ + kPrefetch] - r.row_begin;
      if (ahead < local_rows) __builtin_prefetch(r.base + ahead * P);
    }
    const std::uint64_t j = chunk_start_ + chunk_pos_;
    const std::uint64_t i = idx_buf_[chunk_pos_];
    std::byte* dst;
    if (indexed) {
      const std::uint64_t off = i - c.window_base;
      if (off >= c.window_len) {
        c.status = NS_WC_LOC_INV_REQ;
        c.bad_pos = j;
        return true;
      }
      dst = c.out + off * P;
      if (c.use_filter && i < total && r.filter.test(i)) {
        ++k.requested;
        ++k.filtered;
        continue;
      }
    } else {
      dst = c.out + j * P;
    }
    const int owner = r.solver.owner(i);
    if (owner == self) {
      ++k.requested;
      ++k.local;
      if (i >= r.row_end) {  // beyond every row (mapped to the last node, which is us)
        ++k.invalid_local;
        c.status = NS_WC_REM_INV_REQ;
        return true;
      }
      copy_prop(dst, r.base + (i - r.row_begin) * P, P);
      if (c.use_filter) r.filter.set(i);
      continue;
    }
    if (engine_.peer_dead(owner)) {
      c.status = NS_WC_TRANSPORT_ERR;
      return true;
    }
    const std::uint64_t w = waiter(current_slot_, j);
    if (dedup) {
      const std::uint64_t first = positions_.find(i);
      if (first != UINT64_MAX) {
        const filter::PendingResult res = pending_.insert(i, w);
        if (res.kind == filter::PendingInsert::kFull) break;
        ++k.requested;
        if (res.kind == filter::PendingInsert::kNew) {
          // Nothing pending for idx although an earlier position asked for it: that position
          // has its property already. Release the entry again and copy locally.
          pending_.complete(res.entry, [](std::uint64_t) {});
          copy_prop(dst, c.out + first * P, P);
          ++k.filtered;
          continue;
        }
        ++c.outstanding;
        if (coalesce) {
          ++k.coalesced;
        } else {
          push_read(owner, i, res.entry, now);
          ++k.sent;
        }
        continue;
      }
    }
    const filter::PendingResult res = pending_.insert(i, w);
    if (res.kind == filter::PendingInsert::kFull) break;
    ++k.requested;
    ++c.outstanding;
    if (res.kind == filter::PendingInsert::kNew) {
      push_read(owner, i, res.entry, now);
      ++k.sent;
    } else if (coalesce) {
      ++k.coalesced;
    } else {
      push_read(owner, i, res.entry, now);  // ablation: the duplicate goes on the wire too
      ++k.sent;
    }
    if (dedup) positions_.insert(i, j);
  }
  if (chunk_pos_ < chunk_len_) {
    // Pending PR Table full: stop taking idxs from this command until responses free entries.
    if (!stalled_) ++k.stalls;
    stalled_ = true;
    return false;
  }
  stalled_ = false;
  return true;
}

void ClientUnit::on_response(const concat::PrHeader& pr, const std::byte* payload, bool invalid) {
  ++counters.responses;
  Region* r = engine_.region();
  if (r == nullptr || !pending_.matches(pr.req_id, pr.idx)) {
    ++counters.stale_responses;  // late (after a watchdog drain), duplicate or forged
    return;
  }
  stalled_ = false;
  const std::uint32_t P = r->prop_bytes;
  pending_.complete(pr.req_id, [&](std::uint64_t w) {
    const auto s = static_cast<std::uint32_t>(w >> 48);
    const auto epoch = static_cast<std::uint8_t>(w >> kWaiterPosBits);
    const std::uint64_t pos = w & (kMaxWrCount - 1);
    Slot& slot = slots_[s];
    if (slot.cmd == nullptr || slot.epoch != epoch) {
      ++counters.stale_waiters;
      return;
    }
    Command& c = *slot.cmd;
    if (invalid) {
      if (c.status == NS_WC_SUCCESS) c.status = NS_WC_REM_INV_REQ;
    } else if (c.layout == NS_RIG_LAYOUT_INDEXED) {
      copy_prop(c.out + (pr.idx - c.window_base) * P, payload, P);
      if (c.use_filter) r->filter.set(pr.idx);
    } else {
      copy_prop(c.out + pos * P, payload, P);
    }
    if (--c.outstanding == 0 && c.generated) finish_slot(s);
  });
}

void ClientUnit::maybe_finish(std::uint32_t slot) {
  Command* c = slots_[slot].cmd;
  if (c != nullptr && c->generated && c->outstanding == 0) finish_slot(slot);
}

void ClientUnit::finish_slot(std::uint32_t slot) {
  Command* c = slots_[slot].cmd;
  slots_[slot].cmd = nullptr;
  ++slots_[slot].epoch;  // waiters still naming this slot are now stale
  ++free_slots_;
  --live_;
  if (current_ == c) current_ = nullptr;
  engine_.finish(*c);
}

int ClientUnit::watchdog(std::uint64_t now) {
  int expired = 0;
  for (std::uint32_t s = 0; s < kUnitSlots; ++s) {
    Command* c = slots_[s].cmd;
    if (c == nullptr || c->deadline_ns > now) continue;
    c->status = NS_WC_WATCHDOG_TIMEOUT;
    engine_.note_timeout();
    finish_slot(s);
    ++expired;
  }
  if (expired > 0 && pending_.size() > 0) {
    // The expired commands' entries may never be answered (a dead peer): free the whole table
    // and ask again for what the commands still alive wait for. A late answer to a drained
    // entry no longer matches (or matches a re-issued entry for the same idx: same property).
    pending_.drain([&](std::uint64_t idx, std::uint64_t w) {
      const auto s = static_cast<std::uint32_t>(w >> 48);
      const auto epoch = static_cast<std::uint8_t>(w >> kWaiterPosBits);
      if (slots_[s].cmd != nullptr && slots_[s].epoch == epoch) retry_.emplace_back(idx, w);
    });
    stalled_ = false;
  }
  return expired;
}

void ClientUnit::retry_drained(std::uint64_t now) {
  Region* r = engine_.region();
  std::size_t k = 0;
  for (; k < retry_.size(); ++k) {
    const auto [idx, w] = retry_[k];
    const auto s = static_cast<std::uint32_t>(w >> 48);
    const auto epoch = static_cast<std::uint8_t>(w >> kWaiterPosBits);
    Command* c = slots_[s].cmd;
    if (c == nullptr || slots_[s].epoch != epoch || r == nullptr) continue;
    const int owner = r->solver.owner(idx);
    if (engine_.peer_dead(owner)) {
      if (c->status == NS_WC_SUCCESS) c->status = NS_WC_TRANSPORT_ERR;
      if (--c->outstanding == 0 && c->generated) finish_slot(s);
      continue;
    }
    const filter::PendingResult res = pending_.insert(idx, w);
    if (res.kind == filter::PendingInsert::kFull) break;
    if (res.kind == filter::PendingInsert::kNew || !config_.coalesce_on()) {
      push_read(owner, idx, res.entry, now);
      ++counters.retried;
    }
  }
  retry_.erase(retry_.begin(), retry_.begin() + static_cast<std::ptrdiff_t>(k));
}

void ClientUnit::fail_all(int status) {
  for (std::uint32_t s = 0; s < kUnitSlots; ++s) {
    if (slots_[s].cmd == nullptr) continue;
    slots_[s].cmd->status = status;
    finish_slot(s);
  }
  pending_.drain([](std::uint64_t, std::uint64_t) {});
  retry_.clear();
}

}  // namespace netsparse::rig
