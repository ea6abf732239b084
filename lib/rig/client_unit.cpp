#include "rig/client_unit.hpp"

#include <algorithm>
#include <bit>
#include <cstring>

#include "rig/copy.hpp"
#include "rig/outbox.hpp"
#include "rig/plan.hpp"
#include "rig/region.hpp"

namespace netsparse::rig {

// ---- WrDedup -------------------------------------------------------------------------------
void WrDedup::begin(std::uint64_t total_rows, std::uint64_t count) {
  use_bitmap_ = filter::RowStateFilter::bytes_for(total_rows) <= kMaxBitmapBytes;
  if (use_bitmap_) {
    if (seen_.size() != total_rows) {
      seen_.resize(total_rows);
    } else {
      seen_.new_epoch();
    }
  }
  firsts_.clear();
  count_ = count;
  map_built_ = false;
  if (!use_bitmap_) build_map();
}

void WrDedup::build_map() {
  constexpr std::size_t kMaxSlots = std::size_t{1} << 22;
  const std::size_t want = std::clamp<std::size_t>(
      std::bit_ceil(static_cast<std::size_t>(std::min<std::uint64_t>(count_, kMaxSlots / 2)) * 2),
      1024, kMaxSlots);
  if (slots_.size() < want) {  // grows only; generation tags make old contents stale
    slots_.assign(want, Slot{0, Hit{0, 0}, 0});
    gen_ = 0;
  }
  mask_ = want - 1;
  shift_ = 64 - std::countr_zero(want);
  if (++gen_ == 0) {  // wrapped: really clear once every 2^32 builds
    for (Slot& s : slots_) s.gen = 0;
    gen_ = 1;
  }
  used_ = 0;
  map_built_ = true;
  for (const auto& [idx, hit] : firsts_) map_insert(idx, hit);
  firsts_.clear();
}

const WrDedup::Hit* WrDedup::map_find(std::uint64_t idx) const noexcept {
  for (std::size_t h = home(idx);; h = (h + 1) & mask_) {
    const Slot& s = slots_[h];
    if (s.gen != gen_) return nullptr;
    if (s.idx == idx) return &s.hit;
  }
}

void WrDedup::map_insert(std::uint64_t idx, Hit hit) noexcept {
  if (2 * (used_ + 1) > mask_ + 1) return;  // keep probes short; a miss only costs filtering
  for (std::size_t h = home(idx);; h = (h + 1) & mask_) {
    Slot& s = slots_[h];
    if (s.gen != gen_) {
      s = Slot{idx, hit, gen_};
      ++used_;
      return;
    }
    if (s.idx == idx) return;
  }
}

const WrDedup::Hit* WrDedup::find_repeat(std::uint64_t idx) {
  if (!map_built_) build_map();
  return map_find(idx);
}

// ---- ClientUnit ----------------------------------------------------------------------------
ClientUnit::ClientUnit(const UnitPort& port, std::uint16_t id, const Config& config)
    : port_(port), id_(id), config_(config), slots_(kUnitSlots), compact_(config.compact_wire()) {
  const std::uint32_t n = config.pending_entries;
  if (!compact_) {  // the compact wire keeps one record per read instead (Batch)
    entries_.assign(n, Entry{0, 0, 0, 0, 0, false});
    free_.reserve(n);
    for (std::uint32_t e = n; e-- > 0;) free_.push_back(e);
  }
  id_bits_ = std::max(1u, static_cast<unsigned>(std::bit_width(n - 1)));
  id_mask_ = (std::uint32_t{1} << id_bits_) - 1;
  gen_mask_ = id_bits_ >= 32 ? 0 : (std::uint32_t{0xFFFFFFFFu} >> id_bits_);
  if (compact_) {
    // A read is one software packet of at most packet_bytes with 4 B rows (8 B rows must still
    // fit one frame); without concatenation every PR is a read of its own.
    const std::size_t frame = port.outbox != nullptr ? port.outbox->frame_capacity() : 65536;
    const std::size_t cap =
        std::min<std::size_t>({(config.packet_bytes - concat::kGatherHeaderBytes) / 4,
                               (frame - concat::kGatherHeaderBytes) / 8, std::size_t{n}});
    batch_cap_ = config.concat_on() ? static_cast<std::uint32_t>(std::max<std::size_t>(1, cap)) : 1;
    max_batches_ = std::min<std::uint32_t>(n, 1u << kBatchIndexBits);
    open_.assign(port.size, kNoBatch);
  }
}

void ClientUnit::take(Command& cmd) {
  std::uint32_t s = 0;
  while (slots_[s].cmd != nullptr) ++s;  // can_take() guaranteed a free slot
  slots_[s].cmd = &cmd;
  slots_[s].copies.clear();
  --free_slots_;
  ++live_;
  current_ = &cmd;
  current_slot_ = s;
  next_ = 0;
  stalled_ = false;
  cmd_walked_ = cmd_repeats_ = 0;
  if (cmd.filter == FilterUse::kPerWr && skip_dedup(cmd)) {
    cmd.filter = FilterUse::kNone;
    ++counters.dedup_skipped;
  }
  if (cmd.filter == FilterUse::kPerWr) dedup_.begin(cmd.mr->solver.total_rows(), cmd.count);
}

bool ClientUnit::bulk_eligible(const Command& cmd) const noexcept {
  return compact_ && cmd.layout != NS_RIG_LAYOUT_INDEXED && !cmd.recording &&
         (cmd.flags & NS_SEND_REMOTE_ONLY) == 0;
}

bool ClientUnit::skip_dedup(const Command& cmd) noexcept {
  constexpr std::uint64_t kMinWalked = 4096;  // a measure of at least this many idxs
  constexpr std::uint32_t kProbeEvery = 8;
  if (!bulk_eligible(cmd) || walked_window_ < kMinWalked || repeat_window_ * 100 >= walked_window_)
    return false;
  return ++since_probe_ % kProbeEvery != 0;
}

std::size_t ClientUnit::generate(std::uint64_t now) {
  if (current_ == nullptr) return 0;
  Command& c = *current_;
  std::size_t processed = 0;
  if (c.status == NS_WC_SUCCESS) {
    const std::uint64_t before = next_;
    run(c, now, config_.idx_chunk);
    processed = static_cast<std::size_t>(next_ - before);
  }
  if (c.status != NS_WC_SUCCESS || next_ == c.count) {
    if (cmd_walked_ > 0) {  // a de-duplicated bulk walk: skip_dedup's measure
      walked_window_ = walked_window_ / 2 + cmd_walked_;
      repeat_window_ = repeat_window_ / 2 + cmd_repeats_;
    }
    if (compact_) send_open_batches();
    c.generated = true;
    c.mr->generated(c);
    current_ = nullptr;
    maybe_finish(current_slot_);
    ++processed;
  }
  return processed;
}

// The hot loop of the engine (one pass per idx; docs/benchmarks.md has its profile). It stays
// one function on purpose: split into calls per idx, the compiler keeps the per-command state
// (window, filter words, counters) in memory instead of registers, and every idx pays for it.
bool ClientUnit::run(Command& c, std::uint64_t now, std::uint64_t budget) {
  const std::uint64_t stop = std::min(c.count, next_ + budget);
  if ((c.filter == FilterUse::kNone || c.filter == FilterUse::kPerWr) && bulk_eligible(c)) {
    return c.filter == FilterUse::kPerWr ? run_bulk_sized<true>(c, stop)
                                         : run_bulk_sized<false>(c, stop);
  }
  Region& r = *c.mr;
  filter::RowStateFilter& rows = r.rows();
  concat::ConcatPoint& cp = *port_.concat;
  const std::uint32_t P = r.prop_bytes;
  const std::uint64_t total = r.solver.total_rows();
  const auto self = static_cast<int>(port_.rank);
  const bool indexed = c.layout == NS_RIG_LAYOUT_INDEXED;
  const FilterUse use = c.filter;
  const bool filter_on = config_.filter_on();
  const bool coalesce_on = config_.coalesce_on();
  const std::uint64_t local_rows = r.local_rows;
  const std::uint64_t end = std::min(c.count, next_ + budget);
  // Counted in registers and added once per call (the loop's stores to the filter words would
  // otherwise keep the compiler from holding them).
  struct Tally {
    ClientCounters& into;
    std::uint64_t requested = 0, filtered = 0, coalesced = 0, local = 0, sent = 0;
    ~Tally() {
      into.requested += requested;
      into.filtered += filtered;
      into.coalesced += coalesced;
      into.local += local;
      into.sent += sent;
    }
  } k{counters};
  const std::uint32_t slot = current_slot_;
  const std::uint8_t slot_epoch = slots_[slot].epoch;
  const bool remote_only = (c.flags & NS_SEND_REMOTE_ONLY) != 0;
  // A plan's first start: record what the path decides per idx (plan.hpp), nothing else changes.
  Plan* const rec = c.recording ? c.plan : nullptr;
  const std::uint64_t row_begin = r.row_begin;
  // Rows of this node are read from host memory at random: prefetch a few idxs ahead so the
  // local copies overlap their cache misses (the remote ones go to the concatenation queue).
  // Likewise the filter word of each idx (per-WR or the region's row states), further ahead:
  // both filters are arrays over the global rows, claimed at random.
  constexpr std::uint64_t kPrefetch = 8;
  constexpr std::uint64_t kPrefetchFilter = 16;
  const bool per_wr = use == FilterUse::kPerWr;
  for (; next_ < end; ++next_) {
    const std::uint64_t j = next_;
    if (j + kPrefetchFilter < end) {
      const std::uint64_t far = c.idx[j + kPrefetchFilter];
      if (per_wr) {
        dedup_.prefetch(far);
      } else if (use == FilterUse::kRows) {
        rows.prefetch(far);
      }
    }
    if (j + kPrefetch < end) {
      const std::uint64_t ahead = c.idx[j + kPrefetch] - r.row_begin;
      if (ahead < local_rows) __builtin_prefetch(r.base + ahead * P);
    }
    const std::uint64_t i = c.idx[j];
    std::byte* dst;
    if (indexed) {
      const std::uint64_t off = i - c.window_base;
      if (off >= c.window_len) {
        c.status = NS_WC_LOC_INV_REQ;
        c.bad_pos = j;
        return true;
      }
      dst = c.out + off * P;
    } else {
      dst = c.out + j * P;
    }
    if (remote_only && i - row_begin < local_rows) {  // ours: the caller reads it itself
      ++k.requested;
      ++k.local;
      continue;
    }
    const bool on_rows = use == FilterUse::kRows && i < total;
    bool claimed = false;  // this idx turned the row from kNone to kRequested
    if (on_rows) {
      const filter::RowState st = rows.claim(i);
      if (st == filter::kRowPresent && filter_on) {
        ++k.requested;
        ++k.filtered;
        continue;
      }
      if (st == filter::kRowRequested && coalesce_on) {
        ++k.requested;
        ++k.coalesced;
        c.coalesced_any = true;
        continue;
      }
      claimed = st == filter::kRowNone;
    }
    const int owner = r.solver.owner(i);
    if (owner == self) {
      ++k.requested;
      ++k.local;
      if (i >= r.row_end) {  // beyond every row (mapped to the last node, which is us)
        ++counters.invalid_local;
        if (claimed) rows.set(i, filter::kRowNone);
        c.status = NS_WC_REM_INV_REQ;
        return true;
      }
      copy_prop(dst, r.base + (i - r.row_begin) * P, P);
      if (on_rows) rows.set(i, filter::kRowPresent);
      if (rec != nullptr) rec->add_local(static_cast<std::uint64_t>(dst - c.out), i - r.row_begin);
      continue;
    }
    if (port_.peer_dead(static_cast<std::uint32_t>(owner))) {
      if (claimed) rows.set(i, filter::kRowNone);
      c.status = NS_WC_TRANSPORT_ERR;
      return true;
    }
    const WrDedup::Hit* first = nullptr;
    if (use == FilterUse::kPerWr) {
      first = dedup_.find(i);
      if (first != nullptr) {
        if (request_live(first->req)) {
          if (coalesce_on) {
            ++k.requested;
            ++k.coalesced;
            if (!indexed) {
              slots_[slot].copies.emplace_back(j, first->pos);
              if (rec != nullptr) rec->add_copy(j * P, std::uint64_t{first->pos} * P);
            }
            continue;
          }
        } else if (filter_on) {
          ++k.requested;
          ++k.filtered;
          if (!indexed) {
            copy_prop(dst, c.out + std::uint64_t{first->pos} * P, P);
            if (rec != nullptr) rec->add_copy(j * P, std::uint64_t{first->pos} * P);
          }
          continue;
        }
      }
    }
    const auto dest = static_cast<std::uint32_t>(owner);
    if (compact_ ? !compact_room(dest) : free_.empty()) {
      // Pending PR Table (or the compact reads' in-flight bound) full: stop taking idxs from
      // this command until answers free room; the reads being filled leave now.
      if (claimed) rows.set(i, filter::kRowNone);
      if (use == FilterUse::kPerWr && first == nullptr) dedup_.forget(i);
      if (!stalled_) ++counters.stalls;
      stalled_ = true;
      if (compact_) send_open_batches();
      return false;
    }
    std::uint32_t req;
    if (compact_) {
      req =
          append_to_read(dest, i - r.solver.begin(owner), static_cast<std::uint64_t>(dst - c.out));
    } else {
      const std::uint32_t e = free_.back();
      free_.pop_back();
      Entry& entry = entries_[e];
      entry.idx = i;
      entry.pos = j;
      entry.slot = static_cast<std::uint16_t>(slot);
      entry.slot_epoch = slot_epoch;
      entry.live = true;
      req = request_id(e);
      cp.push(concat::PrType::kRead, dest, concat::PrHeader{port_.rank, id_, i, req}, nullptr, now);
    }
    ++k.requested;
    ++k.sent;
    ++c.outstanding;
    if (rec != nullptr) {
      rec->add_remote(static_cast<std::uint32_t>(owner), i - r.solver.begin(owner),
                      static_cast<std::uint64_t>(dst - c.out));
    }
    if (use == FilterUse::kPerWr && first == nullptr) {
      dedup_.record(i, static_cast<std::uint32_t>(j), req);
    }
  }
  stalled_ = false;
  return true;
}

template <bool kDedup>
bool ClientUnit::run_bulk_sized(Command& c, std::uint64_t end) {
  return with_prop_size(c.mr->prop_bytes,
                        [&]<std::uint32_t kP>() { return run_bulk<kP, kDedup>(c, end); });
}

// Per idx only what a POSITIONAL command on the compact wire needs: its owner (a shift on equal
// blocks), a fixed-size copy of this node's rows, for a remote one the per-WR de-duplication
// when the command uses it (kDedup: one bitmap claim; a repeat is copied from its first
// occurrence or waits for its answer), else two stores into the owner's open read. No window
// check, no row-state filter, no plan record, no per-idx prefetch of this node's rows (their
// copies are independent loads the core overlaps; run()'s prefetch, computed per idx, was among
// its hottest instructions at K = 1) unless they are a cache line or more, and every count kept in
// registers until the walk stops.
// Outcomes per idx are those of run() for such a command.
template <std::uint32_t kP, bool kDedup>
bool ClientUnit::run_bulk(Command& c, std::uint64_t end) {
  Region& r = *c.mr;
  const std::uint32_t P = kP > 0 ? kP : r.prop_bytes;
  const auto self = static_cast<int>(port_.rank);
  const std::uint64_t row_begin = r.row_begin;
  const std::uint64_t local_rows = r.local_rows;
  const std::byte* const base = r.base;
  const std::uint64_t* const idx = c.idx;
  std::byte* const out = c.out;
  const bool filter_on = config_.filter_on();
  const bool coalesce_on = config_.coalesce_on();
  const std::uint32_t slot = current_slot_;
  std::uint64_t local = 0, sent = 0, filtered = 0, coalesced = 0, j = next_;
  // Counted once, whichever way the walk stops.
  const auto settle = [&] {
    counters.requested += local + sent + filtered + coalesced;
    counters.local += local;
    counters.sent += sent;
    counters.filtered += filtered;
    counters.coalesced += coalesced;
    c.outstanding += sent;
    if (coalesced > 0) c.coalesced_any = true;
    if constexpr (kDedup) {
      cmd_walked_ += sent + filtered + coalesced;
      cmd_repeats_ += filtered + coalesced;
    }
    next_ = j;
  };
  // The per-WR de-duplication's bitmap word of each idx is claimed at random: prefetched ahead.
  // So are this node's rows of a cache line or more (the core alone keeps too few of their
  // misses in flight: at K = 16, 90 % of this loop's samples sat on the copy without it); a
  // row of a few bytes from a table the cache holds is not worth the instructions.
  constexpr std::uint64_t kPrefetchFilter = 16;
  constexpr std::uint64_t kPrefetchRow = 8;
  const bool prefetch_rows = P >= 64;
  for (; j < end; ++j) {
    if constexpr (kDedup) {
      if (j + kPrefetchFilter < end) dedup_.prefetch(idx[j + kPrefetchFilter]);
    }
    if (prefetch_rows && j + kPrefetchRow < end) {
      const std::uint64_t ahead = idx[j + kPrefetchRow] - row_begin;
      if (ahead < local_rows) {
        for (std::uint32_t l = 0; l < P; l += 64) __builtin_prefetch(base + ahead * P + l);
      }
    }
    const std::uint64_t i = idx[j];
    std::byte* const dst = out + j * P;
    if (i - row_begin < local_rows) {
      std::memcpy(dst, base + (i - row_begin) * P, P);
      ++local;
      continue;
    }
    const int owner = r.solver.owner(i);
    if (owner == self) {  // beyond every row (mapped to the last node, which is us)
      ++local;
      ++counters.invalid_local;
      c.status = NS_WC_REM_INV_REQ;
      settle();
      return true;
    }
    const auto dest = static_cast<std::uint32_t>(owner);
    if (port_.peer_dead(dest)) {
      c.status = NS_WC_TRANSPORT_ERR;
      settle();
      return true;
    }
    const WrDedup::Hit* first = nullptr;
    if constexpr (kDedup) {
      first = dedup_.find(i);
      if (first != nullptr) {
        if (request_live(first->req)) {
          if (coalesce_on) {  // lands when the first occurrence's answer does
            ++coalesced;
            slots_[slot].copies.emplace_back(j, first->pos);
            continue;
          }
        } else if (filter_on) {  // already here: copied from the first occurrence
          ++filtered;
          std::memcpy(dst, out + std::uint64_t{first->pos} * P, P);
          continue;
        }
      }
    }
    if (!compact_room(dest)) {
      if constexpr (kDedup) {
        if (first == nullptr) dedup_.forget(i);
      }
      if (!stalled_) ++counters.stalls;
      stalled_ = true;
      send_open_batches();
      settle();
      return false;
    }
    const std::uint32_t tag = append_to_read(dest, i - r.solver.begin(owner), j * P);
    ++sent;
    if constexpr (kDedup) {
      if (first == nullptr) dedup_.record(i, static_cast<std::uint32_t>(j), tag);
    }
  }
  settle();
  stalled_ = false;
  return true;
}

void ClientUnit::on_response(const concat::PrHeader& pr, const std::byte* payload, bool invalid) {
  ++counters.responses;
  const std::uint32_t e = pr.req_id & id_mask_;
  if (e >= entries_.size() || !entries_[e].live || entries_[e].gen != (pr.req_id >> id_bits_) ||
      entries_[e].idx != pr.idx) {
    ++counters.stale_responses;  // late (after a watchdog), duplicate or forged
    return;
  }
  const Entry entry = entries_[e];
  free_entry(e);
  stalled_ = false;
  Slot& s = slots_[entry.slot];
  if (s.cmd == nullptr || s.epoch != entry.slot_epoch) {
    ++counters.stale_waiters;
    return;
  }
  Command& c = *s.cmd;
  Region& r = *c.mr;
  const std::uint32_t P = r.prop_bytes;
  const bool on_rows = c.filter == FilterUse::kRows && pr.idx < r.solver.total_rows();
  if (invalid) {
    if (c.status == NS_WC_SUCCESS) c.status = NS_WC_REM_INV_REQ;
    if (on_rows) r.rows().set(pr.idx, filter::kRowNone);
  } else if (c.layout == NS_RIG_LAYOUT_INDEXED) {
    copy_prop(c.out + (pr.idx - c.window_base) * P, payload, P);
    if (on_rows) r.rows().set(pr.idx, filter::kRowPresent);
  } else {
    copy_prop(c.out + entry.pos * P, payload, P);
  }
  if (--c.outstanding == 0 && c.generated) finish_slot(entry.slot);
}

// ---- compact wire --------------------------------------------------------------------------
ClientUnit::Batch& ClientUnit::open_new_batch(std::uint32_t owner) {
  std::uint32_t b;
  if (!free_batches_.empty()) {
    b = free_batches_.back();
    free_batches_.pop_back();
  } else {  // compact_room() said there is room for one more
    b = static_cast<std::uint32_t>(batches_.size());
    batches_.emplace_back();
  }
  Batch& batch = batches_[b];
  batch.owner = owner;
  batch.received = 0;
  batch.max_row = 0;
  batch.slot = static_cast<std::uint16_t>(current_slot_);
  batch.slot_epoch = slots_[current_slot_].epoch;
  batch.live = true;
  batch.sent = false;
  batch.rows.reserve(batch_cap_);
  batch.at.reserve(batch_cap_);
  open_[owner] = b;
  open_owners_.push_back(owner);
  return batch;
}

void ClientUnit::send_batch(std::uint32_t owner) {
  const std::uint32_t b = open_[owner];
  Batch& batch = batches_[b];
  open_[owner] = kNoBatch;
  open_owners_.erase(std::find(open_owners_.begin(), open_owners_.end(), owner));
  batch.sent = true;
  const auto n = static_cast<std::uint32_t>(batch.rows.size());
  const std::uint32_t width = batch.max_row <= 0xFFFFFFFFu ? 4 : 8;
  const std::size_t bytes = concat::kGatherHeaderBytes + std::size_t{n} * width;
  std::byte* at = port_.outbox->packet_room(owner, bytes);
  concat::encode_gather_header(
      at,
      concat::GatherHeader{
          {concat::GatherType::kGatherRead, owner, width, n, port_.rank}, tag_of(b), id_, 0, n});
  std::byte* body = at + concat::kGatherHeaderBytes;
  if (width == 4) {
    for (std::uint32_t k = 0; k < n; ++k) {
      concat::wire::store<std::uint32_t>(body + std::size_t{k} * 4,
                                         static_cast<std::uint32_t>(batch.rows[k]));
    }
  } else {
    for (std::uint32_t k = 0; k < n; ++k) {
      concat::wire::store<std::uint64_t>(body + std::size_t{k} * 8, batch.rows[k]);
    }
  }
  port_.outbox->commit_packet(owner, bytes);
  ++counters.compact_packets;
  counters.compact_bytes += bytes;
  port_.concat->account_model(concat::PrType::kRead, n);
}

void ClientUnit::send_open_batches() {
  while (!open_owners_.empty()) send_batch(open_owners_.back());
}

void ClientUnit::free_batch(std::uint32_t b) noexcept {
  Batch& batch = batches_[b];
  if (!batch.sent && open_[batch.owner] == b) {
    open_[batch.owner] = kNoBatch;
    open_owners_.erase(std::find(open_owners_.begin(), open_owners_.end(), batch.owner));
  }
  inflight_prs_ -= static_cast<std::uint32_t>(batch.rows.size() - batch.received);
  batch.rows.clear();
  batch.at.clear();
  batch.live = false;
  batch.sent = false;
  batch.gen = (batch.gen + 1) & ((1u << (32 - kBatchIndexBits)) - 1);
  free_batches_.push_back(b);
}

void ClientUnit::forget_unanswered(const Batch& b, Command& c) noexcept {
  if (c.filter != FilterUse::kRows) return;
  const std::uint64_t base = c.mr->solver.begin(static_cast<int>(b.owner));
  const std::uint64_t total = c.mr->solver.total_rows();
  for (std::size_t k = b.received; k < b.rows.size(); ++k) {
    if (base + b.rows[k] < total) c.mr->rows().set(base + b.rows[k], filter::kRowNone);
  }
}

ClientUnit::Batch* ClientUnit::answered_batch(std::uint32_t src, const concat::GatherHeader& h) {
  const std::uint32_t b = batch_of(h.tag);
  // Answers of one read come in order over one link (MPI, rings and RC verbs keep order per
  // peer): anything else is late (after a watchdog), duplicated or forged. (A refusal's `first`
  // is the refused row's position, not a continuation.)
  if (!batch_live(h.tag) || !batches_[b].sent || batches_[b].owner != src ||
      h.total != batches_[b].rows.size() ||
      (h.type == concat::GatherType::kGatherRows && h.first != batches_[b].received)) {
    ++counters.stale_responses;
    return nullptr;
  }
  return &batches_[b];
}

void ClientUnit::on_rows(std::uint32_t src, const concat::GatherPacket& pkt) {
  const concat::GatherHeader& h = pkt.header;
  Batch* bp = answered_batch(src, h);
  if (bp == nullptr) return;
  Batch& batch = *bp;
  const std::uint32_t b = batch_of(h.tag);
  counters.responses += h.n;
  stalled_ = false;
  Slot& s = slots_[batch.slot];
  if (s.cmd == nullptr || s.epoch != batch.slot_epoch) {  // its command is gone (watchdog)
    counters.stale_waiters += h.n;
    batch.received += h.n;
    if (batch.received == batch.rows.size()) free_batch(b);
    return;
  }
  Command& c = *s.cmd;
  Region& r = *c.mr;
  const std::uint32_t P = r.prop_bytes;
  const std::byte* row = pkt.body.data();
  const std::uint64_t* at = batch.at.data() + h.first;
  // Rows land at random places in the output: prefetch a few ahead (the offsets are in order).
  constexpr std::uint32_t kAhead = 8;
  for (std::uint32_t k = 0; k < h.n; ++k) {
    if (k + kAhead < h.n) __builtin_prefetch(c.out + at[k + kAhead], 1);
    copy_prop(c.out + at[k], row + std::size_t{k} * P, P);
  }
  if (c.filter == FilterUse::kRows) {
    const std::uint64_t base = r.solver.begin(static_cast<int>(batch.owner));
    const std::uint64_t total = r.solver.total_rows();
    for (std::uint32_t k = 0; k < h.n; ++k) {
      const std::uint64_t idx = base + batch.rows[h.first + k];
      if (idx < total) r.rows().set(idx, filter::kRowPresent);
    }
  }
  batch.received += h.n;
  inflight_prs_ -= h.n;
  c.outstanding -= h.n;
  const std::uint16_t slot = batch.slot;
  if (batch.received == batch.rows.size()) free_batch(b);
  if (c.outstanding == 0 && c.generated) finish_slot(slot);
}

void ClientUnit::on_refuse(std::uint32_t src, const concat::GatherHeader& h) {
  Batch* bp = answered_batch(src, h);
  if (bp == nullptr) return;
  Batch& batch = *bp;
  const std::uint32_t b = batch_of(h.tag);
  const std::uint32_t left = static_cast<std::uint32_t>(batch.rows.size()) - batch.received;
  counters.responses += left;
  stalled_ = false;
  Slot& s = slots_[batch.slot];
  if (s.cmd == nullptr || s.epoch != batch.slot_epoch) {
    counters.stale_waiters += left;
    free_batch(b);
    return;
  }
  Command& c = *s.cmd;
  if (c.status == NS_WC_SUCCESS) c.status = NS_WC_REM_INV_REQ;
  forget_unanswered(batch, c);
  c.outstanding -= left;
  const std::uint16_t slot = batch.slot;
  free_batch(b);
  if (c.outstanding == 0 && c.generated) finish_slot(slot);
}

void ClientUnit::prefetch_destination(std::uint32_t req_id, std::uint64_t idx) const noexcept {
  const std::uint32_t e = req_id & id_mask_;
  if (e >= entries_.size() || !entries_[e].live) return;
  const Command* c = slots_[entries_[e].slot].cmd;
  if (c == nullptr) return;
  const std::uint64_t at =
      c->layout == NS_RIG_LAYOUT_INDEXED ? idx - c->window_base : entries_[e].pos;
  __builtin_prefetch(c->out + at * c->mr->prop_bytes, 1);
}

void ClientUnit::maybe_finish(std::uint32_t slot) {
  Command* c = slots_[slot].cmd;
  if (c != nullptr && c->generated && c->outstanding == 0) finish_slot(slot);
}

void ClientUnit::finish_slot(std::uint32_t slot) {
  Slot& s = slots_[slot];
  Command* c = s.cmd;
  if (c->status == NS_WC_SUCCESS && !s.copies.empty()) {
    const std::uint32_t P = c->mr->prop_bytes;
    for (const auto& [pos, from] : s.copies) copy_prop(c->out + pos * P, c->out + from * P, P);
  }
  s.copies.clear();
  s.cmd = nullptr;
  ++s.epoch;  // entries still naming this slot are now stale
  ++free_slots_;
  --live_;
  if (current_ == c) {
    current_ = nullptr;
    c->generated = true;
  }
  c->mr->retire(*c, [this](Command& done) { port_.sink->complete(done); });
}

void ClientUnit::release_entries(std::uint32_t s) {
  Command* c = slots_[s].cmd;
  const std::uint8_t epoch = slots_[s].epoch;
  for (std::uint32_t e = 0; e < entries_.size(); ++e) {
    Entry& entry = entries_[e];
    if (!entry.live || entry.slot != s || entry.slot_epoch != epoch) continue;
    // Nobody will bring this row now: later commands must ask for it again, not wait for it.
    if (c != nullptr && c->filter == FilterUse::kRows && entry.idx < c->mr->solver.total_rows()) {
      c->mr->rows().set(entry.idx, filter::kRowNone);
    }
    free_entry(e);
    ++counters.released;
  }
  for (std::uint32_t b = 0; b < batches_.size(); ++b) {
    Batch& batch = batches_[b];
    if (!batch.live || batch.slot != s || batch.slot_epoch != epoch) continue;
    if (c != nullptr) forget_unanswered(batch, *c);
    counters.released += batch.rows.size() - batch.received;
    free_batch(b);
  }
  if (c != nullptr) c->outstanding = 0;
  stalled_ = false;
}

int ClientUnit::watchdog(std::uint64_t now) {
  int expired = 0;
  for (std::uint32_t s = 0; s < kUnitSlots; ++s) {
    Command* c = slots_[s].cmd;
    if (c == nullptr || c->deadline_ns > now) continue;
    c->status = NS_WC_WATCHDOG_TIMEOUT;
    port_.sink->note_timeout();
    release_entries(s);
    finish_slot(s);
    ++expired;
  }
  return expired;
}

void ClientUnit::fail_all(int status) {
  for (std::uint32_t s = 0; s < kUnitSlots; ++s) {
    if (slots_[s].cmd == nullptr) continue;
    slots_[s].cmd->status = status;
    release_entries(s);
    finish_slot(s);
  }
}

}  // namespace netsparse::rig
