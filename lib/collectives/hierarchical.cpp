// Hierarchical dense and sparse allreduce (hierarchical.hpp).
#include "collectives/hierarchical.hpp"

#include <algorithm>
#include <array>
#include <cstring>
#include <numeric>
#include <optional>

namespace netsparse::collectives {
namespace {

// What a leader tells its host after the host step: whether the operation failed above the
// host (and why), and for the sparse allreduce the result's form. Broadcast as bytes.
struct Verdict {
  std::int32_t failure = 0;  // 0: none, else Failure + 1
  std::uint8_t dense = 0;
  std::uint64_t size = 0;  // sparse: result entries (n when dense)
  std::string reason;
};
constexpr std::size_t kVerdictBytes = 256;
constexpr std::size_t kReasonOffset = 16;

std::array<std::byte, kVerdictBytes> encode(const Verdict& v) {
  std::array<std::byte, kVerdictBytes> out{};
  std::memcpy(out.data(), &v.failure, 4);
  out[4] = static_cast<std::byte>(v.dense);
  std::memcpy(out.data() + 8, &v.size, 8);
  const std::size_t n = std::min(v.reason.size(), kVerdictBytes - kReasonOffset - 1);
  std::memcpy(out.data() + kReasonOffset, v.reason.data(), n);
  return out;
}
Verdict decode(const std::array<std::byte, kVerdictBytes>& in) {
  Verdict v;
  std::memcpy(&v.failure, in.data(), 4);
  v.dense = static_cast<std::uint8_t>(in[4]);
  std::memcpy(&v.size, in.data() + 8, 8);
  const char* text = reinterpret_cast<const char*>(in.data() + kReasonOffset);
  v.reason.assign(text, strnlen(text, kVerdictBytes - kReasonOffset - 1));
  return v;
}

constexpr int kBytes = static_cast<int>(DataType::kInt8);

// A failure of the leaders' step as the ranks of a host see it (ranks there are hosts).
std::string across_hosts(const CollectiveError& e) {
  return std::string("between the host leaders (rank = host): ") + e.what();
}

// A failure of this host's own communicator (its ranks are numbered inside the host).
CollectiveError inside_host(const CollectiveError& e) {
  return CollectiveError(e.failure(),
                         std::string("inside this host (rank = rank in the host): ") + e.what());
}

// Why a non-leader's recv would be refused: the host step is a reduce (recv unused away from
// its root) but the broadcast down writes recv on every rank, so it is checked here, in the
// first step, where a refusal reaches every rank of every host.
LocalError recv_error(const AllreduceArgs& a) {
  const auto type = data_type_from_int(a.dtype);
  if (!type || a.count == 0) return LocalError::kNone;
  if (a.recv == nullptr) return LocalError::kNullBuffer;
  if (a.send == nullptr || a.send == a.recv) return LocalError::kNone;
  const std::uint64_t limit = (std::uint64_t{1} << 60) / element_size(*type);
  if (a.count > limit) return LocalError::kNone;  // the host step refuses it
  const std::size_t bytes = a.count * element_size(*type);
  const auto s = reinterpret_cast<std::uintptr_t>(a.send);
  const auto r = reinterpret_cast<std::uintptr_t>(a.recv);
  return s < r + bytes && r < s + bytes ? LocalError::kOverlap : LocalError::kNone;
}

}  // namespace

Hierarchy::Hierarchy(std::unique_ptr<Communicator> host, std::unique_ptr<Communicator> leaders)
    : host_(std::move(host)), leaders_(std::move(leaders)) {
  if (!host_) throw std::invalid_argument("Hierarchy: no host communicator");
  if ((host_->rank() == 0) != (leaders_ != nullptr))
    throw std::invalid_argument("Hierarchy: the leaders' communicator belongs to host rank 0");
  // One host: nothing of the host step crosses hosts. The leaders' ranks are hosts of their own
  // (the default map), so everything they send counts.
  host_->set_hosts(std::vector<int>(static_cast<std::size_t>(host_->size()), 0));
}

void Hierarchy::set_timeout_ms(int ms) noexcept {
  host_->set_timeout_ms(ms);
  if (leaders_) leaders_->set_timeout_ms(ms);
}

void Hierarchy::add_stats(const Communicator& c) {
  stats_.bytes_sent += c.last_stats().bytes_sent;
  stats_.inter_host_bytes += c.last_stats().inter_host_bytes;
}

void Hierarchy::throw_host_verdict(const CollectiveError* upper, const CollectiveError& down) {
  // A broadcast that broke the host communicator (a dead rank, the deadline) is the answer.
  if (down.failure() != Failure::kInvalid) throw inside_host(down);
  Verdict v;
  if (leader()) {
    const CollectiveError& e = upper != nullptr ? *upper : down;
    v.failure = static_cast<std::int32_t>(e.failure()) + 1;
    v.reason = upper != nullptr ? across_hosts(*upper) : std::string(down.what());
  }
  std::array<std::byte, kVerdictBytes> bytes = encode(v);
  try {
    host_->broadcast(bytes.data(), kVerdictBytes, kBytes, 0);
  } catch (const CollectiveError& e) {
    add_stats(*host_);
    throw inside_host(e);
  }
  add_stats(*host_);
  v = decode(bytes);
  if (v.failure <= 0) throw inside_host(down);
  throw CollectiveError(static_cast<Failure>(v.failure - 1), v.reason);
}

Algorithm Hierarchy::allreduce(const AllreduceArgs& a) {
  stats_ = OpStats{};
  if (host_->size() == 1) {  // a host of one rank: its leader's step is the whole operation
    struct Record {
      Hierarchy* h;
      ~Record() { h->add_stats(*h->leaders_); }
    } record{this};
    try {
      stats_.algorithm = leaders_->allreduce(a);
    } catch (const CollectiveError& e) {
      throw CollectiveError(e.failure(), across_hosts(e));
    }
    return stats_.algorithm;
  }
  // 1. inside the host: the leader gets the host's reduction (in recv)
  AllreduceArgs up = a;
  up.root = 0;
  if (up.refuse == LocalError::kNone) up.refuse = recv_error(a);
  Algorithm algo = Algorithm::kAuto;
  try {
    algo = host_->reduce(up);
    add_stats(*host_);
  } catch (const CollectiveError& e) {
    add_stats(*host_);
    if (leaders_) {  // the other hosts must hear it: refuse the leaders' step
      AllreduceArgs refused = a;
      refused.send = a.recv;
      refused.refuse = LocalError::kHostFailed;
      try {
        leaders_->allreduce(refused);
      } catch (const CollectiveError&) {
      }
      add_stats(*leaders_);
    }
    throw inside_host(e);
  }
  // 2. across hosts, between the leaders, in place in recv
  std::optional<CollectiveError> upper;
  if (leaders_) {
    AllreduceArgs across = a;
    across.send = a.recv;
    try {
      algo = leaders_->allreduce(across);
    } catch (const CollectiveError& e) {
      upper = e;
    }
    add_stats(*leaders_);
  }
  // 3. down inside the host (refused by a leader whose step 2 failed; then it says why)
  try {
    host_->broadcast(a.recv, a.count, a.dtype, 0,
                     upper ? LocalError::kHostFailed : LocalError::kNone);
    add_stats(*host_);
  } catch (const CollectiveError& e) {
    add_stats(*host_);
    throw_host_verdict(upper ? &*upper : nullptr, e);
  }
  stats_.algorithm = algo;
  return algo;
}

SparseResult Hierarchy::sparse_allreduce(const SparseArgs& a) {
  stats_ = OpStats{};
  if (host_->size() == 1) {
    struct Record {
      Hierarchy* h;
      ~Record() { h->add_stats(*h->leaders_); }
    } record{this};
    try {
      return leaders_->sparse_allreduce(a);
    } catch (const CollectiveError& e) {
      throw CollectiveError(e.failure(), across_hosts(e));
    }
  }
  // 1. inside the host: every rank of it gets the host's sum (the leader uses it)
  SparseArgs inside = a;
  inside.output = SparseOutput::kAuto;
  inside.dense_out = nullptr;  // the user's buffer is for the final result
  SparseResult host_sum;
  try {
    host_sum = host_->sparse_allreduce(inside);
    add_stats(*host_);
  } catch (const CollectiveError& e) {
    add_stats(*host_);
    if (leaders_) {
      SparseArgs refused = a;
      refused.nnz = 0;
      refused.refuse = LocalError::kHostFailed;
      try {
        leaders_->sparse_allreduce(refused);
      } catch (const CollectiveError&) {
      }
      add_stats(*leaders_);
    }
    throw inside_host(e);
  }
  const DataType dtype = host_sum.dtype;
  const std::size_t es = element_size(dtype);
  // 2. across hosts: the host sums, as entries
  SparseResult result;
  Verdict v;
  if (leaders_) {
    SparseArgs across = a;
    std::vector<std::uint64_t> all;
    if (host_sum.dense) {  // every element an entry (a zero included: -0 stays -0)
      all.resize(host_sum.n);
      std::iota(all.begin(), all.end(), std::uint64_t{0});
      across.idx = all.data();
      across.nnz = host_sum.n;
    } else {
      across.idx = host_sum.indices.data();
      across.nnz = host_sum.indices.size();
    }
    across.values = host_sum.data();
    try {
      result = leaders_->sparse_allreduce(across);
      v.dense = result.dense ? 1 : 0;
      v.size = result.size();
    } catch (const CollectiveError& e) {
      v.failure = static_cast<std::int32_t>(e.failure()) + 1;
      v.reason = across_hosts(e);
    }
    add_stats(*leaders_);
  }
  host_sum = SparseResult{};
  // 3. down: the verdict and the result's form, then the result
  std::array<std::byte, kVerdictBytes> bytes = encode(v);
  const auto down = [&](void* buffer, std::uint64_t n) {
    try {
      host_->broadcast(buffer, n, kBytes, 0);
    } catch (const CollectiveError& e) {
      add_stats(*host_);
      throw inside_host(e);
    }
    add_stats(*host_);
  };
  down(bytes.data(), kVerdictBytes);
  v = decode(bytes);
  if (v.failure > 0) throw CollectiveError(static_cast<Failure>(v.failure - 1), v.reason);
  if (!leaders_) {
    result.n = a.n;
    result.dtype = dtype;
    result.dense = v.dense != 0;
    if (!result.dense) result.indices.resize(v.size);
    if (result.dense && a.dense_out != nullptr)
      result.dense_external = static_cast<std::byte*>(a.dense_out);
    else
      result.values = ByteBuffer(std::max<std::size_t>(v.size * es, 1));
  }
  if (v.size > 0) {
    if (!result.dense) down(result.indices.data(), v.size * sizeof(std::uint64_t));
    down(result.dense_external != nullptr ? result.dense_external : result.values.data(),
         v.size * es);
  }
  return result;
}

}  // namespace netsparse::collectives
