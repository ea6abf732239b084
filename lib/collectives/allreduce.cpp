// Dense allreduce: blocks of one packet, contiguous ranges of blocks per aggregator, Flare's
// three aggregation designs (communicator.hpp, docs/collectives.md).
#include <algorithm>
#include <cstring>

#include "collectives/communicator.hpp"
#include "collectives/op.hpp"

namespace netsparse::collectives {
namespace {

constexpr int kEmpty = -2;       // tree slot: no value yet
constexpr int kPersistent = -1;  // tree slot: this rank's own input (read-only)

class DenseOp final : public Communicator::Op {
 public:
  DenseOp(Communicator& c, const wire::Descriptor& d, const AllreduceArgs& a, Algorithm algo,
          const Reducer& reducer)
      : Op(c, d), args_(a), algo_(algo), red_(reducer) {
    if (!args_ok) return;
    esize_ = red_.element_bytes();
    epb_ = (comm.packet_bytes() - wire::kHeaderBytes) / esize_;
    nblocks_ = static_cast<std::uint32_t>((a.count + epb_ - 1) / epb_);
    first_.resize(static_cast<std::size_t>(P) + 1);
    for (int r = 0; r <= P; ++r)
      first_[static_cast<std::size_t>(r)] =
          static_cast<std::uint32_t>(std::uint64_t{nblocks_} * static_cast<std::uint64_t>(r) / P);
    for (int r = 0; r < P; ++r) max_chunk_ = std::max(max_chunk_, first_[r + 1] - first_[r]);
    b0_ = first_[me];
    b1_ = first_[me + 1];
    const std::uint32_t mine = b1_ - b0_;
    arrived_.assign(mine, 0);
    seen_.assign(std::size_t{mine} * P, 0);
    got_result_.assign(nblocks_, 0);
    chunk_bytes_ = std::size_t{mine} * epb_ * esize_;
    in_ = static_cast<const std::byte*>(a.send);
    out_ = static_cast<std::byte*>(a.recv);
    if (algo_ == Algorithm::kMultiBuffer2) buffers_ = 2;
    if (algo_ == Algorithm::kMultiBuffer4) buffers_ = 4;
    if (algo_ == Algorithm::kTree) {
      levels_ = 0;
      while ((1 << levels_) < P) ++levels_;
      level_start_.push_back(0);
      for (int l = 0, n = P; l <= levels_; ++l, n = (n + 1) / 2) {
        level_nodes_.push_back(n);
        level_start_.push_back(level_start_.back() + n);
      }
      slots_.assign(std::size_t{mine} * static_cast<std::size_t>(level_start_.back()), kEmpty);
      filled_.clear();
    } else {
      filled_.assign(std::size_t{mine} * static_cast<std::size_t>(buffers_), 0);
    }
    // This rank's own contribution to its blocks enters first.
    if (P == 1) {
      if (out_ != in_) std::memcpy(out_, in_, a.count * esize_);
      return;
    }
    if (algo_ == Algorithm::kTree) {
      for (std::uint32_t b = b0_; b < b1_; ++b)
        tree_arrive(b, me, in_ + elem0(b) * esize_, kPersistent);
    } else if (out_ != in_) {
      const std::uint64_t end = std::min<std::uint64_t>(elem0(b1_), a.count);
      if (end > elem0(b0_))
        std::memcpy(out_ + elem0(b0_) * esize_, in_ + elem0(b0_) * esize_,
                    (end - elem0(b0_)) * esize_);
    }
  }

  bool finished() const override {
    if (!args_ok) return true;
    if (P == 1) return true;
    return results_received_ == nblocks_ - (b1_ - b0_) && res_cursor_ == b1_ - b0_ &&
           contrib_j_ == max_chunk_;
  }

