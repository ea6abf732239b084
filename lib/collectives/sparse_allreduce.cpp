// Sparse allreduce of (index, value) vectors, Flare's sparse design in software with SparCML's
// switch to dense (docs/collectives.md, "Sparse allreduce"):
//  * the index space is cut into blocks of `span` indices, about one packet of nonzeros each
//    (from the largest rank's count, agreed through the descriptors) and at most n / P, in
//    contiguous ranges per aggregator, as in the dense allreduce;
//  * leaf (every rank, per block): repeated indices are pre-combined in a small hash table
//    with a bounded probe, entries that find no slot go to a spill buffer and travel as they
//    are; a block whose entries would take at least half the bytes of its dense values
//    travels dense (leaf_dense);
//  * packets never mix blocks, the last packet of a block carries the block's packet count,
//    an empty block is one header-only packet;
//  * root (the aggregator): a dense accumulator per block plus a touched bitmap (a block that
//    receives dense values accumulates in its place in the output instead); a finished block
//    goes back sparse (ascending offsets, from the bitmap) or dense when it filled up;
//  * output: sparse (ascending indices) or dense, by the result's density (or as asked).
#include <algorithm>
#include <bit>
#include <cstdlib>
#include <cstring>
#include <type_traits>

#include "collectives/communicator.hpp"
#include "collectives/op.hpp"
#include "collectives/sorted_runs.hpp"
#include "support/hash.hpp"

