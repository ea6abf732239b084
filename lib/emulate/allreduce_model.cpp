#include "emulate/allreduce_model.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "support/enum_names.hpp"

namespace netsparse::emulate {

namespace {

constexpr std::uint64_t kElementBytes = 4;  // fp32 value
constexpr std::uint64_t kPairBytes = 8;     // uint32 index + fp32 value

FabricConfig checked(const FabricConfig& c) {
  if (c.topology != Topology::kLeafSpine)
    throw std::invalid_argument(std::string("AllreduceModel: the fabric must be leafspine (got ") +
                                topology_name(c.topology) +
                                "): in-switch aggregation needs a tree of switches");
  return c;
}

// A node-to-node message of one step.
struct Message {
  int src, dst;
  std::uint64_t payload;
};

// Runs the synchronous steps of a host algorithm, accumulating the counters in `r`.
class Steps {
 public:
  Steps(const AllreduceModel& m, AllreduceResult& r)
      : m_(m), f_(m.fabric()), r_(r), load_(m.link_count(), 0) {}

  // The links of a message, in order; returns how many (2 in a rack, 4 across racks).
  int path(int src, int dst, std::size_t out[4]) const {
    const int rs = f_.rack_of(src), rd = f_.rack_of(dst);
    out[0] = m_.uplink(src);
    if (rs == rd) {
      out[1] = m_.downlink(dst);
      return 2;
    }
    const int spine = f_.spine_of(src, dst);
    out[1] = m_.tor_up(rs, spine);
    out[2] = m_.spine_down(spine, rd);
    out[3] = m_.downlink(dst);
    return 4;
  }

  // One step: every message at once; adds its time (the slowest message's) to the result.
  void step(const std::vector<Message>& messages) {
    if (messages.empty()) return;
    std::size_t links[4];
    for (const Message& msg : messages) {
      const std::uint64_t wire = f_.wire_bytes(msg.payload);
      const int hops = path(msg.src, msg.dst, links);
      for (int h = 0; h < hops; ++h) {
        if (load_[links[h]] == 0) touched_.push_back(links[h]);
        load_[links[h]] += wire;
        r_.link_payload[links[h]] += msg.payload;
        r_.link_wire[links[h]] += wire;
      }
      r_.max_links = std::max(r_.max_links, hops);
      ++r_.messages;
    }
    const FabricConfig& c = f_.config();
    Picos slowest = 0;
    for (const Message& msg : messages) {
      const int hops = path(msg.src, msg.dst, links);
      std::uint64_t busiest = 0;
      for (int h = 0; h < hops; ++h) busiest = std::max(busiest, load_[links[h]]);
      const std::uint64_t frame = f_.wire_bytes(std::min<std::uint64_t>(msg.payload, c.mtu_bytes));
      const auto extra = static_cast<Picos>(hops - 1);
      const Picos t = static_cast<Picos>(hops) * c.link_ps + extra * c.switch_ps +
                      extra * f_.serialisation_ps(frame) + f_.serialisation_ps(busiest);
      slowest = std::max(slowest, t);
    }
    for (std::size_t l : touched_) load_[l] = 0;
    touched_.clear();
    time_ps_ += slowest;
    ++r_.steps;
  }

  Picos time_ps() const noexcept { return time_ps_; }

