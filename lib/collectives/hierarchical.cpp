// Hierarchical dense and sparse allreduce (hierarchical.hpp).
#include "collectives/hierarchical.hpp"

#include <algorithm>
#include <array>
#include <chrono>
#include <cstring>
#include <numeric>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>

#include "support/backoff.hpp"

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

// A sparse allreduce's result in the form the caller asked for. The rack level moves its result
// between hosts in the smaller form (kAuto), and each leader converts it here: a dense result
// asked for as entries keeps the elements whose bits are not all zero (as the flat operation's
// dense blocks do: -0 stays an entry), entries asked for dense are scattered into zeros (or into
// the caller's dense_out).
SparseResult in_form(SparseResult r, SparseOutput want, void* dense_out) {
  const std::size_t es = element_size(r.dtype);
  if (want == SparseOutput::kDense && !r.dense) {
    SparseResult d;
    d.n = r.n;
    d.dtype = r.dtype;
    d.dense = true;
    std::byte* out = nullptr;
    if (dense_out != nullptr) {
      d.dense_external = static_cast<std::byte*>(dense_out);
      out = d.dense_external;
      std::memset(out, 0, r.n * es);
    } else {
      d.values = ByteBuffer(std::max<std::size_t>(r.n * es, 1));  // zero-filled
      out = d.values.data();
    }
    for (std::size_t k = 0; k < r.indices.size(); ++k)
      std::memcpy(out + r.indices[k] * es, r.values.data() + k * es, es);
    return d;
  }
  if (want == SparseOutput::kSparse && r.dense) {
    const std::byte* in = r.data();
    const auto nonzero = [&](std::uint64_t i) {
      for (std::size_t j = 0; j < es; ++j)
        if (in[i * es + j] != std::byte{0}) return true;
      return false;
    };
    std::uint64_t total = 0;
    for (std::uint64_t i = 0; i < r.n; ++i) total += nonzero(i) ? 1 : 0;
    SparseResult s;
    s.n = r.n;
    s.dtype = r.dtype;
    s.indices.resize(total);
    s.values = ByteBuffer(std::max<std::size_t>(total * es, 1));
    std::uint64_t k = 0;
    for (std::uint64_t i = 0; i < r.n; ++i)
      if (nonzero(i)) {
        s.indices[k] = i;
        std::memcpy(s.values.data() + k * es, in + i * es, es);
        ++k;
      }
    return s;
  }
  if (want == SparseOutput::kDense && dense_out != nullptr && r.dense_external == nullptr) {
    std::memcpy(dense_out, r.values.data(), r.n * es);  // the caller's buffer holds the result
    r.dense_external = static_cast<std::byte*>(dense_out);
    r.values = ByteBuffer();
  }
  return r;
}

}  // namespace

constexpr const char* kHostLevel = "this host (rank = rank in the host)";
constexpr const char* kLeadersLevel = "the host leaders (rank = host)";

Hierarchy::Hierarchy(std::unique_ptr<Communicator> host, std::unique_ptr<Communicator> leaders)
    : Hierarchy(std::move(host), std::move(leaders), nullptr, {kHostLevel, kLeadersLevel}, true) {}

Hierarchy::Hierarchy(std::unique_ptr<Communicator> host, std::unique_ptr<Hierarchy> racks)
    : Hierarchy(std::move(host), nullptr, std::move(racks), {kHostLevel, kLeadersLevel}, true) {}

std::unique_ptr<Hierarchy> Hierarchy::make_rack_level(std::unique_ptr<Communicator> rack,
                                                      std::unique_ptr<Communicator> switches) {
  return std::unique_ptr<Hierarchy>(new Hierarchy(
      std::move(rack), std::move(switches), nullptr,
      {"this rack (rank = host in the rack)", "the rack switches (rank = rack)"}, false));
}

