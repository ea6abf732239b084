// Verbs options, environment parsing and the pure decisions of the verbs transport. Compiled in
// every build (also without libibverbs) so that the same code is unit-tested everywhere.
#include "transport/verbs_config.hpp"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <stdexcept>

#include "config/settings.hpp"
#include "transport/transport_factory.hpp"

namespace netsparse::transport {

std::uint64_t verbs_buffer_bytes(VerbsOptions options) {
  options.apply_env();
  return std::uint64_t{options.max_packet_bytes} *
             static_cast<std::uint64_t>(std::max(0, options.recv_buffers) +
                                        std::max(0, options.send_buffers)) +
         std::uint64_t{options.read_slot_bytes} *
             static_cast<std::uint64_t>(std::max(0, options.max_outstanding_reads));
}

VerbsOptions& VerbsOptions::apply_env() {
  using config::Env;
  if (config::is_set(Env::kIbDevice)) device = config::text(Env::kIbDevice);
  if (config::is_set(Env::kIbPort)) port = static_cast<int>(config::integer(Env::kIbPort));
  if (config::is_set(Env::kIbGidIndex))
    gid_index = static_cast<int>(config::integer(Env::kIbGidIndex));
  if (config::is_set(Env::kIbMaxPacket))
    max_packet_bytes = static_cast<std::size_t>(config::integer(Env::kIbMaxPacket));
  if (config::is_set(Env::kIbPeerTimeoutMs))
    peer_timeout_ms = static_cast<int>(config::integer(Env::kIbPeerTimeoutMs));
  return *this;
}

void VerbsOptions::validate() const {
  auto fail = [](const std::string& what) {
    throw std::invalid_argument("netsparse verbs options: " + what);
  };
  if (port < 0 || port > 255) fail("port must be 0 (auto) or 1..255");
  if (gid_index < -1) fail("gid_index must be -1 (auto) or a table index >= 0");
  if (max_packet_bytes < 64 || max_packet_bytes > (1u << 20)) {
    fail("max_packet_bytes must be in [64, 1 MiB], got " + std::to_string(max_packet_bytes));
  }
  if (recv_buffers < 1) fail("recv_buffers must be >= 1");
  if (send_buffers < 1) fail("send_buffers must be >= 1");
  if (signal_every < 1) fail("signal_every must be >= 1");
  if (send_queue_depth < 2) fail("send_queue_depth must be >= 2");
  if (max_outstanding_reads < 1) fail("max_outstanding_reads must be >= 1");
  if (read_slot_bytes < 1 || read_slot_bytes > (1u << 30)) fail("read_slot_bytes out of range");
  if (peer_timeout_ms < 1) fail("peer_timeout_ms must be >= 1");
  if (retry_count < 0 || retry_count > 7) fail("retry_count must be in 0..7 (3-bit field)");
  if (cq_batch < 1 || cq_batch > 4096) fail("cq_batch must be in 1..4096");
  (void)0;  // teardown_timeout_ms: < 0 waits for live peers however late, 0 does not wait
}

bool gid_is_ipv4_mapped(const std::array<std::uint8_t, 16>& gid) noexcept {
  for (int i = 0; i < 10; ++i) {
    if (gid[i] != 0) return false;
  }
  return gid[10] == 0xff && gid[11] == 0xff;
}

int choose_gid_index(std::span<const GidEntry> entries) noexcept {
  int best = -1;
  for (const GidEntry& e : entries) {
    // Lowest matching index wins so that every rank of a homogeneous cluster picks the same.
    if (e.type == GidType::kRoceV2 && gid_is_ipv4_mapped(e.gid) && (best < 0 || e.index < best)) {
      best = e.index;
    }
  }
  return best >= 0 ? best : 0;
}

int rc_timeout_exponent(int peer_timeout_ms, int retry_count) noexcept {
  const double attempts = static_cast<double>(std::clamp(retry_count, 0, 7) + 1);
  const double per_attempt_us = std::max(1, peer_timeout_ms) * 1000.0 / attempts;
  for (int t = 1; t <= 31; ++t) {
    if (4.096 * std::ldexp(1.0, t) >= per_attempt_us) return t;
  }
  return 31;
}

double rc_detection_ms(int timeout_exponent, int retry_count) noexcept {
  return (std::clamp(retry_count, 0, 7) + 1) * 4.096e-3 *
         std::ldexp(1.0, std::clamp(timeout_exponent, 0, 31));
}

std::size_t mtu_enum_to_bytes(int ibv_mtu_value) noexcept {
  return (ibv_mtu_value >= 1 && ibv_mtu_value <= 5) ? (std::size_t{128} << ibv_mtu_value) : 0;
}

std::string gid_to_string(const std::array<std::uint8_t, 16>& gid) {
  char text[40];
  int at = 0;
  for (int i = 0; i < 16; i += 2) {
    at += std::snprintf(text + at, sizeof(text) - static_cast<std::size_t>(at), "%s%02x%02x",
                        i == 0 ? "" : ":", gid[i], gid[i + 1]);
  }
  return std::string(text, static_cast<std::size_t>(at));
}

std::string no_rdma_device_message(const std::string& detail) {
  return "netsparse verbs transport: no RDMA device (" + detail +
         "). Run on a host with an RDMA NIC or soft-RoCE (`rdma link add rxe0 type rxe netdev "
         "<if>`), or select another transport with NETSPARSE_TRANSPORT=mpi";
}

}  // namespace netsparse::transport