 private:
  const AllreduceModel& m_;
  const Fabric& f_;
  AllreduceResult& r_;
  std::vector<std::uint64_t> load_;  // this step's wire bytes per link
  std::vector<std::size_t> touched_;
  Picos time_ps_ = 0;
};

// Element range of part `c` of `parts` over n elements: [n c / parts, n (c+1) / parts).
std::uint64_t part_begin(std::uint64_t n, int c, int parts) {
  return n * static_cast<std::uint64_t>(c) / static_cast<std::uint64_t>(parts);
}
std::uint64_t part_size(std::uint64_t n, int c, int parts) {
  return part_begin(n, c + 1, parts) - part_begin(n, c, parts);
}

}  // namespace

constexpr auto kAllreduceAlgorithmNames = std::to_array<support::EnumName<AllreduceAlgorithm>>({
    {AllreduceAlgorithm::kRing, "ring"},
    {AllreduceAlgorithm::kRecursiveDoubling, "recursive_doubling"},
    {AllreduceAlgorithm::kHostAggregation, "host_aggregation"},
    {AllreduceAlgorithm::kInSwitch, "in_switch"},
});

const char* allreduce_algorithm_name(AllreduceAlgorithm a) noexcept {
  return support::name_of<kAllreduceAlgorithmNames>(a, "ring");
}

AllreduceModel::AllreduceModel(const FabricConfig& config) : fabric_(events_, checked(config)) {}

std::size_t AllreduceModel::link_count() const noexcept {
  return 2 * static_cast<std::size_t>(nodes()) +
         2 * static_cast<std::size_t>(fabric_.racks()) * static_cast<std::size_t>(fabric_.spines());
}

std::size_t AllreduceModel::tor_up(int rack, int spine) const noexcept {
  return 2 * static_cast<std::size_t>(nodes()) +
         static_cast<std::size_t>(rack) * static_cast<std::size_t>(fabric_.spines()) +
         static_cast<std::size_t>(spine);
}

std::size_t AllreduceModel::spine_down(int spine, int rack) const noexcept {
  return 2 * static_cast<std::size_t>(nodes()) +
         static_cast<std::size_t>(fabric_.racks()) * static_cast<std::size_t>(fabric_.spines()) +
         static_cast<std::size_t>(spine) * static_cast<std::size_t>(fabric_.racks()) +
         static_cast<std::size_t>(rack);
}

std::string AllreduceModel::link_name(std::size_t link) const {
  const auto P = static_cast<std::size_t>(nodes());
  const auto R = static_cast<std::size_t>(fabric_.racks());
  const auto S = static_cast<std::size_t>(fabric_.spines());
  if (link < P) return "node " + std::to_string(link) + " up";
  if (link < 2 * P) return "node " + std::to_string(link - P) + " down";
  link -= 2 * P;
  if (link < R * S)
    return "ToR " + std::to_string(link / S) + " -> spine " + std::to_string(link % S);
  link -= R * S;
  return "spine " + std::to_string(link / R) + " -> ToR " + std::to_string(link % R);
}

std::uint64_t AllreduceModel::sparse_payload(std::uint64_t elements, double density,
                                             int k) noexcept {
  const double u = 1.0 - std::pow(1.0 - density, static_cast<double>(k));
  const auto nnz = std::min<std::uint64_t>(
      elements, static_cast<std::uint64_t>(std::llround(static_cast<double>(elements) * u)));
  return std::min(kPairBytes * nnz, kElementBytes * elements);
}

AllreduceResult AllreduceModel::run(const AllreduceSpec& spec) const {
  if (spec.bytes == 0 || spec.bytes % kElementBytes != 0)
    throw std::invalid_argument("AllreduceModel: bytes must be a positive multiple of 4 (got " +
                                std::to_string(spec.bytes) + ")");
  if (!(spec.density >= 0.0 && spec.density <= 1.0))
    throw std::invalid_argument("AllreduceModel: density must be in [0, 1] (got " +
                                std::to_string(spec.density) + ")");
  const bool has_sparse = spec.algorithm == AllreduceAlgorithm::kRecursiveDoubling ||
                          spec.algorithm == AllreduceAlgorithm::kInSwitch;
  if (spec.sparse && !has_sparse)
    throw std::invalid_argument(std::string("AllreduceModel: ") +
                                allreduce_algorithm_name(spec.algorithm) +
                                " is dense only (sparse: recursive_doubling or in_switch)");
  const int P = nodes();
  const std::uint64_t n = spec.bytes / kElementBytes;
  AllreduceResult r;
  r.link_payload.assign(link_count(), 0);
  r.link_wire.assign(link_count(), 0);
  Picos time_ps = 0;
  std::vector<Message> msgs;

  switch (spec.algorithm) {
    case AllreduceAlgorithm::kRing: {
      Steps steps(*this, r);
      for (int s = 0; s < 2 * (P - 1); ++s) {
        msgs.clear();
        // reduce-scatter step s: node i sends chunk (i - s) mod P (it ends holding the sum of
        // chunk i + 1); all-gather step t = s - (P - 1): node i sends chunk (i + 1 - t) mod P
        const int shift = s < P - 1 ? s : s - P;
        for (int i = 0; i < P; ++i) {
          const int chunk = ((i - shift) % P + P) % P;
          msgs.push_back({i, (i + 1) % P, kElementBytes * part_size(n, chunk, P)});
        }
        steps.step(msgs);
      }
      time_ps = steps.time_ps();
      break;
    }
    case AllreduceAlgorithm::kRecursiveDoubling: {
      if (P & (P - 1))
        throw std::invalid_argument(
            "AllreduceModel: recursive_doubling needs a power-of-two "
            "number of nodes (got " +
            std::to_string(P) + ")");
      Steps steps(*this, r);
      for (int bit = 1; bit < P; bit <<= 1) {
        msgs.clear();
        // the sum held before this round has `bit` contributions
        const std::uint64_t payload =
            spec.sparse ? sparse_payload(n, spec.density, bit) : kElementBytes * n;
        for (int i = 0; i < P; ++i) msgs.push_back({i, i ^ bit, payload});
        steps.step(msgs);
      }
      time_ps = steps.time_ps();
      break;
    }
    case AllreduceAlgorithm::kHostAggregation: {
      Steps steps(*this, r);
      for (int phase = 0; phase < 2; ++phase) {
        msgs.clear();
        for (int i = 0; i < P; ++i)
          for (int o = 0; o < P; ++o)
            if (o != i) {
              // phase 0: i's part o to its aggregator o; phase 1: o's sum back to i
              msgs.push_back(phase == 0 ? Message{i, o, kElementBytes * part_size(n, o, P)}
                                        : Message{o, i, kElementBytes * part_size(n, o, P)});
            }
        steps.step(msgs);
      }
      time_ps = steps.time_ps();
      break;
    }
    case AllreduceAlgorithm::kInSwitch: {
      const FabricConfig& c = fabric_.config();
      const std::uint64_t dense_block = std::max<std::uint64_t>(1, c.mtu_bytes / kElementBytes);
      std::uint64_t block = dense_block;
      if (spec.sparse) {
        block = spec.density > 0.0
                    ? std::max<std::uint64_t>(
                          dense_block, static_cast<std::uint64_t>(static_cast<double>(c.mtu_bytes) /
                                                                  kPairBytes / spec.density))
                    : n;
        block = std::min(block, n);
      }
      const std::uint64_t full = n / block, rest = n % block;
      // Payload and wire bytes on a link carrying every block's sum of k contributions.
      struct Level {
        std::uint64_t payload = 0, wire = 0, block_wire = 0;
      };
      const auto level = [&](int k) {
        const auto one = [&](std::uint64_t elements) {
          return spec.sparse ? sparse_payload(elements, spec.density, k) : kElementBytes * elements;
        };
        Level l;
        const std::uint64_t p_full = one(block);
        l.block_wire = fabric_.wire_bytes(p_full);
        l.payload = full * p_full;
        l.wire = full * l.block_wire;
        if (rest != 0) {
          const std::uint64_t p_rest = one(rest);
          l.payload += p_rest;
          l.wire += fabric_.wire_bytes(p_rest);
          if (full == 0) l.block_wire = fabric_.wire_bytes(p_rest);
        }
        return l;
      };
      const auto put = [&](std::size_t link, const Level& l) {
        r.link_payload[link] += l.payload;
        r.link_wire[link] += l.wire;
        ++r.messages;
      };
      const Level from_node = level(1), result = level(P);
      for (int i = 0; i < P; ++i) {
        put(uplink(i), from_node);
        put(downlink(i), result);
      }
      const int R = fabric_.racks();
      std::uint64_t fill_wire = from_node.block_wire;  // blocks stored and forwarded on the path
      if (R > 1) {
        std::uint64_t largest_rack_block = 0;
        for (int rack = 0; rack < R; ++rack) {
          const int members =
              std::min(P, (rack + 1) * fabric_.nodes_per_rack()) - rack * fabric_.nodes_per_rack();
          const Level up = level(members);
          put(tor_up(rack, 0), up);
          put(spine_down(0, rack), result);
          largest_rack_block = std::max(largest_rack_block, up.block_wire);
        }
        fill_wire += largest_rack_block + result.block_wire;
      }
      r.max_links = R > 1 ? 4 : 2;
      r.steps = 1;
      std::uint64_t busiest = 0;
      for (std::uint64_t w : r.link_wire) busiest = std::max(busiest, w);
      const auto links = static_cast<Picos>(r.max_links);
      time_ps = links * c.link_ps + (links - 1) * c.switch_ps +
                fabric_.serialisation_ps(fill_wire) + fabric_.serialisation_ps(busiest);
      break;
    }
  }
  for (std::size_t l = 0; l < r.link_wire.size(); ++l) {
    r.payload_link_bytes += r.link_payload[l];
    r.wire_link_bytes += r.link_wire[l];
    if (r.link_wire[l] > r.busiest_link_wire_bytes) {
      r.busiest_link_wire_bytes = r.link_wire[l];
      r.busiest_link = l;
    }
  }
  r.time_us = static_cast<double>(time_ps) / 1e6;
  return r;
}

}  // namespace netsparse::emulate
