#include "hosts/rack_switch.hpp"

#include <algorithm>
#include <array>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>

#include "agreement/mpi_util.hpp"
#include "concat/concat_point.hpp"
#include "concat/protocol.hpp"
#include "support/enum_names.hpp"

namespace netsparse::dist {

namespace {

// Message tags of a wave's steps (the top of rack_switch.hpp).
enum Tag : int {
  kTagReads = 0x5200,  // A: leader -> its switch
  kTagRackReads,       // B: switch -> switch
  kTagHostReads,       // C: switch -> leader of its rack
  kTagAnswers,         // D: leader -> its switch
  kTagRackAnswers,     // E: switch -> switch
  kTagHostAnswers      // F: switch -> the wave's leader
};

constexpr auto kStepNames = std::to_array<support::EnumName<int>>({
    {kTagReads, "reads from a host of the rack"},
    {kTagRackReads, "reads from another rack's switch"},
    {kTagHostReads, "reads from the rack switch"},
    {kTagAnswers, "answers from a host of the rack"},
    {kTagRackAnswers, "answers from another rack's switch"},
    {kTagHostAnswers, "answers from the rack switch"},
});

const char* step_name(int tag) {
  return support::name_of<kStepNames>(tag, "an unknown step");
}

constexpr std::uint32_t kNoHost = std::numeric_limits<std::uint32_t>::max();
constexpr std::uint32_t kPacketBytes = 1500;  // the paper's MTU, as the emulator's switches

[[noreturn]] void refuse(const std::string& what) {
  throw std::runtime_error("netsparse-node rack switch: " + what);
}

// Calls f(packet) for each NetSparse packet of a message (packets back to back); refuses a
// message that does not split into whole packets.
template <class F>
void for_each_packet(std::span<const std::byte> msg, std::uint32_t prop_len, F&& f) {
  std::size_t off = 0;
  while (off < msg.size()) {
    const std::size_t left = msg.size() - off;
    if (left < concat::kConcatHeaderBytes) refuse("a truncated packet header");
    const std::byte* p = msg.data() + off;
    const auto raw_type = concat::wire::load<std::uint16_t>(p + concat::kOffType);
    if (!concat::is_known_type(raw_type)) refuse("a packet of unknown type");
    const auto n = concat::wire::load<std::uint32_t>(p + concat::kOffNumPrs);
    const std::uint64_t record =
        concat::pr_record_bytes(static_cast<concat::PrType>(raw_type), prop_len);
    const std::uint64_t bytes = concat::kConcatHeaderBytes + std::uint64_t{n} * record;
    if (n == 0 || bytes > left) refuse("a truncated or empty packet");
    f(msg.subspan(off, static_cast<std::size_t>(bytes)));
    off += static_cast<std::size_t>(bytes);
  }
}

// Calls f(pr, payload) for every PR of a message addressed to host `me`, of the expected type.
template <class F>
void for_each_pr(std::span<const std::byte> msg, int me, std::uint32_t prop_len,
                 concat::PrType type, F&& f) {
  for_each_packet(msg, prop_len, [&](std::span<const std::byte> pkt) {
    concat::PacketView v;
    const concat::DecodeError e =
        concat::decode_packet(pkt, static_cast<std::uint32_t>(me), prop_len, &v);
    if (e != concat::DecodeError::kOk) refuse(std::string("a packet: ") + concat::to_string(e));
    if (v.header().type != type) refuse("a packet of the wrong type");
    for (std::uint32_t i = 0; i < v.size(); ++i) f(v.pr(i), v.payload(i));
  });
}

std::uint64_t packets_in(std::span<const std::byte> msg, std::uint32_t prop_len) {
  std::uint64_t n = 0;
  for_each_packet(msg, prop_len, [&](std::span<const std::byte>) { ++n; });
  return n;
}

// A sink collecting every packet into one message.
struct Collect final : concat::PacketSink {
  std::vector<std::byte> bytes;
  void on_packet(std::uint32_t, concat::PrType, std::span<const std::byte> packet,
                 concat::FlushCause) override {
    bytes.insert(bytes.end(), packet.begin(), packet.end());
  }
};

concat::ConcatConfig leader_concat(std::uint32_t hosts, std::uint32_t prop_len) {
  concat::ConcatConfig cc;
  cc.num_nodes = hosts;
  cc.prop_len = prop_len;
  cc.packet_bytes = kPacketBytes;
  cc.delay_ns = 1;  // never polled: the caller flushes every queue at the end of a step
  return cc;
}

}  // namespace

// The switch pipeline's packets, per (type, queue): what goes to each destination this step.
class RackSwitchPath::Buffers final : public concat::PacketSink {
 public:
  explicit Buffers(std::size_t queues)
      : out_{std::vector<std::vector<std::byte>>(queues),
             std::vector<std::vector<std::byte>>(queues)} {}
  void on_packet(std::uint32_t dest, concat::PrType type, std::span<const std::byte> packet,
                 concat::FlushCause) override {
    if (type != concat::PrType::kRead && type != concat::PrType::kResponse) return;
    auto& b = out_[type == concat::PrType::kRead ? 0 : 1][dest];
    b.insert(b.end(), packet.begin(), packet.end());
  }
  std::vector<std::byte> take(concat::PrType type, std::size_t queue) {
    return std::exchange(out_[type == concat::PrType::kRead ? 0 : 1][queue], {});
  }
  [[nodiscard]] bool empty() const noexcept {
    for (const auto& per_type : out_) {
      for (const auto& b : per_type) {
        if (!b.empty()) return false;
      }
    }
    return true;
  }

