// Pure decisions of the verbs transport, kept free of <infiniband/verbs.h> so that they are
// compiled and unit-tested on hosts without libibverbs or an RDMA device.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

namespace netsparse::transport {

// Mirrors enum ibv_gid_type (IB, RoCE v1, RoCE v2) without needing the header.
enum class GidType { kIb, kRoceV1, kRoceV2 };

struct GidEntry {
  int index = 0;
  std::array<std::uint8_t, 16> gid{};
  GidType type = GidType::kIb;
};

// True for ::ffff:a.b.c.d (an IPv4 address mapped into a GID).
bool gid_is_ipv4_mapped(const std::array<std::uint8_t, 16>& gid) noexcept;

// The GID index to use when none is configured: the first RoCE v2 entry holding an IPv4-mapped
// address (routable, what `ib_read_bw -x 1` picks on soft-RoCE), else index 0 (the link-local
// or IB GID, which always exists). `entries` are the populated table entries in any order.
int choose_gid_index(std::span<const GidEntry> entries) noexcept;

// RC local ACK timeout exponent t (timeout = 4.096 us * 2^t, t in 1..31) such that
// (retry_count + 1) * timeout is the smallest value >= peer_timeout_ms: the time after which a
// send to a dead peer completes with IBV_WC_RETRY_EXC_ERR. Hardware may round t up.
int rc_timeout_exponent(int peer_timeout_ms, int retry_count) noexcept;
// The time (ms) that exponent and retry count give.
double rc_detection_ms(int timeout_exponent, int retry_count) noexcept;

// Path MTU in bytes for the verbs enum value ibv_mtu (1 = 256 ... 5 = 4096); 0 if unknown.
std::size_t mtu_enum_to_bytes(int ibv_mtu_value) noexcept;

// "fe80:0000:...": for error messages and logs.
std::string gid_to_string(const std::array<std::uint8_t, 16>& gid);

// The message every entry point uses when there is no usable device; names the fixes.
std::string no_rdma_device_message(const std::string& detail);

}  // namespace netsparse::transport
