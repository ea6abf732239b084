#include "switch/tor_pipeline.hpp"

#include <utility>

namespace netsparse::sw {

TorPipeline::TorPipeline(const TorConfig& config, OwnerOf owner_of, QueueOf queue_of,
                         InRack in_rack, concat::PacketSink& sink)
    : config_(config),
      owner_of_(std::move(owner_of)),
      queue_of_(std::move(queue_of)),
      in_rack_(std::move(in_rack)),
      hit_buffer_(config.prop_bytes) {
  concat::ConcatConfig cc;
  cc.num_nodes = config.queues;
  cc.prop_len = config.prop_bytes;
  cc.packet_bytes = config.packet_bytes;
  cc.delay_ns = config.delay;
  concat_ = std::make_unique<concat::ConcatPoint>(cc, sink);
  cache_ = std::make_unique<PropertyCache>(config.cache_config);
  if (config.cache) cache_->configure(config.prop_bytes);
}

concat::DecodeError TorPipeline::decode(std::span<const std::byte> packet, concat::PacketView* v) {
  const concat::DecodeError e =
      concat::decode_packet(packet, concat::kAnyDestination, config_.prop_bytes, v);
  if (e != concat::DecodeError::kOk) ++stats_.malformed;
  return e;
}

concat::DecodeError TorPipeline::from_rack(std::span<const std::byte> packet, std::uint64_t now,
                                           bool* passed) {
  *passed = false;
  concat::PacketView v;
  if (const concat::DecodeError e = decode(packet, &v); e != concat::DecodeError::kOk) return e;
  const concat::PrType type = v.header().type;
  if (type == concat::PrType::kRead) {
    const std::uint32_t owner = v.header().dest;
    for (std::uint32_t i = 0; i < v.size(); ++i) {
      const concat::PrHeader pr = v.pr(i);
      ++stats_.read_prs_in;
      const bool remote = !in_rack_(owner);
      stats_.inter_rack_reads += remote ? 1 : 0;
      // A read addressed to a node that does not own the idx never hits: the owner refuses it.
      if (config_.cache && owner_of_(pr.idx) == owner &&
          cache_->lookup(owner, pr.idx, hit_buffer_.data())) {
        ++stats_.hits;
        stats_.inter_rack_hits += remote ? 1 : 0;
        concat_->push(concat::PrType::kResponse, queue_of_(pr.src_node), pr, hit_buffer_.data(),
                      now);
      } else {
        concat_->push(concat::PrType::kRead, queue_of_(owner), pr, nullptr, now);
      }
    }
  } else if (type == concat::PrType::kResponse) {
    const std::uint32_t requester = v.header().dest;
    for (std::uint32_t i = 0; i < v.size(); ++i) {
      const concat::PrHeader pr = v.pr(i);
      ++stats_.response_prs_in;
      if (config_.cache) cache_->fill(owner_of_(pr.idx), pr.idx, v.payload(i));
      concat_->push(concat::PrType::kResponse, queue_of_(requester), pr, v.payload(i), now);
    }
  } else {
    *passed = true;  // invalid and control PRs pass unchanged
  }
  return concat::DecodeError::kOk;
}

concat::DecodeError TorPipeline::from_spine(std::span<const std::byte> packet, std::uint64_t now,
                                            bool route) {
  concat::PacketView v;
  if (const concat::DecodeError e = decode(packet, &v); e != concat::DecodeError::kOk) return e;
  const concat::PrType type = v.header().type;
  if (type == concat::PrType::kResponse) {
    for (std::uint32_t i = 0; i < v.size(); ++i) {
      const concat::PrHeader pr = v.pr(i);
      if (config_.cache) {
        cache_->fill(owner_of_(pr.idx), pr.idx, v.payload(i));
        ++stats_.egress_fills;
      }
      if (route) {
        concat_->push(concat::PrType::kResponse, queue_of_(pr.src_node), pr, v.payload(i), now);
      }
    }
  } else if (type == concat::PrType::kRead && route) {
    for (std::uint32_t i = 0; i < v.size(); ++i) {
      const concat::PrHeader pr = v.pr(i);
      concat_->push(concat::PrType::kRead, queue_of_(owner_of_(pr.idx)), pr, nullptr, now);
    }
  }
  return concat::DecodeError::kOk;
}

}  // namespace netsparse::sw