  bool pump() override {
    if (!args_ok || P == 1) return false;
    bool progress = false;
    // Results first: they are what the other ranks wait for.
    while (res_cursor_ < ready_.size()) {
      const std::uint32_t b = ready_[res_cursor_];
      const int dest = (me + 1 + res_k_) % P;
      if (!send_block(dest, wire::Kind::kResult, b, out_)) return progress;
      progress = true;
      if (++res_k_ == P - 1) {
        res_k_ = 0;
        ++res_cursor_;
      }
    }
    // Contributions: the j-th block of every other rank's range, starting with rank me + 1
    // (Flare's staggered start: the aggregators are not all hit by the same senders at once).
    while (contrib_j_ < max_chunk_) {
      const int dest = (me + 1 + contrib_k_) % P;
      const std::uint32_t b = first_[dest] + contrib_j_;
      if (b < first_[dest + 1]) {
        if (!send_block(dest, wire::Kind::kContribution, b, in_)) return progress;
        progress = true;
      }
      if (++contrib_k_ == P - 1) {
        contrib_k_ = 0;
        ++contrib_j_;
      }
    }
    return progress;
  }

  void on_data(int src, const wire::Header& h, std::span<const std::byte> packet) override {
    if (h.block >= nblocks_ || h.count != block_elems(h.block) ||
        packet.size() != wire::kHeaderBytes + std::size_t{h.count} * esize_) {
      record_failure(Failure::kProtocol, "malformed block from rank " + std::to_string(src) +
                                             " (block " + std::to_string(h.block) + ", " +
                                             std::to_string(h.count) + " elements)");
      return;
    }
    const std::byte* payload = packet.data() + wire::kHeaderBytes;
    if (h.kind == wire::Kind::kResult) {
      if (owner(h.block) != src || got_result_[h.block]) {
        record_failure(Failure::kProtocol, "unexpected result of block " + std::to_string(h.block) +
                                               " from rank " + std::to_string(src));
        return;
      }
      got_result_[h.block] = 1;
      ++results_received_;
      std::memcpy(out_ + elem0(h.block) * esize_, payload, std::size_t{h.count} * esize_);
    } else if (h.kind == wire::Kind::kContribution) {
      if (h.block < b0_ || h.block >= b1_ || seen_[std::size_t{h.block - b0_} * P + src]) {
        record_failure(Failure::kProtocol, "unexpected contribution to block " +
                                               std::to_string(h.block) + " from rank " +
                                               std::to_string(src));
        return;
      }
      seen_[std::size_t{h.block - b0_} * P + src] = 1;
      accept(h.block, src, payload);
    } else {
      record_failure(Failure::kProtocol,
                     "sparse packet during a dense allreduce from rank " + std::to_string(src));
    }
  }

 private:
  std::uint64_t elem0(std::uint32_t b) const { return std::uint64_t{b} * epb_; }
  std::uint32_t block_elems(std::uint32_t b) const {
    return static_cast<std::uint32_t>(std::min<std::uint64_t>(epb_, args_.count - elem0(b)));
  }
  int owner(std::uint32_t b) const {
    return static_cast<int>(std::upper_bound(first_.begin(), first_.end(), b) - first_.begin()) - 1;
  }
  std::byte* scratch_block(int id, std::uint32_t b) {
    return comm.scratch_array(static_cast<std::size_t>(id), chunk_bytes_) +
           std::size_t{b - b0_} * epb_ * esize_;
  }

  bool send_block(int dest, wire::Kind kind, std::uint32_t b, const std::byte* base) {
    const std::uint32_t n = block_elems(b);
    const std::size_t payload = std::size_t{n} * esize_;
    const std::byte* src = base + elem0(b) * esize_;
    return send(dest, wire::kHeaderBytes + payload, [&](std::byte* o) {
      wire::encode_header(wire::Header{kind, 0, seq, b, n, 0, 0, 0}, o);
      std::memcpy(o + wire::kHeaderBytes, src, payload);
    });
  }

  void complete(std::uint32_t b) { ready_.push_back(b); }

