#include "emulate/tor_switch.hpp"

#include <algorithm>
#include <cmath>

#include "concat/protocol.hpp"

namespace netsparse::emulate {

TorSwitch::TorSwitch(int tor, Fabric& fabric, const SwitchModel& model, std::uint32_t prop_bytes,
                     std::span<const std::uint64_t> row_offsets)
    : tor_(tor),
      fabric_(fabric),
      model_(model),
      prop_bytes_(prop_bytes),
      row_offsets_(row_offsets.begin(), row_offsets.end()),
      hit_buffer_(prop_bytes) {
  concat::ConcatConfig cc;
  cc.num_nodes = static_cast<std::uint32_t>(fabric.nodes());
  cc.prop_len = prop_bytes;
  cc.packet_bytes = model.packet_bytes;
  // The ConcatPoint's clock is whatever unit its caller uses: here picoseconds.
  cc.delay_ns =
      static_cast<std::uint64_t>(std::llround(model.delay_cycles * 1000.0 / model.clock_ghz));
  concat_ = std::make_unique<concat::ConcatPoint>(cc, *this);
  cache_ = std::make_unique<sw::PropertyCache>(model.cache_config);
  if (model.cache) cache_->configure(prop_bytes);  // the control plane's per-kernel call
}

std::uint32_t TorSwitch::owner_of(std::uint64_t idx) const noexcept {
  const auto it = std::upper_bound(row_offsets_.begin(), row_offsets_.end(), idx);
  return static_cast<std::uint32_t>(it - row_offsets_.begin() - 1);
}

bool TorSwitch::on_fabric_packet(Packet& packet, bool from_node) {
  concat::PacketView v;
  if (concat::decode_packet(packet.bytes, concat::kAnyDestination, prop_bytes_, &v) !=
      concat::DecodeError::kOk) {
    ++stats_.malformed;
    return true;
  }
  const concat::PrType type = v.header().type;
  if (!from_node) {
    if (type == concat::PrType::kResponse && model_.cache) {
      for (std::uint32_t i = 0; i < v.size(); ++i) {
        const concat::PrHeader pr = v.pr(i);
        cache_->fill(owner_of(pr.idx), pr.idx, v.payload(i));
        ++stats_.egress_fills;
      }
    }
    return true;
  }
  const Picos now = fabric_.events().now();
  if (type == concat::PrType::kRead) {
    const std::uint32_t owner = v.header().dest;
    for (std::uint32_t i = 0; i < v.size(); ++i) {
      const concat::PrHeader pr = v.pr(i);
      ++stats_.read_prs_in;
      if (model_.cache && owner_of(pr.idx) == owner &&
          cache_->lookup(owner, pr.idx, hit_buffer_.data())) {
        ++stats_.hits;
        concat_->push(concat::PrType::kResponse, pr.src_node, pr, hit_buffer_.data(), now);
      } else {
        concat_->push(concat::PrType::kRead, owner, pr, nullptr, now);
      }
    }
  } else if (type == concat::PrType::kResponse) {
    const std::uint32_t requester = v.header().dest;
    for (std::uint32_t i = 0; i < v.size(); ++i) {
      const concat::PrHeader pr = v.pr(i);
      ++stats_.response_prs_in;
      if (model_.cache) cache_->fill(owner_of(pr.idx), pr.idx, v.payload(i));
      concat_->push(concat::PrType::kResponse, requester, pr, v.payload(i), now);
    }
  } else {
    return true;  // invalid and control PRs pass unchanged
  }
  arm_expiry();
  return false;
}

void TorSwitch::on_packet(std::uint32_t dest, concat::PrType, std::span<const std::byte> packet,
                          concat::FlushCause) {
  fabric_.send_from_tor(tor_, static_cast<int>(dest),
                        std::vector<std::byte>(packet.begin(), packet.end()));
}

void TorSwitch::arm_expiry() {
  const Picos next = concat_->next_expiry_ns();
  if (next == UINT64_MAX || next >= armed_at_) return;
  armed_at_ = next;
  fabric_.events().at(std::max(next, fabric_.events().now()), [this, next] {
    if (armed_at_ != next) return;  // superseded by an earlier one
    armed_at_ = kNever;
    concat_->poll_expired(fabric_.events().now());
    arm_expiry();
  });
}

}  // namespace netsparse::emulate