Hierarchy::Hierarchy(std::unique_ptr<Communicator> lower, std::unique_ptr<Communicator> leaders,
                     std::unique_ptr<Hierarchy> racks, Names names, bool lower_is_one_host)
    : host_(std::move(lower)),
      leaders_(std::move(leaders)),
      racks_(std::move(racks)),
      names_(names),
      star_(!lower_is_one_host) {
  if (!host_) throw std::invalid_argument("Hierarchy: no host communicator");
  if ((host_->rank() == 0) != leader())
    throw std::invalid_argument("Hierarchy: the leaders' step belongs to host rank 0");
  const std::size_t n = static_cast<std::size_t>(host_->size());
  // One host: nothing of the host step crosses hosts. The rack level's lower communicator is a
  // rack's host leaders, each a host of its own (the default map), so everything it sends
  // counts as inter-host; the switches are racks (and hosts) of their own: everything they
  // send counts as inter-rack. The flat leaders' communicator gets its racks from
  // make_hierarchy, so that the two routes' inter-rack bytes compare.
  if (lower_is_one_host) host_->set_hosts(std::vector<int>(n, 0));
  host_->set_racks(std::vector<int>(n, 0));
}

void Hierarchy::set_timeout_ms(int ms) noexcept {
  host_->set_timeout_ms(ms);
  if (leaders_) leaders_->set_timeout_ms(ms);
  if (racks_) racks_->set_timeout_ms(ms);
}

void Hierarchy::add_stats(const OpStats& s) {
  stats_.bytes_sent += s.bytes_sent;
  stats_.inter_host_bytes += s.inter_host_bytes;
  stats_.inter_rack_bytes += s.inter_rack_bytes;
}

void Hierarchy::add_upper_stats() {
  if (leaders_) add_stats(leaders_->last_stats());
  if (racks_) add_stats(racks_->last_stats());
}

Algorithm Hierarchy::upper_allreduce(const AllreduceArgs& args) {
  return leaders_ ? leaders_->allreduce(args) : racks_->allreduce(args);
}

SparseResult Hierarchy::upper_sparse_allreduce(const SparseArgs& args) {
  return leaders_ ? leaders_->sparse_allreduce(args) : racks_->sparse_allreduce(args);
}

// A failure of the lower communicator (its ranks are numbered inside the host or rack).
CollectiveError Hierarchy::inside(const CollectiveError& e) const {
  return CollectiveError(e.failure(), std::string("inside ") + names_.lower + ": " + e.what());
}

// A failure of the leaders' step as the ranks below see it. The rack level names its own
// levels, so its errors pass through as they are.
std::string Hierarchy::above_reason(const CollectiveError& e) const {
  return racks_ ? std::string(e.what()) : std::string("between ") + names_.upper + ": " + e.what();
}

CollectiveError Hierarchy::above(const CollectiveError& e) const {
  return CollectiveError(e.failure(), above_reason(e));
}

void Hierarchy::throw_host_verdict(const CollectiveError* upper, const CollectiveError& down) {
  throw host_verdict(upper, down);
}

CollectiveError Hierarchy::host_verdict(const CollectiveError* upper, const CollectiveError& down) {
  // A broadcast that broke the host communicator (a dead rank, the deadline) is the answer.
  if (down.failure() != Failure::kInvalid) return inside(down);
  Verdict v;
  if (leader()) {
    const CollectiveError& e = upper != nullptr ? *upper : down;
    v.failure = static_cast<std::int32_t>(e.failure()) + 1;
    v.reason = upper != nullptr ? above_reason(*upper) : std::string(down.what());
  }
  std::array<std::byte, kVerdictBytes> bytes = encode(v);
  try {
    host_->broadcast(bytes.data(), kVerdictBytes, kBytes, 0);
  } catch (const CollectiveError& e) {
    add_stats(host_->last_stats());
    return inside(e);
  }
  add_stats(host_->last_stats());
  v = decode(bytes);
  if (v.failure <= 0) return inside(down);
  return CollectiveError(static_cast<Failure>(v.failure - 1), v.reason);
}