  // One contribution (rank src's values of block b, valid during the call) at the aggregator.
  void accept(std::uint32_t b, int src, const std::byte* data) {
    const std::uint32_t n = block_elems(b);
    const std::size_t i = b - b0_;
    std::byte* out = out_ + elem0(b) * esize_;
    if (algo_ == Algorithm::kTree) {
      tree_arrive(b, src, data, src);
    } else if (buffers_ == 1) {
      red_.combine(out, out, data, n);  // arrival order: not reproducible
    } else {
      // Buffer by the sender's distance from this rank: 0 (this rank's own) is the output.
      const int buf = ((src - me + P) % P) % buffers_;
      if (buf == 0) {
        red_.combine(out, out, data, n);
      } else {
        std::byte* acc = scratch_block(buf, b);
        std::uint8_t& f = filled_[i * buffers_ + buf];
        if (f) {
          red_.combine(acc, acc, data, n);
        } else {
          std::memcpy(acc, data, std::size_t{n} * esize_);
          f = 1;
        }
      }
    }
    if (++arrived_[i] == static_cast<std::uint32_t>(P - 1)) {
      for (int k = 1; k < buffers_; ++k)
        if (filled_[i * buffers_ + k]) red_.combine(out, out, scratch_block(k, b), n);
      if (algo_ == Algorithm::kTree && !root_done_) {
        record_failure(Failure::kProtocol, "tree did not reach its root");
        return;
      }
      root_done_ = false;
      complete(b);
    }
  }

  // Fixed pairwise tree: node (l, i) = (l-1, 2i) op (l-1, 2i+1), the left operand always the
  // lower ranks; a node without a right sibling passes its value up. `carrier` owns the value
  // if it is scratch (its scratch array id), or is kPersistent for this rank's input, or the
  // leaf id of a transient value (whose scratch array is then free for this block).
  void tree_arrive(std::uint32_t b, int leaf, const std::byte* data, int carrier) {
    const std::uint32_t n = block_elems(b);
    const std::size_t bytes = std::size_t{n} * esize_;
    int* slot = slots_.data() + std::size_t{b - b0_} * level_start_.back();
    std::byte* out = out_ + elem0(b) * esize_;
    bool owned = carrier >= 0 && data == scratch_block(carrier, b);
    int l = 0, i = leaf;
    for (;;) {
      if (l == levels_) {  // only for P == 1; results are written by the last combine below
        if (data != out) std::memcpy(out, data, bytes);
        root_done_ = true;
        return;
      }
      const int sib = i ^ 1;
      if (sib >= level_nodes_[l]) {  // no sibling: the value moves up unchanged
        ++l;
        i >>= 1;
        continue;
      }
      int& s = slot[level_start_[l] + sib];
      if (s == kEmpty) {
        int& mine_slot = slot[level_start_[l] + i];
        if (carrier == kPersistent) {
          mine_slot = kPersistent;
        } else {
          std::byte* keep = scratch_block(carrier, b);
          if (!owned) std::memcpy(keep, data, bytes);
          mine_slot = carrier;
        }
        return;
      }
      const std::byte* other = s == kPersistent ? in_ + elem0(b) * esize_ : scratch_block(s, b);
      const std::byte* left = (i & 1) ? other : data;
      const std::byte* right = (i & 1) ? data : other;
      std::byte* dst;
      int dst_id;
      if (l + 1 == levels_) {
        dst = out;
        dst_id = -3;
      } else if (s >= 0) {
        dst = scratch_block(s, b);
        dst_id = s;
      } else if (owned) {
        dst = scratch_block(carrier, b);
        dst_id = carrier;
      } else {  // persistent + transient: the transient value's leaf scratch is free
        dst_id = carrier == kPersistent ? s : carrier;
        dst = scratch_block(dst_id, b);
      }
      red_.combine(dst, left, right, n);
      s = kEmpty;
      if (dst_id == -3) {
        root_done_ = true;
        return;
      }
      data = dst;
      carrier = dst_id;
      owned = true;
      ++l;
      i >>= 1;
    }
  }

