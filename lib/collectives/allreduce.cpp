// Dense allreduce: blocks of one packet, contiguous ranges of blocks per aggregator, Flare's
// three aggregation designs (communicator.hpp, docs/collectives.md).
#include <algorithm>
#include <cstring>
#include <optional>

#include "collectives/communicator.hpp"
#include "collectives/op.hpp"

namespace netsparse::collectives {
namespace {

constexpr int kEmpty = -2;       // tree slot: no value yet
constexpr int kPersistent = -1;  // tree slot: this rank's own input (read-only)

// Which collective a DenseOp runs. Every one is the same pattern over blocks of one packet, each
// owned by one rank (its aggregator): contributions go to the owner, the owner sends the block's
// result on. What differs is who contributes, where results go and which memory holds them.
//   allreduce       everyone contributes; results to every rank
//   reduce          everyone contributes; results to the root only
//   reduce-scatter  everyone contributes; no results (the owner's segment is its output)
//   broadcast       the root contributes; results to every rank but the root
//   all-gather      nobody contributes (the owner's segment is its own input); results to all
//   barrier         no blocks: the descriptors' exchange is the whole operation
using Kind = wire::Collective;

class DenseOp final : public Communicator::Op {
 public:
  DenseOp(Communicator& c, const wire::Descriptor& d, const AllreduceArgs& a, Algorithm algo,
          const Reducer& reducer)
      : Op(c, d), args_(a), kind_(d.collective), algo_(algo), red_(reducer) {
    if (!args_ok) return;
    root_ = static_cast<int>(d.root);
    esize_ = red_.element_bytes();
    epb_ = (comm.packet_bytes() - wire::kHeaderBytes) / esize_;
    first_.resize(static_cast<std::size_t>(P) + 1);
    seg_.resize(static_cast<std::size_t>(P) + 1);
    if (kind_ == Kind::kAllgather || kind_ == Kind::kReduceScatter) {
      // One segment of a.count elements per rank (uneven blocks at each segment's end).
      const std::uint64_t per = (a.count + epb_ - 1) / epb_;
      for (int r = 0; r <= P; ++r) {
        first_[static_cast<std::size_t>(r)] = static_cast<std::uint32_t>(per * r);
        seg_[static_cast<std::size_t>(r)] = a.count * static_cast<std::uint64_t>(r);
      }
      nblocks_ = first_[static_cast<std::size_t>(P)];
    } else {
      // One vector of a.count elements, blocks split evenly between the ranks -- or, for a
      // star (reduce and broadcast), all of them the root's.
      nblocks_ = static_cast<std::uint32_t>((a.count + epb_ - 1) / epb_);
      const bool star = a.star && (kind_ == Kind::kReduce || kind_ == Kind::kBcast);
      for (int r = 0; r <= P; ++r) {
        first_[static_cast<std::size_t>(r)] =
            star ? (r <= root_ ? 0u : nblocks_)
                 : static_cast<std::uint32_t>(std::uint64_t{nblocks_} *
                                              static_cast<std::uint64_t>(r) / P);
        seg_[static_cast<std::size_t>(r)] = std::min<std::uint64_t>(
            std::uint64_t{first_[static_cast<std::size_t>(r)]} * epb_, a.count);
      }
    }
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
    // A reduce's non-root owners combine in scratch (their recv is not theirs to use). The id
    // is past every id the tree (leaf ranks) and the B buffers (1..3) use.
    acc_id_ = std::max(P, 4);
    const bool reduction =
        kind_ == Kind::kDense || kind_ == Kind::kReduce || kind_ == Kind::kReduceScatter;
    contributes_ = reduction || (kind_ == Kind::kBcast && me == root_);
    expected_contribs_ = reduction                              ? static_cast<std::uint32_t>(P - 1)
                         : kind_ == Kind::kBcast && me != root_ ? 1u
                                                                : 0u;
    if (!contributes_) contrib_j_ = max_chunk_;
    // Results this rank receives: every block it does not own, if results come to it at all.
    const bool gets_results = kind_ == Kind::kDense || kind_ == Kind::kAllgather ||
                              (kind_ == Kind::kBcast && me != root_) ||
                              (kind_ == Kind::kReduce && me == root_);
    expected_results_ = gets_results ? nblocks_ - mine : 0;
    if (algo_ == Algorithm::kMultiBuffer2) buffers_ = 2;
    if (algo_ == Algorithm::kMultiBuffer4) buffers_ = 4;
    const bool tree = reduction && algo_ == Algorithm::kTree;
    if (tree) {
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
    if (mine == 0) return;
    // This rank's own part of its blocks enters first.
    const std::size_t seg_bytes = (seg_[me + 1] - seg_[me]) * esize_;
    if (!reduction) {
      // Broadcast at the root and all-gather: the owner's segment is its input, ready now.
      if (kind_ == Kind::kAllgather && out_at(b0_) != in_at(b0_))
        std::memcpy(out_at(b0_), in_at(b0_), seg_bytes);
      if (P > 1 && (kind_ == Kind::kAllgather || me == root_))
        for (std::uint32_t b = b0_; b < b1_; ++b) complete(b);
      return;
    }
    if (P == 1) {
      if (out_at(b0_) != in_at(b0_)) std::memcpy(out_at(b0_), in_at(b0_), seg_bytes);
      return;
    }
    if (tree) {
      for (std::uint32_t b = b0_; b < b1_; ++b) tree_arrive(b, me, in_at(b), kPersistent);
    } else if (out_at(b0_) != in_at(b0_)) {
      std::memcpy(out_at(b0_), in_at(b0_), seg_bytes);
    }
  }

  bool finished() const override {
    if (!args_ok) return true;
    if (P == 1) return true;
    return results_received_ == expected_results_ && arrived_all_ == b1_ - b0_ &&
           res_cursor_ == ready_.size() && contrib_j_ == max_chunk_;
  }

  bool pump() override {
    if (!args_ok || P == 1) return false;
    bool progress = false;
    // Results first: they are what the other ranks wait for.
    while (res_cursor_ < ready_.size()) {
      const std::uint32_t b = ready_[res_cursor_];
      const int dest = (me + 1 + res_k_) % P;
      if (result_to(dest)) {
        if (!send_block(dest, wire::Kind::kResult, b, out_at(b))) return progress;
        progress = true;
      }
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
        if (!send_block(dest, wire::Kind::kContribution, b, in_at(b))) return progress;
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
      if (expected_results_ == 0 || owner(h.block) != src || owner(h.block) == me ||
          got_result_[h.block]) {
        record_failure(Failure::kProtocol, "unexpected result of block " + std::to_string(h.block) +
                                               " from rank " + std::to_string(src));
        return;
      }
      got_result_[h.block] = 1;
      ++results_received_;
      std::memcpy(out_at(h.block), payload, std::size_t{h.count} * esize_);
    } else if (h.kind == wire::Kind::kContribution) {
      if (h.block < b0_ || h.block >= b1_ || seen_[std::size_t{h.block - b0_} * P + src] ||
          expected_contribs_ == 0 || (kind_ == Kind::kBcast && src != root_)) {
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
  // First element of block b in the whole vector (all ranks' segments end to end).
  std::uint64_t elem0(std::uint32_t b) const {
    const int r = owner(b);
    return seg_[r] + std::uint64_t{b - first_[r]} * epb_;
  }
  std::uint32_t block_elems(std::uint32_t b) const {
    return static_cast<std::uint32_t>(std::min<std::uint64_t>(epb_, seg_[owner(b) + 1] - elem0(b)));
  }
  // Where block b's input is on this rank: the whole vector in send, except all-gather's (only
  // this rank's segment) and a broadcast's (the buffer, at the root).
  const std::byte* in_at(std::uint32_t b) const {
    if (kind_ == Kind::kAllgather) return in_ + (elem0(b) - seg_[me]) * esize_;
    if (kind_ == Kind::kBcast) return out_ + elem0(b) * esize_;
    return in_ + elem0(b) * esize_;
  }
  // Where block b's result goes on this rank: recv holds the whole vector, except
  // reduce-scatter's (this rank's segment) and a reduce's away from the root (scratch).
  std::byte* out_at(std::uint32_t b) {
    if (kind_ == Kind::kReduceScatter) return out_ + (elem0(b) - seg_[me]) * esize_;
    if (kind_ == Kind::kReduce && me != root_) return scratch_block(acc_id_, b);
    return out_ + elem0(b) * esize_;
  }
  bool result_to(int dest) const {
    switch (kind_) {
      case Kind::kReduce:
        return dest == root_;
      case Kind::kReduceScatter:
        return false;
      case Kind::kBcast:
        return dest != root_;
      default:
        return true;
    }
  }
  int owner(std::uint32_t b) const {
    return static_cast<int>(std::upper_bound(first_.begin(), first_.end(), b) - first_.begin()) - 1;
  }
  std::byte* scratch_block(int id, std::uint32_t b) {
    return scratch(static_cast<std::size_t>(id), chunk_bytes_) +
           std::size_t{b - b0_} * epb_ * esize_;
  }

  bool send_block(int dest, wire::Kind kind, std::uint32_t b, const std::byte* src) {
    const std::uint32_t n = block_elems(b);
    const std::size_t payload = std::size_t{n} * esize_;
    return send(dest, wire::kHeaderBytes + payload, [&](std::byte* o) {
      wire::encode_header(wire::Header{kind, 0, seq, b, n, 0, 0, 0}, o);
      std::memcpy(o + wire::kHeaderBytes, src, payload);
    });
  }

  void complete(std::uint32_t b) {
    ++arrived_all_;
    ready_.push_back(b);
  }

  // One contribution (rank src's values of block b, valid during the call) at the aggregator.
  void accept(std::uint32_t b, int src, const std::byte* data) {
    const std::uint32_t n = block_elems(b);
    const std::size_t i = b - b0_;
    std::byte* out = out_at(b);
    if (kind_ == Kind::kBcast) {  // the root's values: nothing to combine
      std::memcpy(out, data, std::size_t{n} * esize_);
      ++arrived_[i];
      complete(b);
      return;
    }
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
    if (++arrived_[i] == expected_contribs_) {
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
    std::byte* out = out_at(b);
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
      const std::byte* other = s == kPersistent ? in_at(b) : scratch_block(s, b);
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
  Kind kind_;
  int root_ = 0;
  Algorithm algo_;
  Reducer red_;
  std::size_t esize_ = 1;
  std::uint64_t epb_ = 1;  // elements per block
  std::uint32_t nblocks_ = 0;
  std::vector<std::uint32_t> first_;  // first block of each rank's range, P + 1 entries
  std::vector<std::uint64_t> seg_;    // first element of each rank's range, P + 1 entries
  int acc_id_ = 4;
  bool contributes_ = true;
  std::uint32_t expected_contribs_ = 0, expected_results_ = 0;
  std::uint32_t arrived_all_ = 0;  // own blocks complete
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

// Whether [a, a + a_bytes) and [b, b + b_bytes) share a byte.
bool overlap(const void* a, const void* b, std::size_t a_bytes, std::size_t b_bytes) {
  const auto x = reinterpret_cast<std::uintptr_t>(a), y = reinterpret_cast<std::uintptr_t>(b);
  return x < y + b_bytes && y < x + a_bytes;
}

// The barrier: the descriptors' exchange is all of it (no rank can finish before every rank's
// descriptor arrived). No blocks, so none of DenseOp's per-operation arrays: their allocations
// and setup were a good part of ns_barrier's time at np 2 (issue 39: 3.5x MPI_Barrier).
class BarrierOp final : public Communicator::Op {
 public:
  using Op::Op;
  void on_data(int src, const wire::Header& h, std::span<const std::byte>) override {
    record_failure(Failure::kProtocol, "a data packet (block " + std::to_string(h.block) +
                                           ") from rank " + std::to_string(src) + " in a barrier");
  }
  bool pump() override { return false; }
  bool finished() const override { return true; }
};

}  // namespace

std::unique_ptr<Communicator::Op> Communicator::make_dense(wire::Collective kind,
                                                           const AllreduceArgs& a,
                                                           Algorithm* algorithm) {
  const bool reduction = kind == wire::Collective::kDense || kind == wire::Collective::kReduce ||
                         kind == wire::Collective::kReduceScatter;
  const bool rooted = kind == wire::Collective::kReduce || kind == wire::Collective::kBcast;
  // Operator and design matter to reductions only; the others agree on op 0.
  wire::Descriptor d = begin_descriptor(kind, a.dtype, reduction ? a.op : 0);
  d.flags = reduction && a.reproducible ? 1 : 0;
  d.count = a.count;
  d.root = rooted && a.root >= 0 ? static_cast<std::uint64_t>(a.root) : 0;
  const int P = size(), me = rank();
  const auto type = data_type_from_int(a.dtype);
  const auto op = reduction ? reduce_op_from_int(a.op) : std::optional<ReduceOp>(ReduceOp::kSum);
  // Elements of send and recv on this rank (the vector's, a segment's or the gathered whole).
  std::uint64_t send_n = a.count, recv_n = a.count;
  if (kind == wire::Collective::kAllgather) recv_n = a.count * static_cast<std::uint64_t>(P);
  if (kind == wire::Collective::kReduceScatter) send_n = a.count * static_cast<std::uint64_t>(P);
  const bool needs_send = kind != wire::Collective::kBcast && kind != wire::Collective::kBarrier;
  const bool needs_recv =
      kind != wire::Collective::kBarrier && !(kind == wire::Collective::kReduce && me != a.root);
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
  } else if (rooted && (a.root < 0 || a.root >= P)) {
    err = LocalError::kBadRoot;
  } else if (a.count > 0 &&
             ((needs_send && a.send == nullptr) || (needs_recv && a.recv == nullptr))) {
    err = LocalError::kNullBuffer;
  } else {
    const std::size_t es = element_size(*type);
    const std::uint64_t epb = (packet_bytes_ - wire::kHeaderBytes) / es;
    const std::uint64_t whole = std::max(send_n, recv_n);
    const std::uint64_t blocks =
        (kind == wire::Collective::kAllgather || kind == wire::Collective::kReduceScatter)
            ? (a.count + epb - 1) / epb * static_cast<std::uint64_t>(P)
            : (a.count + epb - 1) / epb;
    if (a.count > (std::uint64_t{1} << 60) / es / static_cast<std::uint64_t>(P) ||
        blocks >= 0xffffffffu) {
      err = LocalError::kTooLarge;
    } else if (needs_send && needs_recv && a.count > 0) {
      // In place: the same address (allreduce, reduce), or this rank's segment of the larger
      // buffer (all-gather: send inside recv; reduce-scatter: recv inside send).
      const auto* s = static_cast<const std::byte*>(a.send);
      const auto* r = static_cast<const std::byte*>(a.recv);
      const std::uint64_t seg = a.count * es * static_cast<std::uint64_t>(me);
      bool bad;
      if (kind == wire::Collective::kAllgather)
        bad = s != r + seg && overlap(s, r, send_n * es, recv_n * es);
      else if (kind == wire::Collective::kReduceScatter)
        bad = r != s + seg && overlap(s, r, send_n * es, recv_n * es);
      else
        bad = s != r && overlap(s, r, whole * es, whole * es);
      if (bad) err = LocalError::kOverlap;
    }
    if (err == LocalError::kNone && reduction) {
      const bool commutative = *op != ReduceOp::kUser || a.user->commutative;
      algo = static_cast<Algorithm>(a.algorithm);
      if (algo == Algorithm::kAuto) algo = choose_algorithm(send_n * es, a.reproducible);
      if (a.reproducible || !commutative) {
        if (a.algorithm != 0 && algo != Algorithm::kTree) err = LocalError::kNonCommutativeDesign;
        algo = Algorithm::kTree;
      }
    }
  }
  if (err == LocalError::kNone && a.refuse != LocalError::kNone) err = a.refuse;
  if (op && *op == ReduceOp::kUser && a.user != nullptr) d.user_op_id = a.user->id;
  d.local_error = static_cast<std::int32_t>(err);
  const Reducer reducer(type.value_or(DataType::kInt8), op.value_or(ReduceOp::kSum), a.user);
  AllreduceArgs args = a;
  if (kind == wire::Collective::kBarrier) args.count = 0;
  args.user = nullptr;  // the reducer holds its own copy (a started operation outlives a)
  *algorithm = algo;
  return std::make_unique<DenseOp>(*this, d, args, algo, reducer);
}

Algorithm Communicator::dense_collective(wire::Collective kind, const AllreduceArgs& a) {
  Algorithm algo = Algorithm::kAuto;
  const std::unique_ptr<Op> op = make_dense(kind, a, &algo);
  stats_ = OpStats{};
  stats_.algorithm = algo;
  run(*op);
  stats_.algorithm = algo;
  return algo;
}

Algorithm Communicator::allreduce(const AllreduceArgs& a) {
  return dense_collective(wire::Collective::kDense, a);
}
Algorithm Communicator::reduce(const AllreduceArgs& a) {
  return dense_collective(wire::Collective::kReduce, a);
}
Algorithm Communicator::reduce_scatter(const AllreduceArgs& a) {
  return dense_collective(wire::Collective::kReduceScatter, a);
}
AllreduceArgs Communicator::broadcast_args(void* buffer, std::uint64_t count, int dtype, int root,
                                           LocalError refuse, bool star) {
  AllreduceArgs a;
  a.refuse = refuse;
  a.star = star;
  a.send = buffer;
  a.recv = buffer;
  a.count = count;
  a.dtype = dtype;
  a.root = root;
  return a;
}
void Communicator::broadcast(void* buffer, std::uint64_t count, int dtype, int root,
                             LocalError refuse, bool star) {
  dense_collective(wire::Collective::kBcast,
                   broadcast_args(buffer, count, dtype, root, refuse, star));
}
void Communicator::allgather(const void* send, void* recv, std::uint64_t count, int dtype) {
  AllreduceArgs a;
  a.send = send;
  a.recv = recv;
  a.count = count;
  a.dtype = dtype;
  dense_collective(wire::Collective::kAllgather, a);
}
void Communicator::barrier() {
  // The descriptor make_dense builds for a barrier (the same fields, so the same agreement with
  // any rank), without the dense operation around it.
  wire::Descriptor d =
      begin_descriptor(wire::Collective::kBarrier, static_cast<int>(DataType::kInt8), 0);
  BarrierOp op(*this, d);
  stats_ = OpStats{};
  stats_.algorithm = Algorithm::kAuto;
  run(op);
}

}  // namespace netsparse::collectives