AllreduceArgs Hierarchy::host_step_args(const AllreduceArgs& a) const {
  AllreduceArgs up = a;
  up.root = 0;
  up.star = star_;
  if (up.refuse == LocalError::kNone) up.refuse = recv_error(a);
  return up;
}

AllreduceArgs Hierarchy::leaders_step_args(const AllreduceArgs& a, bool refuse) {
  AllreduceArgs across = a;
  across.send = a.recv;
  if (refuse) across.refuse = LocalError::kHostFailed;
  return across;
}

Algorithm Hierarchy::allreduce(const AllreduceArgs& a) {
  finish_requests();
  stats_ = OpStats{};
  if (host_->size() == 1) {  // a host of one rank: its leader's step is the whole operation
    struct Record {
      Hierarchy* h;
      ~Record() { h->add_upper_stats(); }
    } record{this};
    try {
      stats_.algorithm = upper_allreduce(a);
    } catch (const CollectiveError& e) {
      throw above(e);
    }
    return stats_.algorithm;
  }
  // 1. inside the host: the leader gets the host's reduction (in recv)
  Algorithm algo = Algorithm::kAuto;
  try {
    algo = host_->reduce(host_step_args(a));
    add_stats(host_->last_stats());
  } catch (const CollectiveError& e) {
    add_stats(host_->last_stats());
    if (leader()) {  // the other hosts must hear it: refuse the leaders' step
      try {
        upper_allreduce(leaders_step_args(a, true));
      } catch (const CollectiveError&) {
      }
      add_upper_stats();
    }
    throw inside(e);
  }
  // 2. across hosts, between the leaders (or through the racks' switches), in place in recv
  std::optional<CollectiveError> upper;
  if (leader()) {
    try {
      algo = upper_allreduce(leaders_step_args(a, false));
    } catch (const CollectiveError& e) {
      upper = e;
    }
    add_upper_stats();
  }
  // 3. down inside the host (refused by a leader whose step 2 failed; then it says why)
  try {
    host_->broadcast(a.recv, a.count, a.dtype, 0,
                     upper ? LocalError::kHostFailed : LocalError::kNone, star_);
    add_stats(host_->last_stats());
  } catch (const CollectiveError& e) {
    add_stats(host_->last_stats());
    throw_host_verdict(upper ? &*upper : nullptr, e);
  }
  stats_.algorithm = algo;
  return algo;
}