  AllreduceArgs args_;
  Algorithm algo_;
  Reducer red_;
  std::size_t esize_ = 1;
  std::uint64_t epb_ = 1;  // elements per block
  std::uint32_t nblocks_ = 0;
  std::vector<std::uint32_t> first_;  // first block of each rank's range, P + 1 entries
  std::uint32_t max_chunk_ = 0, b0_ = 0, b1_ = 0;
  std::size_t chunk_bytes_ = 0;
  const std::byte* in_ = nullptr;
  std::byte* out_ = nullptr;
  int buffers_ = 1;
  std::vector<std::uint32_t> arrived_;
  std::vector<std::uint8_t> seen_, got_result_, filled_;
  std::uint32_t results_received_ = 0;
  std::vector<std::uint32_t> ready_;
  std::size_t res_cursor_ = 0;
  int res_k_ = 0;
  std::uint32_t contrib_j_ = 0;
  int contrib_k_ = 0;
  // tree
  int levels_ = 0;
  std::vector<int> level_nodes_, level_start_;
  std::vector<int> slots_;
  bool root_done_ = false;
};

bool overlap(const void* a, const void* b, std::size_t bytes) {
  const auto x = reinterpret_cast<std::uintptr_t>(a), y = reinterpret_cast<std::uintptr_t>(b);
  return x != y && x < y + bytes && y < x + bytes;
}

}  // namespace

Algorithm Communicator::allreduce(const AllreduceArgs& a) {
  wire::Descriptor d = begin_descriptor(wire::Collective::kDense, a.dtype, a.op);
  d.flags = a.reproducible ? 1 : 0;
  d.count = a.count;
  const auto type = data_type_from_int(a.dtype);
  const auto op = reduce_op_from_int(a.op);
  LocalError err = LocalError::kNone;
  Algorithm algo = Algorithm::kAuto;
  if (!type || a.dtype > 255) {
    err = LocalError::kBadDataType;
  } else if (!op || a.op > 255) {
    err = LocalError::kBadOp;
  } else if (*op == ReduceOp::kUser && (a.user == nullptr || a.user->fn == nullptr)) {
    err = LocalError::kNoUserFunction;
  } else if (a.algorithm < 0 || a.algorithm >= kAlgorithmCount) {
    err = LocalError::kBadAlgorithm;
  } else if (a.count > 0 && (a.send == nullptr || a.recv == nullptr)) {
    err = LocalError::kNullBuffer;
  } else {
    const std::size_t es = element_size(*type);
    if (a.count > (std::uint64_t{1} << 60) / es ||
        a.count / ((packet_bytes_ - wire::kHeaderBytes) / es) >= 0xffffffffu) {
      err = LocalError::kTooLarge;
    } else if (overlap(a.send, a.recv, a.count * es)) {
      err = LocalError::kOverlap;
    } else {
      const bool commutative = *op != ReduceOp::kUser || a.user->commutative;
      algo = static_cast<Algorithm>(a.algorithm);
      if (algo == Algorithm::kAuto) algo = choose_algorithm(a.count * es, a.reproducible);
      if (a.reproducible || !commutative) {
        if (a.algorithm != 0 && algo != Algorithm::kTree) err = LocalError::kNonCommutativeDesign;
        algo = Algorithm::kTree;
      }
    }
  }
  if (op && *op == ReduceOp::kUser && a.user != nullptr) d.user_op_id = a.user->id;
  d.local_error = static_cast<std::int32_t>(err);
  const Reducer reducer(type.value_or(DataType::kInt8), op.value_or(ReduceOp::kSum), a.user);
  DenseOp dense(*this, d, a, algo, reducer);
  stats_ = OpStats{};
  stats_.algorithm = algo;
  run(dense);
  stats_.algorithm = algo;
  return algo;
}

}  // namespace netsparse::collectives