 private:
  std::vector<std::vector<std::byte>> out_[2];
};

RackSwitchPath::RackSwitchPath(const Topology& topo, gidx_t n_cols, std::uint32_t row_bytes,
                               HostOfCol host_of, OwnRow own_row,
                               std::chrono::milliseconds deadline)
    : topo_(topo),
      n_cols_(n_cols),
      row_bytes_(row_bytes),
      host_of_(std::move(host_of)),
      own_row_(std::move(own_row)),
      deadline_(deadline) {
  hosts_per_rack_ = topo.nhosts() / topo.nracks();
  check_mpi(MPI_Comm_dup(topo.leaders_comm(), &comm_), "MPI_Comm_dup");
  if (topo.host() == topo.rack() * hosts_per_rack_) {
    const auto hosts = static_cast<std::uint32_t>(topo.nhosts());
    out_ = std::make_unique<Buffers>(hosts);
    sw::TorConfig tc;
    tc.prop_bytes = row_bytes;
    tc.queues = hosts;
    tc.packet_bytes = kPacketBytes;
    tc.delay = 1;  // never polled: flushed at the end of each step
    pipeline_ = std::make_unique<sw::TorPipeline>(
        tc,
        [this](std::uint64_t idx) {
          return idx < static_cast<std::uint64_t>(n_cols_) ? host_of_(static_cast<gidx_t>(idx))
                                                           : kNoHost;
        },
        [this](std::uint32_t host) { return queue_of(host); },
        [this](std::uint32_t host) {
          return host < static_cast<std::uint32_t>(topo_.nhosts()) &&
                 topo_.rack_of_host(static_cast<int>(host)) == topo_.rack();
        },
        *out_);
  }
}

RackSwitchPath::~RackSwitchPath() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;  // MPI released everything already
  // After an error, sends may still be in flight to a peer that died: their requests are
  // released and their buffers deliberately kept (MPI may still read them).
  for (MPI_Request& r : sends_) {
    if (r != MPI_REQUEST_NULL) MPI_Request_free(&r);
  }
  if (!sending_.empty()) new std::vector<std::vector<std::byte>>(std::move(sending_));
  if (comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
}

void RackSwitchPath::set_wanted(std::vector<std::pair<gidx_t, std::uint64_t>> wanted) {
  wanted_ = std::move(wanted);
}

// Own-rack hosts have a queue each; every other rack one queue, numbered by its first host
// (which is also its switch): the queue number is the destination's rank in comm_.
std::uint32_t RackSwitchPath::queue_of(std::uint32_t host) const {
  if (host >= static_cast<std::uint32_t>(topo_.nhosts())) {
    refuse("a PR names host " + std::to_string(host) + " of " + std::to_string(topo_.nhosts()));
  }
  const int rack = topo_.rack_of_host(static_cast<int>(host));
  return rack == topo_.rack() ? host : static_cast<std::uint32_t>(rack * hosts_per_rack_);
}

std::vector<std::byte> RackSwitchPath::take(int source, int tag,
                                            const std::function<void()>& progress) {
  const auto until = std::chrono::steady_clock::now() + deadline_;
  int flag = 0;
  MPI_Message msg;
  MPI_Status st;
  for (;;) {
    check_mpi(MPI_Improbe(source, tag, comm_, &flag, &msg, &st), "MPI_Improbe");
    if (flag) break;
    if (std::chrono::steady_clock::now() > until) {
      refuse("no " + std::string(step_name(tag)) + " (host " + std::to_string(source) +
             ") within " + std::to_string(deadline_.count()) + " ms");
    }
    if (progress) progress();
  }
  int count = 0;
  check_mpi(MPI_Get_count(&st, MPI_BYTE, &count), "MPI_Get_count");
  std::vector<std::byte> bytes(static_cast<std::size_t>(count));
  // Not a blocking MPI_Mrecv: a large message is matched by its first fragment, and the rest
  // never comes when the sender dies just after (a rack switch killed between its two sends
  // held rack 0's switch in MPI_Mrecv until ctest's timeout). The same deadline as the probe.
  MPI_Request req = MPI_REQUEST_NULL;
  check_mpi(MPI_Imrecv(bytes.data(), count, MPI_BYTE, &msg, &req), "MPI_Imrecv");
  if (!test_all_until(std::span<MPI_Request>(&req, 1), until, [&] {
        if (progress) progress();
      })) {
    // The request stays pending (the job is failing): its buffer must outlive it.
    abandoned_.push_back(std::move(bytes));
    refuse("the rest of a " + std::string(step_name(tag)) + " message (host " +
           std::to_string(source) + ") not within " + std::to_string(deadline_.count()) + " ms");
  }
  return bytes;
}

void RackSwitchPath::send(int host, int tag, std::vector<std::byte> message) {
  if (!message.empty() && host != topo_.host()) {
    const std::uint64_t wire =
        message.size() + concat::kUpperLayerBytes * packets_in(message, row_bytes_);
    counters_.inter_host_bytes += wire;
    ++counters_.inter_host_messages;
    if (tag == kTagRackReads || tag == kTagRackAnswers) {
      counters_.inter_rack_bytes += wire;
      ++counters_.inter_rack_messages;
    }
  }
  sending_.push_back(std::move(message));
  const std::vector<std::byte>& m = sending_.back();
  sends_.push_back(MPI_REQUEST_NULL);
  check_mpi(MPI_Isend(m.data(), to_mpi_count(m.size(), "rack switch message"), MPI_BYTE, host, tag,
                      comm_, &sends_.back()),
            "MPI_Isend");
}

void RackSwitchPath::finish_sends(const std::function<void()>& progress) {
  const auto until = std::chrono::steady_clock::now() + deadline_;
  if (!test_all_until(sends_, until, [&] {
        if (progress) progress();
      })) {
    refuse("messages not taken within " + std::to_string(deadline_.count()) + " ms");
  }
  sends_.clear();
  sending_.clear();
}

// D: a leader's answers to the reads for its host's rows, concatenated per requester host.
std::vector<std::byte> RackSwitchPath::answer_reads(std::span<const std::byte> reads,
                                                    const std::byte* store) {
  const int me = topo_.host();
  const auto hosts = static_cast<std::uint32_t>(topo_.nhosts());
  const std::uint32_t rb = row_bytes_;
  Collect c;
  concat::ConcatPoint cp(leader_concat(hosts, rb), c);
  for_each_pr(
      reads, me, rb, concat::PrType::kRead, [&](const concat::PrHeader& pr, const std::byte*) {
        const std::uint64_t row = pr.idx < static_cast<std::uint64_t>(n_cols_)
                                      ? own_row_(static_cast<gidx_t>(pr.idx))
                                      : std::numeric_limits<std::uint64_t>::max();
        if (row == std::numeric_limits<std::uint64_t>::max()) {
          refuse("host " + std::to_string(pr.src_node) + " asked host " + std::to_string(me) +
                 " for row " + std::to_string(pr.idx) + ", which it does not own");
        }
        if (pr.src_node >= hosts) refuse("a read from an unknown host");
        cp.push(concat::PrType::kResponse, pr.src_node, pr, store + row * rb, 0);
      });
  cp.flush_all();
  return std::move(c.bytes);
}

// F: the answers to this host's reads land in its store, each wanted row exactly once.
void RackSwitchPath::land_answers(std::span<const std::byte> answers, std::byte* store) {
  const std::uint32_t rb = row_bytes_;
  std::vector<char> landed(wanted_.size(), 0);
  for_each_pr(answers, topo_.host(), rb, concat::PrType::kResponse,
              [&](const concat::PrHeader& pr, const std::byte* payload) {
                const auto it = std::lower_bound(
                    wanted_.begin(), wanted_.end(), pr.idx,
                    [](const auto& e, std::uint64_t c) { return std::uint64_t(e.first) < c; });
                if (it == wanted_.end() || std::uint64_t(it->first) != pr.idx) {
                  refuse("row " + std::to_string(pr.idx) + " arrived unasked");
                }
                const auto i = static_cast<std::size_t>(it - wanted_.begin());
                if (landed[i]) refuse("row " + std::to_string(pr.idx) + " arrived twice");
                landed[i] = 1;
                std::memcpy(store + it->second * rb, payload, rb);
                ++counters_.rows_landed;
              });
  if (counters_.rows_landed != wanted_.size()) {
    refuse(std::to_string(wanted_.size() - counters_.rows_landed) + " of " +
           std::to_string(wanted_.size()) + " rows never arrived");
  }
}

RackSwitchCounters RackSwitchPath::run(std::byte* store, const std::function<void()>& progress) {
  counters_ = RackSwitchCounters{};
  const int me = topo_.host(), rack = topo_.rack(), racks = topo_.nracks();
  const int first = rack * hosts_per_rack_;  // also the rack's switch
  const auto hosts = static_cast<std::uint32_t>(topo_.nhosts());
  const std::uint32_t rb = row_bytes_;
  if (pipeline_) pipeline_->new_epoch();  // a kernel is an epoch: nothing cached survives it

  // The switch: every packet of a message through the pipeline, from the rack or a spine.
  const auto ingest = [&](const std::vector<std::byte>& msg, bool from_rack) {
    for_each_packet(msg, rb, [&](std::span<const std::byte> pkt) {
      bool passed = false;
      const concat::DecodeError e = from_rack ? pipeline_->from_rack(pkt, 0, &passed)
                                              : pipeline_->from_spine(pkt, 0, /*route=*/true);
      if (e != concat::DecodeError::kOk) refuse(std::string("a packet: ") + concat::to_string(e));
      if (passed) refuse("a packet that is neither read nor response");
    });
  };
  // Every packet of a message addressed to this host, of the expected type.
  // C and E: this switch sends every other rack's switch what its pipeline queued for that rack
  // (PRs of `type`, concatenated per destination rack), takes in theirs, and flushes.
  const auto between_racks = [&](int tag, concat::PrType type) {
    for (int r = 0; r < racks; ++r) {
      const int s = r * hosts_per_rack_;
      if (r != rack) send(s, tag, out_->take(type, s));
    }
    for (int r = 0; r < racks; ++r) {
      if (r != rack) ingest(take(r * hosts_per_rack_, tag, progress), false);
    }
    pipeline_->flush_all();
  };

  for (int w = 0; w < hosts_per_rack_; ++w) {
    const int active = first + w;
    if (me == active) {  // A: this host's inter-rack reads, per owner host
      Collect c;
      concat::ConcatPoint cp(leader_concat(hosts, rb), c);
      for (const auto& [col, row] : wanted_) {
        (void)row;
        const concat::PrHeader pr{static_cast<std::uint32_t>(me), 0,
                                  static_cast<std::uint64_t>(col), 0};
        cp.push(concat::PrType::kRead, host_of_(col), pr, nullptr, 0);
      }
      cp.flush_all();
      send(first, kTagReads, std::move(c.bytes));
    }
    if (pipeline_) {  // B and C
      const sw::TorStats before = pipeline_->stats();
      ingest(take(active, kTagReads, progress), /*from_rack=*/true);
      pipeline_->flush_all();
      counters_.lookups += pipeline_->stats().read_prs_in - before.read_prs_in;
      counters_.hits += pipeline_->stats().hits - before.hits;
      between_racks(kTagRackReads, concat::PrType::kRead);
      for (int h = first; h < first + hosts_per_rack_; ++h) {
        send(h, kTagHostReads, out_->take(concat::PrType::kRead, static_cast<std::size_t>(h)));
      }
    }
    // D: every leader answers the reads for its host's rows, per requester host
    send(first, kTagAnswers, answer_reads(take(first, kTagHostReads, progress), store));
    if (pipeline_) {  // E and F
      for (int h = first; h < first + hosts_per_rack_; ++h) {
        ingest(take(h, kTagAnswers, progress), /*from_rack=*/true);
      }
      pipeline_->flush_all();  // per destination rack: every host's answers share packets
      between_racks(kTagRackAnswers, concat::PrType::kResponse);
      send(active, kTagHostAnswers,
           out_->take(concat::PrType::kResponse, static_cast<std::size_t>(active)));
      if (!out_->empty()) refuse("PRs routed to a host that is not gathering in this wave");
    }
    if (me == active) {  // F: this host's rows land in its store
      land_answers(take(first, kTagHostAnswers, progress), store);
    }
    finish_sends(progress);
  }
  return counters_;
}

}  // namespace netsparse::dist