SparseResult Hierarchy::sparse_allreduce(const SparseArgs& a) {
  finish_requests();
  stats_ = OpStats{};
  if (host_->size() == 1) {
    struct Record {
      Hierarchy* h;
      ~Record() { h->add_upper_stats(); }
    } record{this};
    try {
      return upper_sparse_allreduce(a);
    } catch (const CollectiveError& e) {
      throw above(e);
    }
  }
  // 1. inside the host: every rank of it gets the host's sum (the leader uses it)
  SparseArgs in_host = a;
  in_host.output = SparseOutput::kAuto;
  in_host.dense_out = nullptr;  // the user's buffer is for the final result
  SparseResult host_sum;
  try {
    host_sum = host_->sparse_allreduce(in_host);
    add_stats(host_->last_stats());
  } catch (const CollectiveError& e) {
    add_stats(host_->last_stats());
    if (leader()) {
      SparseArgs refused = a;
      refused.nnz = 0;
      refused.refuse = LocalError::kHostFailed;
      try {
        upper_sparse_allreduce(refused);
      } catch (const CollectiveError&) {
      }
      add_upper_stats();
    }
    throw inside(e);
  }
  const DataType dtype = host_sum.dtype;
  const std::size_t es = element_size(dtype);
  // 2. across hosts: the host sums, as entries
  SparseResult result;
  Verdict v;
  if (leader()) {
    SparseArgs across = a;
    if (star_) {  // the rack level: the smaller form between hosts (in_form at the end)
      across.output = SparseOutput::kAuto;
      across.dense_out = nullptr;
    }
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
      result = upper_sparse_allreduce(across);
      v.dense = result.dense ? 1 : 0;
      v.size = result.size();
    } catch (const CollectiveError& e) {
      v.failure = static_cast<std::int32_t>(e.failure()) + 1;
      v.reason = above_reason(e);
    }
    add_upper_stats();
  }
  host_sum = SparseResult{};
  // 3. down: the verdict and the result's form, then the result
  std::array<std::byte, kVerdictBytes> bytes = encode(v);
  const auto down = [&](void* buffer, std::uint64_t n) {
    try {
      host_->broadcast(buffer, n, kBytes, 0, LocalError::kNone, star_);
    } catch (const CollectiveError& e) {
      add_stats(host_->last_stats());
      throw inside(e);
    }
    add_stats(host_->last_stats());
  };
  down(bytes.data(), kVerdictBytes);
  v = decode(bytes);
  if (v.failure > 0) throw CollectiveError(static_cast<Failure>(v.failure - 1), v.reason);
  if (!leader()) {
    result.n = a.n;
    result.dtype = dtype;
    result.dense = v.dense != 0;
    if (!result.dense) result.indices.resize(v.size);
    // A dense result lands in the caller's dense_out (the rack level too, unless entries were
    // asked for: in_form then makes them from the dense values).
    if (result.dense && a.dense_out != nullptr && (!star_ || a.output != SparseOutput::kSparse))
      result.dense_external = static_cast<std::byte*>(a.dense_out);
    else
      result.values = ByteBuffer(std::max<std::size_t>(v.size * es, 1));
  }
  if (v.size > 0) {
    if (!result.dense) down(result.indices.data(), v.size * sizeof(std::uint64_t));
    down(result.dense_external != nullptr ? result.dense_external : result.values.data(),
         v.size * es);
  }
  if (star_) return in_form(std::move(result), a.output, a.dense_out);
  return result;
}

// ---- non-blocking ------------------------------------------------------------------------

std::uint32_t Hierarchy::start_allreduce(const AllreduceArgs& a) {
  const std::uint32_t id = next_request_++;
  Request& r = requests_[id];
  r.args = a;
  if (a.user != nullptr) {
    r.user = *a.user;
    r.args.user = &r.user;
  }
  r.stage = Stage::kQueued;
  advance();
  return id;
}

std::uint32_t Hierarchy::upper_start(const AllreduceArgs& args) {
  return leaders_ ? leaders_->start_allreduce(args) : racks_->start_allreduce(args);
}

bool Hierarchy::upper_test(std::uint32_t id) {
  return leaders_ ? leaders_->test(id) : racks_->test(id);
}

// A request's step inside the host started (then it is at `next`), or refused: the request
// ends with the host's error.
template <class Start>
void Hierarchy::start_inside(Request& r, Stage next, Start&& start) const {
  try {
    r.op = start();
    r.stage = next;
  } catch (const CollectiveError& e) {
    r.error = inside(e);
    r.stage = Stage::kDone;
  }
}

