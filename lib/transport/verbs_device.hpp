// The verbs transport's device, port and memory helpers (verbs_transport.*): verbs objects owned
// by unique_ptrs whose deleters release them, registered slabs, the connection records two ranks
// exchange, and opening the configured (or first usable) device and port.
#pragma once

#include <infiniband/verbs.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>

#include "transport/transport_factory.hpp"
#include "transport/verbs_config.hpp"

namespace netsparse::transport::verbs {

// Posts one signalled RDMA READ of `length` bytes from (remote_addr, rkey) into local memory
// registered with lkey; returns ibv_post_send's code.
int post_read(ibv_qp* qp, std::uint64_t id, void* local, std::uint32_t length, std::uint32_t lkey,
              std::uint64_t remote_addr, std::uint32_t rkey);

std::string errno_text(int err);

// Every verbs object is owned by a unique_ptr whose deleter is the call that releases it.
template <class T, auto Release>
struct ReleaseWith {
  void operator()(T* p) const noexcept { Release(p); }
};
template <class T, auto Release>
using Owned = std::unique_ptr<T, ReleaseWith<T, Release>>;
using DeviceList = Owned<ibv_device*, ibv_free_device_list>;
using Context = Owned<ibv_context, ibv_close_device>;
using Pd = Owned<ibv_pd, ibv_dealloc_pd>;
using Cq = Owned<ibv_cq, ibv_destroy_cq>;
using Srq = Owned<ibv_srq, ibv_destroy_srq>;
using Mr = Owned<ibv_mr, ibv_dereg_mr>;
using Qp = Owned<ibv_qp, ibv_destroy_qp>;
void free_bytes(std::byte* p) noexcept;
using Slab = Owned<std::byte, free_bytes>;

// ibv_reg_mr is a macro that ORs `access` with another enum type; passing an int keeps that
// expression well-formed C++20 (clang warns about enum-enum arithmetic otherwise).
ibv_mr* register_region(ibv_pd* pd, void* addr, std::size_t length, int access);

Slab allocate_slab(std::size_t bytes);

// What one rank tells a peer about the QP it created for that peer.
struct ConnInfo {
  std::uint32_t qpn;
  std::uint32_t psn;
  std::uint32_t max_packet;  // receive buffer size: must be the same everywhere
  std::uint32_t flush_rkey;
  std::uint64_t flush_addr;
  std::uint16_t lid;
  std::uint8_t mtu;  // enum ibv_mtu of the sender's port
  std::uint8_t pad;
  std::uint8_t gid[16];
};

struct RegionInfo {
  std::uint64_t addr;
  std::uint64_t bytes;
  std::uint32_t rkey;
  std::int32_t ok;
};

// The device, port and GID chosen on this rank.
struct LocalPort {
  Context context;
  std::string device_name;
  int port = 0;
  ibv_port_attr port_attr{};
  ibv_device_attr device_attr{};
  int gid_index = 0;
  ibv_gid gid{};
};

bool port_active(ibv_context* ctx, int port, ibv_port_attr* out);

int pick_gid_index(ibv_context* ctx, int port, const ibv_port_attr& attr);

// Opens the configured (or first usable) device and port. Throws with a clear reason.
LocalPort open_local_port(const VerbsOptions& options);

}  // namespace netsparse::transport::verbs