namespace netsparse::collectives {

namespace {

constexpr std::uint32_t kNoKey = 0xffffffffu;
constexpr int kProbeLimit = 8;  // hash table probes before an entry spills

// Sum of one element type; integers wrap, fp16 is added in double and rounded once.
template <class T>
struct Sum {
  static T add(T a, T b) {
    if constexpr (std::is_integral_v<T>) {
      using U = std::make_unsigned_t<T>;
      return static_cast<T>(static_cast<U>(a) + static_cast<U>(b));
    } else {
      return a + b;
    }
  }
};
struct Half {
  std::uint16_t bits;
};
template <>
struct Sum<Half> {
  static Half add(Half a, Half b) {
    return Half{double_to_half(half_to_double(a.bits) + half_to_double(b.bits))};
  }
};

template <class T>
T load(const std::byte* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

template <class T>
bool nonzero_bits(const T& v) {
  unsigned char b[sizeof(T)];
  std::memcpy(b, &v, sizeof(T));
  for (unsigned char c : b)
    if (c != 0) return true;
  return false;
}

// What the input's single pass found: sorted (blocks cut by binary search), and without repeats
// (a block's entries are its output as they are: no hash table).
struct InputOrder {
  bool sorted = true, distinct = true;
};

template <class T>
class SparseOp final : public Communicator::Op {
  static constexpr std::size_t kVal = sizeof(T);
  // A block's entries, grown without a zero-fill (each resize is written in full next).
  using Offsets = support::RawVector<std::uint32_t>;
  using Values = support::RawVector<T>;

 public:
  SparseOp(Communicator& c, const wire::Descriptor& d, const SparseArgs& a, InputOrder order)
      : Op(c, d), args_(a), sorted_(order.sorted), ascending_(order.sorted && order.distinct) {}

  void on_agreed() override {
    if (!args_ok) return;
    // Layout, the same on every rank (from the agreed descriptors).
    std::uint64_t max_nnz = 0;
    for (const wire::Descriptor& x : desc) max_nnz = std::max(max_nnz, x.nnz);
    const std::size_t payload = comm.packet_bytes() - wire::kHeaderBytes;
    C_ = static_cast<std::uint32_t>(payload / wire::sparse_entry_bytes(kVal));
    V_ = static_cast<std::uint32_t>(payload / kVal);
    L_.n = args_.n;
    L_.value_bytes = kVal;
    if (max_nnz == 0 || args_.n == 0) {
      L_.blocks = 0;
    } else {
      const unsigned __int128 want = static_cast<unsigned __int128>(C_) * args_.n / max_nnz;
      std::uint64_t span = static_cast<std::uint64_t>(
          std::clamp<unsigned __int128>(want, 1, std::uint64_t{1} << 31));
      // Every root gets a block (256 Ki entries at 1 % were one, merged while the other waited).
      span = std::min<std::uint64_t>(
          span, std::max<std::uint64_t>(1, args_.n / static_cast<std::uint64_t>(P)));
      span = std::max<std::uint64_t>(span, (args_.n + 0xfffffffeull) / 0xffffffffull);
      L_.span = static_cast<std::uint32_t>(span);
      L_.blocks = static_cast<std::uint32_t>((args_.n + span - 1) / span);
    }
    const std::uint32_t nb = L_.blocks;
    first_.resize(static_cast<std::size_t>(P) + 1);
    for (int r = 0; r <= P; ++r)
      first_[r] = static_cast<std::uint32_t>(std::uint64_t{nb} * static_cast<std::uint64_t>(r) / P);
    for (int r = 0; r < P; ++r) max_chunk_ = std::max(max_chunk_, first_[r + 1] - first_[r]);
    b0_ = first_[me];
    b1_ = first_[me + 1];
    const std::uint32_t mine = b1_ - b0_;
    comm.stats().blocks = nb;
    comm.stats().span = L_.span;
    bucket_input();
    // Root state.
    words_per_block_ = (std::size_t{L_.span} + 63) / 64;
    std::vector<std::byte>& acc = comm.sparse_acc();
    if (acc.size() < std::size_t{mine} * L_.span * kVal)
      acc.resize(std::size_t{mine} * L_.span * kVal);
    std::vector<std::uint64_t>& bits = comm.sparse_bits();
    if (bits.size() < std::size_t{mine} * words_per_block_)
      bits.resize(std::size_t{mine} * words_per_block_);
    acc_ = reinterpret_cast<T*>(acc.data());
    bits_ = bits.data();
    touched_.assign(mine, 0);
    block_dense_.assign(mine, 0);
    srcs_done_.assign(mine, 0);
    src_packets_.assign(std::size_t{mine} * P, 0);
    src_done_.assign(std::size_t{mine} * P, 0);
    runs_active_.assign(mine, 1);
    run_offs_.resize(std::size_t{mine} * P);
    run_vals_.resize(std::size_t{mine} * P);
    out_.resize(nb);
    results_.resize(mine);
    layout_ready_ = true;
    // This rank's own entries of its blocks go straight into the roots (a dense one is
    // scattered into its output block in place).
    for (std::uint32_t b = b0_; b < b1_; ++b) {
      const std::uint64_t s0 = bstart_[b], s1 = bstart_[b + 1];
      if (leaf_dense(s1 - s0, L_.block_len(b))) {
        make_dense(b);
        T* out = out_values() + std::uint64_t{b} * L_.span;
        for (std::uint64_t j = s0; j < s1; ++j) {
          T& x = out[entry_offset(b, j)];
          x = Sum<T>::add(x, entry_value(j));
        }
      } else {
        prepare(b);
        add_run(b, me, prep_offs_.data(), reinterpret_cast<const std::byte*>(prep_vals_.data()),
                static_cast<std::uint32_t>(prep_offs_.size()));
      }
      if (P == 1) complete(b);
    }
    std::vector<std::pair<int, std::vector<std::byte>>> early;
    early.swap(early_);
    for (auto& [src, bytes] : early) handle(src, bytes);
  }

  bool finished() const override {
    if (!args_ok) return true;
    if (!layout_ready_) return false;
    if (P == 1) return true;
    return results_done_ == L_.blocks - (b1_ - b0_) && res_i_ == b1_ - b0_ &&
           contrib_j_ == max_chunk_;
  }

  bool pump() override {
    if (!args_ok || !layout_ready_ || P == 1) return false;
    bool progress = false;
    while (res_i_ < ready_.size()) {
      const std::uint32_t b = ready_[res_i_];
      const Result& r = results_[b - b0_];
      const int dest = (me + 1 + res_k_) % P;
      const T* vals = r.dense ? out_values() + std::uint64_t{b} * L_.span : r.vals.data();
      if (!send_packet(dest, wire::Kind::kSparseResult, b, r.dense, r.offs, vals, res_p_))
        return progress;
      progress = true;
      if (++res_p_ == packets_of(b, r.dense, r.offs.size())) {
        res_p_ = 0;
        if (++res_k_ == P - 1) {
          res_k_ = 0;
          ++res_i_;
          keep_result(b);  // sent to everyone: this rank's own output from now on
        }
      }
    }
    while (contrib_j_ < max_chunk_) {
      const int dest = (me + 1 + contrib_k_) % P;
      const std::uint32_t b = first_[dest] + contrib_j_;
      if (b < first_[dest + 1]) {
        if (prep_block_ != b) prepare(b);
        if (!send_packet(dest, wire::Kind::kSparseContribution, b, prep_dense_, prep_offs_,
                         prep_vals_.data(), contrib_p_))
          return progress;
        progress = true;
        if (++contrib_p_ < packets_of(b, prep_dense_, prep_offs_.size())) continue;
        contrib_p_ = 0;
      }
      if (++contrib_k_ == P - 1) {
        contrib_k_ = 0;
        ++contrib_j_;
      }
    }
    return progress;
  }

  void on_data(int src, const wire::Header&, std::span<const std::byte> packet) override {
    if (!layout_ready_) {  // a peer agreed before us: keep it until the layout is known
      early_.emplace_back(src, std::vector<std::byte>(packet.begin(), packet.end()));
      return;
    }
    handle(src, packet);
  }

  SparseResult take_result() {
    SparseResult res;
    res.n = args_.n;
    res.dtype = static_cast<DataType>(args_.dtype);
    std::uint64_t stored = 0;
    for (std::uint32_t b = 0; b < L_.blocks; ++b)
      stored += out_[b].dense ? L_.block_len(b) : out_[b].offs.size();
    bool dense = args_.output == SparseOutput::kDense;
    if (args_.output == SparseOutput::kAuto)
      dense = stored * (8 + kVal) >= args_.n * kVal;  // the smaller representation
    res.dense = dense;
    if (dense) {
      T* d = out_values();
      if (L_.blocks == 0 && args_.dense_out != nullptr)  // nothing was sent: all zeros
        std::memset(static_cast<void*>(d), 0, args_.n * kVal);
      for (std::uint32_t b = 0; b < L_.blocks; ++b) {
        const Out& o = out_[b];
        if (o.dense) continue;  // already in place
        T* base = d + std::uint64_t{b} * L_.span;
        if (args_.dense_out != nullptr)  // the caller's memory is not zero
          std::memset(static_cast<void*>(base), 0, std::size_t{L_.block_len(b)} * kVal);
        for (std::size_t i = 0; i < o.offs.size(); ++i) base[o.offs[i]] = o.vals[i];
      }
      if (args_.dense_out != nullptr) {
        res.dense_external = static_cast<std::byte*>(args_.dense_out);
      } else {
        res.values = std::move(dense_out_);
      }
      return res;
    }
    std::uint64_t total = 0;
    const T* d = out_ptr_;
    for (std::uint32_t b = 0; b < L_.blocks; ++b) {
      if (!out_[b].dense) {
        total += out_[b].offs.size();
        continue;
      }
      const T* base = d + std::uint64_t{b} * L_.span;
      for (std::uint32_t i = 0; i < L_.block_len(b); ++i) total += nonzero_bits(base[i]);
    }
    res.indices.resize(total);
    res.values = ByteBuffer(total * kVal);
    T* vals = reinterpret_cast<T*>(res.values.data());
    std::uint64_t k = 0;
    for (std::uint32_t b = 0; b < L_.blocks; ++b) {
      const std::uint64_t start = std::uint64_t{b} * L_.span;
      const Out& o = out_[b];
      if (o.dense) {
        const T* base = d + start;
        for (std::uint32_t i = 0; i < L_.block_len(b); ++i)
          if (nonzero_bits(base[i])) {
            res.indices[k] = start + i;
            vals[k++] = base[i];
          }
      } else {
        for (std::size_t i = 0; i < o.offs.size(); ++i) {
          res.indices[k] = start + o.offs[i];
          vals[k++] = o.vals[i];
        }
      }
    }
    return res;
  }

 private:
  struct Result {  // a finished block at its root, kept until sent to every rank
    bool dense = false;
    Offsets offs;
    Values vals;
  };
  struct Out {  // a block of the result at this rank
    bool dense = false, done = false;
    std::uint32_t packets = 0;
    Offsets offs;  // sparse blocks
    Values vals;
  };

  std::uint32_t packets_of(std::uint32_t b, bool dense, std::size_t entries) const {
    const std::uint64_t n = dense ? L_.block_len(b) : entries;
    const std::uint32_t per = dense ? V_ : C_;
    return std::max<std::uint32_t>(1, static_cast<std::uint32_t>((n + per - 1) / per));
  }

  // Packet p of a block (dense values, or sparse entries), LAST with the count on the final one.
  bool send_packet(int dest, wire::Kind kind, std::uint32_t b, bool dense, const Offsets& offs,
                   const T* vals, std::uint32_t p) {
    const std::uint32_t np = packets_of(b, dense, offs.size());
    wire::Header h{kind, 0, seq, b, 0, p, 0, 0};
    if (p + 1 == np) {
      h.flags |= wire::kFlagLast;
      h.packet_count = np;
    }
    if (dense) {
      h.flags |= wire::kFlagDense;
      h.first = p * V_;
      h.count = std::min<std::uint32_t>(V_, L_.block_len(b) - h.first);
      const std::byte* v = reinterpret_cast<const std::byte*>(vals + h.first);
      return send(dest, wire::kHeaderBytes + std::size_t{h.count} * kVal,
                  [&](std::byte* out) { wire::encode_sparse_dense(h, v, kVal, out); });
    }
    const std::size_t e0 = std::size_t{p} * C_;
    h.count = static_cast<std::uint32_t>(std::min<std::size_t>(C_, offs.size() - e0));
    const std::byte* v = reinterpret_cast<const std::byte*>(vals + e0);
    return send(dest, wire::kHeaderBytes + std::size_t{h.count} * wire::sparse_entry_bytes(kVal),
                [&](std::byte* out) { wire::encode_sparse(h, offs.data() + e0, v, kVal, out); });
  }

  // Groups this rank's entries by block: the input itself when its indices ascend, else a
  // counting sort into (offset, value) arrays.
  void bucket_input() {
    const std::uint32_t nb = L_.blocks;
    bstart_.assign(std::size_t{nb} + 1, 0);
    if (nb == 0) return;
    const std::uint64_t* idx = args_.idx;
    const std::byte* val = static_cast<const std::byte*>(args_.values);
    if (sorted_) {  // boundaries by binary search: no pass over the entries
      for (std::uint32_t b = 0; b < nb; ++b)
        bstart_[b] = static_cast<std::uint64_t>(
            std::lower_bound(idx, idx + args_.nnz, std::uint64_t{b} * L_.span) - idx);
      bstart_[nb] = args_.nnz;
      return;
    }
    for (std::uint64_t i = 0; i < args_.nnz; ++i) ++bstart_[idx[i] / L_.span + 1];
    for (std::uint32_t b = 0; b < nb; ++b) bstart_[b + 1] += bstart_[b];
    b_off_.resize(args_.nnz);
    b_val_.resize(args_.nnz);
    std::vector<std::uint64_t> cur(bstart_.begin(), bstart_.end() - 1);
    for (std::uint64_t i = 0; i < args_.nnz; ++i) {
      const std::uint64_t b = idx[i] / L_.span;
      const std::uint64_t k = cur[b]++;
      b_off_[k] = static_cast<std::uint32_t>(idx[i] - b * L_.span);
      b_val_[k] = load<T>(val + i * kVal);
    }
  }

  std::uint32_t entry_offset(std::uint32_t b, std::uint64_t k) const {
    return sorted_ ? static_cast<std::uint32_t>(args_.idx[k] - std::uint64_t{b} * L_.span)
                   : b_off_[k];
  }
  T entry_value(std::uint64_t k) const {
    return sorted_ ? load<T>(static_cast<const std::byte*>(args_.values) + k * kVal) : b_val_[k];
  }

  // A leaf block travels dense once its entries would take half its dense bytes: hashing costs
  // far more per entry than a dense scatter (measured at 50 % density: half the blocks on each
  // side of the exact break-even, the hashed half took most of the time).
  static bool leaf_dense(std::uint64_t entries, std::uint32_t len) {
    return 2 * entries * wire::sparse_entry_bytes(kVal) >= std::uint64_t{len} * kVal;
  }

  // The leaf's output for block b into prep_*: dense values when that is smaller, else the
  // hash table's combined entries followed by the spill buffer.
  void prepare(std::uint32_t b) {
    prep_block_ = b;
    prep_offs_.clear();
    prep_vals_.clear();
    const std::uint64_t s = bstart_[b], e = bstart_[b + 1], k = e - s;
    const std::uint32_t len = L_.block_len(b);
    prep_dense_ = leaf_dense(k, len);
    if (prep_dense_) {
      prep_vals_.assign(len, T{});
      for (std::uint64_t j = s; j < e; ++j) {
        T& x = prep_vals_[entry_offset(b, j)];
        x = Sum<T>::add(x, entry_value(j));
      }
      return;
    }
    if (ascending_) {  // nothing to combine: the entries as they are (bench_allreduce's input
                       // at 10 % density spent most of its leaf time probing the table)
      prep_offs_.resize(k);
      prep_vals_.resize(k);
      for (std::uint64_t j = s; j < e; ++j) {
        prep_offs_[j - s] = entry_offset(b, j);
        prep_vals_[j - s] = entry_value(j);
      }
      return;
    }
    std::size_t cap = 16;
    while (cap < 2 * k) cap <<= 1;
    keys_.assign(cap, kNoKey);
    tvals_.resize(cap);
    spill_offs_.clear();
    spill_vals_.clear();
    const int shift = 64 - std::countr_zero(cap);
    for (std::uint64_t j = s; j < e; ++j) {
      const std::uint32_t off = entry_offset(b, j);
      const T v = entry_value(j);
      std::size_t slot = support::fibonacci_slot(off, shift);
      bool placed = false;
      for (int p = 0; p < kProbeLimit; ++p, slot = (slot + 1) & (cap - 1)) {
        if (keys_[slot] == kNoKey) {
          keys_[slot] = off;
          tvals_[slot] = v;
          placed = true;
          break;
        }
        if (keys_[slot] == off) {
          tvals_[slot] = Sum<T>::add(tvals_[slot], v);
          placed = true;
          break;
        }
      }
      if (!placed) {
        spill_offs_.push_back(off);
        spill_vals_.push_back(v);
      }
    }
    for (std::size_t i = 0; i < cap; ++i)
      if (keys_[i] != kNoKey) {
        prep_offs_.push_back(keys_[i]);
        prep_vals_.push_back(tvals_[i]);
      }
    prep_offs_.insert(prep_offs_.end(), spill_offs_.begin(), spill_offs_.end());
    prep_vals_.insert(prep_vals_.end(), spill_vals_.begin(), spill_vals_.end());
  }

  void root_sparse(std::uint32_t b, const std::uint32_t* offs, const std::byte* vals,
                   std::uint32_t n) {
    const std::size_t i = b - b0_;
    T* acc = acc_ + i * L_.span;
    if (block_dense_[i]) {
      T* out = out_values() + std::uint64_t{b} * L_.span;
      for (std::uint32_t k = 0; k < n; ++k)
        out[offs[k]] = Sum<T>::add(out[offs[k]], load<T>(vals + std::size_t{k} * kVal));
      return;
    }
    std::uint64_t* bits = bits_ + i * words_per_block_;
    for (std::uint32_t k = 0; k < n; ++k) {
      const std::uint32_t o = offs[k];
      const T v = load<T>(vals + std::size_t{k} * kVal);
      std::uint64_t& w = bits[o >> 6];
      const std::uint64_t bit = std::uint64_t{1} << (o & 63);
      if (w & bit) {
        acc[o] = Sum<T>::add(acc[o], v);
      } else {
        w |= bit;
        acc[o] = v;
        ++touched_[i];
      }
    }
  }
  void root_sparse_wire(std::uint32_t b, int src, const wire::SparseView& v) {
    offs_tmp_.resize(v.header.count);
    v.copy_offsets(offs_tmp_.data());
    add_run(b, src, offs_tmp_.data(), v.values, v.header.count);
  }

  // Sorted runs at the root: while every contribution to block b arrives strictly ascending, each
  // source's entries are kept as a run, merged when the block completes (sorted_runs.hpp; the
  // accumulator's random accesses were 80 % of the call at 1 %, np 2); else the accumulator.
  void add_run(std::uint32_t b, int src, const std::uint32_t* offs, const std::byte* vals,
               std::uint32_t n) {
    const std::size_t i = b - b0_;
    if (runs_active_[i]) {
      Offsets& ro = run_offs_[i * P + static_cast<std::size_t>(src)];
      Values& rv = run_vals_[i * P + static_cast<std::size_t>(src)];
      bool ascending = true;
      for (std::uint32_t k = 0; k < n && ascending; ++k)
        ascending = k > 0 ? offs[k] > offs[k - 1] : (ro.empty() || offs[0] > ro.back());
      if (ascending) {
        ro.insert(ro.end(), offs, offs + n);
        const std::size_t at = rv.size();
        rv.resize(at + n);
        for (std::uint32_t k = 0; k < n; ++k) rv[at + k] = load<T>(vals + std::size_t{k} * kVal);
        return;
      }
      flush_runs(b);
    }
    root_sparse(b, offs, vals, n);
  }
  // The kept runs of block b into the accumulator; the block leaves the run mode.
  void flush_runs(std::uint32_t b) {
    const std::size_t i = b - b0_;
    if (!runs_active_[i]) return;
    runs_active_[i] = 0;
    for (int src = 0; src < P; ++src) {
      Offsets& ro = run_offs_[i * P + static_cast<std::size_t>(src)];
      Values& rv = run_vals_[i * P + static_cast<std::size_t>(src)];
      root_sparse(b, ro.data(), reinterpret_cast<const std::byte*>(rv.data()),
                  static_cast<std::uint32_t>(ro.size()));
      ro.clear();
      rv.clear();
    }
  }
  // Block b's runs merged (sorted_runs.hpp) into offs / vals; the runs left empty.
  void merge_runs(std::uint32_t b, Offsets& offs, Values& vals) {
    const std::size_t i = b - b0_;
    std::vector<Offsets*> ro;
    std::vector<Values*> rv;
    for (std::size_t src = 0; src < static_cast<std::size_t>(P); ++src) {
      ro.push_back(&run_offs_[i * P + src]);
      rv.push_back(&run_vals_[i * P + src]);
    }
    merge_sorted_runs(ro, rv, offs, vals, merge_tmp_o_, merge_tmp_v_,
                      [](T a, T c) { return Sum<T>::add(a, c); });
  }
  // A dense block accumulates in its place in the output (no copy when it is done).
  void root_dense(std::uint32_t b, std::uint32_t first, const std::byte* vals, std::uint32_t n) {
    make_dense(b);
    T* out = out_values() + std::uint64_t{b} * L_.span + first;
    for (std::uint32_t k = 0; k < n; ++k)
      out[k] = Sum<T>::add(out[k], load<T>(vals + std::size_t{k} * kVal));
  }
  // Moves block b's accumulator (its touched entries) into its zeroed output block.
  void make_dense(std::uint32_t b) {
    const std::size_t i = b - b0_;
    if (block_dense_[i]) return;
    flush_runs(b);
    block_dense_[i] = 1;
    T* out = out_values() + std::uint64_t{b} * L_.span;
    std::memset(static_cast<void*>(out), 0, std::size_t{L_.block_len(b)} * kVal);
    T* acc = acc_ + i * L_.span;
    std::uint64_t* bits = bits_ + i * words_per_block_;
    for (std::size_t w = 0; w < words_per_block_; ++w) {
      for (std::uint64_t x = bits[w]; x != 0; x &= x - 1) {
        const std::size_t o = w * 64 + static_cast<std::size_t>(std::countr_zero(x));
        out[o] = acc[o];
        acc[o] = T{};
      }
      bits[w] = 0;
    }
  }

  // All contributions of block b are in: the result, in the smaller encoding, to every rank
  // (this one included); the accumulator and bitmap are left zero for the next operation.
  void complete(std::uint32_t b) {
    const std::size_t i = b - b0_;
    const std::uint32_t len = L_.block_len(b);
    T* acc = acc_ + i * L_.span;
    std::uint64_t* bits = bits_ + i * words_per_block_;
    Result& r = results_[i];
    if (runs_active_[i] && !block_dense_[i]) {  // every contribution came as a sorted run
      runs_active_[i] = 0;
      merge_runs(b, r.offs, r.vals);
      r.dense = std::uint64_t{r.offs.size()} * wire::sparse_entry_bytes(kVal) >=
                std::uint64_t{len} * kVal;
      Out& o = out_[b];
      o.done = true;
      o.dense = r.dense;
      if (r.dense) {  // filled up: the merged entries into the zeroed output block
        block_dense_[i] = 1;
        T* out = out_values() + std::uint64_t{b} * L_.span;
        std::memset(static_cast<void*>(out), 0, std::size_t{len} * kVal);
        for (std::size_t k = 0; k < r.offs.size(); ++k) out[r.offs[k]] = r.vals[k];
        r.offs.clear();
        r.vals.clear();
        ++comm.stats().dense_blocks;
      } else {
        if (P == 1) keep_result(b);
      }
      ready_.push_back(b);
      return;
    }
    r.dense = block_dense_[i] || std::uint64_t{touched_[i]} * wire::sparse_entry_bytes(kVal) >=
                                     std::uint64_t{len} * kVal;
    Out& o = out_[b];
    o.done = true;
    o.dense = r.dense;
    if (r.dense) {  // filled up (SparCML's switch): goes back dense, from the output block
      make_dense(b);
      ++comm.stats().dense_blocks;
    } else {
      r.offs.reserve(touched_[i]);
      r.vals.reserve(touched_[i]);
      for (std::size_t w = 0; w < words_per_block_; ++w) {
        for (std::uint64_t x = bits[w]; x != 0; x &= x - 1) {
          const std::uint32_t o = static_cast<std::uint32_t>(w * 64 + std::countr_zero(x));
          r.offs.push_back(o);
          r.vals.push_back(acc[o]);
          acc[o] = T{};
        }
        bits[w] = 0;
      }
      if (P == 1) keep_result(b);
    }
    ready_.push_back(b);
  }

  // The root's own output of block b is its result, moved there (not copied: a pass over half
  // the result) once it went to every rank, or at once when there is nobody to send it to.
  void keep_result(std::uint32_t b) {
    Result& r = results_[b - b0_];
    out_[b].offs = std::move(r.offs);
    out_[b].vals = std::move(r.vals);
    r = Result{};
  }

  // The dense output: the caller's buffer when given, else zeroed memory mapped on first use.
  T* out_values() {
    if (out_ptr_ == nullptr) {
      if (args_.dense_out != nullptr) {
        out_ptr_ = static_cast<T*>(args_.dense_out);
      } else {
        dense_out_ = ByteBuffer(args_.n * kVal);
        out_ptr_ = reinterpret_cast<T*>(dense_out_.data());
      }
    }
    return out_ptr_;
  }
  void write_dense(std::uint32_t b, std::uint32_t first, const std::byte* vals, std::uint32_t n) {
    std::memcpy(static_cast<void*>(out_values() + std::uint64_t{b} * L_.span + first), vals,
                std::size_t{n} * kVal);
  }

  void handle(int src, std::span<const std::byte> packet) {
    wire::SparseView v;
    const wire::DecodeError e = wire::decode_sparse(packet, L_, &v);
    if (e != wire::DecodeError::kOk) {
      record_failure(Failure::kProtocol, "malformed sparse packet from rank " +
                                             std::to_string(src) + ": " + wire::to_string(e));
      return;
    }
    const wire::Header& h = v.header;
    const bool last = (h.flags & wire::kFlagLast) != 0;
    if (h.kind == wire::Kind::kSparseContribution) {
      const std::size_t i = h.block - b0_;
      if (h.block < b0_ || h.block >= b1_ || src_done_[i * P + src] ||
          h.packet_index != src_packets_[i * P + src]) {
        record_failure(Failure::kProtocol, "unexpected sparse contribution to block " +
                                               std::to_string(h.block) + " from rank " +
                                               std::to_string(src));
        return;
      }
      ++src_packets_[i * P + src];
      if (v.dense())
        root_dense(h.block, h.first, v.values, h.count);
      else
        root_sparse_wire(h.block, src, v);
      if (last) {
        src_done_[i * P + src] = 1;
        if (++srcs_done_[i] == P - 1) complete(h.block);
      }
      return;
    }
    // A result block from its root.
    Out& o = out_[h.block];
    const int owner =
        static_cast<int>(std::upper_bound(first_.begin(), first_.end(), h.block) - first_.begin()) -
        1;
    if (owner != src || o.done || h.packet_index != o.packets ||
        (o.packets > 0 && o.dense != v.dense())) {
      record_failure(Failure::kProtocol, "unexpected sparse result of block " +
                                             std::to_string(h.block) + " from rank " +
                                             std::to_string(src));
      return;
    }
    o.dense = v.dense();
    ++o.packets;
    if (v.dense()) {
      write_dense(h.block, h.first, v.values, h.count);
    } else {
      const std::size_t at = o.offs.size();
      o.offs.resize(at + h.count);
      o.vals.resize(at + h.count);
      v.copy_offsets(o.offs.data() + at);
      if (h.count > 0)
        std::memcpy(static_cast<void*>(o.vals.data() + at), v.values, std::size_t{h.count} * kVal);
    }
    if (last) {
      o.done = true;
      ++results_done_;
    }
  }

  SparseArgs args_;
  bool sorted_;
  bool ascending_;  // strictly ascending indices
  bool layout_ready_ = false;
  wire::SparseLayout L_;
  std::uint32_t C_ = 1, V_ = 1;
  std::vector<std::uint32_t> first_;
  std::uint32_t max_chunk_ = 0, b0_ = 0, b1_ = 0;
  // leaf
  std::vector<std::uint64_t> bstart_;
  std::vector<std::uint32_t> b_off_;
  std::vector<T> b_val_;
  std::uint32_t prep_block_ = 0xffffffffu;
  bool prep_dense_ = false;
  Offsets prep_offs_;
  Values prep_vals_;
  std::vector<std::uint32_t> keys_;
  std::vector<T> tvals_;
  std::vector<std::uint32_t> spill_offs_;
  std::vector<T> spill_vals_;
  // root
  std::size_t words_per_block_ = 1;
  T* acc_ = nullptr;
  std::uint64_t* bits_ = nullptr;
  std::vector<std::uint32_t> touched_;
  std::vector<std::uint8_t> block_dense_;
  std::vector<int> srcs_done_;
  std::vector<std::uint32_t> src_packets_;
  std::vector<std::uint8_t> src_done_;
  std::vector<Result> results_;
  std::vector<std::uint32_t> ready_;
  Offsets offs_tmp_;
  // sorted runs per (block, source) while the block is in the run mode (add_run)
  std::vector<std::uint8_t> runs_active_;
  std::vector<Offsets> run_offs_;
  std::vector<Values> run_vals_;
  Offsets merge_tmp_o_;
  Values merge_tmp_v_;
  std::size_t res_i_ = 0;
  int res_k_ = 0;
  std::uint32_t res_p_ = 0;
  std::uint32_t contrib_j_ = 0, contrib_p_ = 0;
  int contrib_k_ = 0;
  // output
  std::vector<Out> out_;
  ByteBuffer dense_out_;
  T* out_ptr_ = nullptr;
  std::uint32_t results_done_ = 0;
  std::vector<std::pair<int, std::vector<std::byte>>> early_;
};

template <class T>
SparseResult run_sparse(Communicator& c, const wire::Descriptor& d, const SparseArgs& a,
                        InputOrder order, const std::function<void(Communicator::Op&)>& run) {
  SparseOp<T> op(c, d, a, order);
  run(op);
  return op.take_result();
}

}  // namespace

SparseResult Communicator::sparse_allreduce(const SparseArgs& a) {
  wire::Descriptor d = begin_descriptor(wire::Collective::kSparse, a.dtype, a.op);
  d.count = a.n;
  d.nnz = a.nnz;
  d.flags = static_cast<std::uint8_t>(a.output) << 1;
  const auto type = data_type_from_int(a.dtype);
  LocalError err = LocalError::kNone;
  InputOrder order;
  if (!type || a.dtype > 255) {
    err = LocalError::kBadDataType;
  } else if (!reduce_op_from_int(a.op) || a.op > 255) {
    err = LocalError::kBadOp;
  } else if (a.op != static_cast<int>(ReduceOp::kSum)) {
    err = LocalError::kSparseOp;
  } else if (a.nnz > 0 && (a.idx == nullptr || a.values == nullptr)) {
    err = LocalError::kNullBuffer;
  } else if (a.n > (std::uint64_t{1} << 62) / element_size(*type)) {
    err = LocalError::kTooLarge;
  } else {
    // One branch-free pass (it vectorizes): the largest index, whether any index descends or
    // repeats the one before.
    std::uint64_t max = 0, descents = 0, repeats = 0;
    for (std::uint64_t i = 0; i < a.nnz; ++i) {
      max = std::max(max, a.idx[i]);
      descents += i > 0 && a.idx[i] < a.idx[i - 1];
      repeats += i > 0 && a.idx[i] == a.idx[i - 1];
    }
    if (a.nnz > 0 && max >= a.n) err = LocalError::kIndexOutOfRange;
    order.sorted = descents == 0;
    order.distinct = repeats == 0;
  }
  if (err == LocalError::kNone && a.refuse != LocalError::kNone) err = a.refuse;
  d.local_error = static_cast<std::int32_t>(err);
  stats_ = OpStats{};
  const auto runner = [this](Op& op) { run(op); };
  switch (type.value_or(DataType::kInt8)) {
    case DataType::kInt8:
      return run_sparse<std::int8_t>(*this, d, a, order, runner);
    case DataType::kInt16:
      return run_sparse<std::int16_t>(*this, d, a, order, runner);
    case DataType::kInt32:
      return run_sparse<std::int32_t>(*this, d, a, order, runner);
    case DataType::kFp16:
      return run_sparse<Half>(*this, d, a, order, runner);
    case DataType::kFp32:
      return run_sparse<float>(*this, d, a, order, runner);
    case DataType::kFp64:
      return run_sparse<double>(*this, d, a, order, runner);
  }
  throw std::logic_error("sparse_allreduce: unreachable datatype");
}

}  // namespace netsparse::collectives