void Hierarchy::step(Request& r) {
  for (;;) {
    switch (r.stage) {
      case Stage::kQueued: {
        if (host_->size() == 1) {  // a host of one rank: its leader's step is the whole operation
          r.stage = Stage::kHostDone;
          continue;
        }
        // 1. inside the host: the leader gets the host's reduction (in recv)
        start_inside(r, Stage::kHost, [&] { return host_->start_reduce(host_step_args(r.args)); });
        continue;
      }
      case Stage::kHost: {
        bool done = false;
        try {
          done = host_->test(r.op);
        } catch (const CollectiveError& e) {
          r.error = inside(e);
          // A leader must tell the other hosts (it refuses the leaders' step); the rest stop.
          r.stage = leader() ? Stage::kHostFailed : Stage::kDone;
          continue;
        }
        if (!done) return;
        r.stage = Stage::kHostDone;
        continue;
      }
      case Stage::kHostFailed: {
        try {
          r.op = upper_start(leaders_step_args(r.args, true));
          r.stage = Stage::kRefusing;
        } catch (const CollectiveError&) {
          r.stage = Stage::kDone;
        }
        continue;
      }
      case Stage::kRefusing: {
        bool done = true;
        try {
          done = upper_test(r.op);
        } catch (const CollectiveError&) {  // refused as meant: the host's failure is the answer
        }
        if (!done) return;
        r.stage = Stage::kDone;
        continue;
      }
      case Stage::kHostDone: {
        if (!leader()) {  // straight to the broadcast down
          r.stage = Stage::kUpperDone;
          continue;
        }
        // 2. across hosts, between the leaders (or through the racks' switches), in place (a
        // host of one rank has no step 1: its leader's step is the whole operation)
        try {
          r.op = upper_start(host_->size() > 1 ? leaders_step_args(r.args, false) : r.args);
          r.stage = Stage::kUpper;
        } catch (const CollectiveError& e) {
          r.upper_error = e;
          r.stage = Stage::kUpperDone;
          if (host_->size() == 1) {
            r.error = above(e);
            r.stage = Stage::kDone;
          }
        }
        continue;
      }
      case Stage::kUpper: {
        bool done = true;
        try {
          done = upper_test(r.op);
        } catch (const CollectiveError& e) {
          r.upper_error = e;
        }
        if (!done) return;
        r.stage = Stage::kUpperDone;
        if (host_->size() == 1) {
          if (r.upper_error) r.error = above(*r.upper_error);
          r.stage = Stage::kDone;
        }
        continue;
      }
      case Stage::kUpperDone: {
        // 3. down inside the host (refused by a leader whose step 2 failed; then it says why)
        start_inside(r, Stage::kDown, [&] {
          return host_->start_broadcast(r.args.recv, r.args.count, r.args.dtype, 0,
                                        r.upper_error ? LocalError::kHostFailed : LocalError::kNone,
                                        star_);
        });
        continue;
      }
      case Stage::kDown: {
        try {
          if (!host_->test(r.op)) return;
        } catch (const CollectiveError& e) {
          // Every rank of the host is here (the refusal fails the broadcast on all of them),
          // and no later request's step starts before this one is done.
          r.error = host_verdict(r.upper_error ? &*r.upper_error : nullptr, e);
        }
        r.stage = Stage::kDone;
        continue;
      }
      case Stage::kDone:
        return;
    }
  }
}

void Hierarchy::advance() {
  // One request at a time, in the order they were started: a level's communicator matches
  // operations by the order they start in, and whether an earlier request's step has completed
  // when a later one's starts depends on timing, so overlapping them could start one level's
  // operations in different orders on different ranks. The caller still overlaps its own work
  // with the requests, and may test them in any order.
  for (auto& [id, r] : requests_) {
    if (r.stage == Stage::kDone) continue;
    step(r);
    if (r.stage != Stage::kDone) return;
  }
}

bool Hierarchy::test(std::uint32_t id) {
  const auto it = requests_.find(id);
  if (it == requests_.end())
    throw std::invalid_argument("no outstanding hierarchical operation " + std::to_string(id) +
                                " (completed, failed or never started)");
  advance();
  Request& r = it->second;
  if (r.stage != Stage::kDone) return false;
  std::optional<CollectiveError> error = std::move(r.error);
  requests_.erase(it);
  if (error) throw *error;
  return true;
}

void Hierarchy::wait(std::uint32_t id) {
  support::Backoff backoff(16, 256);
  while (!test(id)) {
    if (backoff.pause())
      std::this_thread::sleep_for(backoff.sleep_for(std::chrono::microseconds(50)));
  }
}

void Hierarchy::finish_requests() {
  support::Backoff backoff(16, 256);
  for (;;) {
    advance();
    bool all_done = true;
    for (const auto& [id, r] : requests_) all_done = all_done && r.stage == Stage::kDone;
    if (all_done) return;
    if (backoff.pause())
      std::this_thread::sleep_for(backoff.sleep_for(std::chrono::microseconds(50)));
  }
}

}  // namespace netsparse::collectives
