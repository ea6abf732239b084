// The verbs transport's device, port and memory helpers (verbs_device.hpp).
#include "transport/verbs_device.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <new>
#include <stdexcept>
#include <string>
#include <vector>

namespace netsparse::transport::verbs {

// Posts one signalled RDMA READ of `length` bytes from (remote_addr, rkey) into local memory
// registered with lkey; returns ibv_post_send's code.
int post_read(ibv_qp* qp, std::uint64_t id, void* local, std::uint32_t length, std::uint32_t lkey,
              std::uint64_t remote_addr, std::uint32_t rkey) {
  ibv_sge sge{};
  sge.addr = reinterpret_cast<std::uintptr_t>(local);
  sge.length = length;
  sge.lkey = lkey;
  ibv_send_wr wr{};
  wr.wr_id = id;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_RDMA_READ;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.wr.rdma.remote_addr = remote_addr;
  wr.wr.rdma.rkey = rkey;
  ibv_send_wr* bad = nullptr;
  return ibv_post_send(qp, &wr, &bad);
}

std::string errno_text(int err) {
  return std::string(std::strerror(err));
}

void free_bytes(std::byte* p) noexcept {
  std::free(p);
}

// ibv_reg_mr is a macro that ORs `access` with another enum type; passing an int keeps that
// expression well-formed C++20 (clang warns about enum-enum arithmetic otherwise).
ibv_mr* register_region(ibv_pd* pd, void* addr, std::size_t length, int access) {
  return ibv_reg_mr(pd, addr, length, access);
}

Slab allocate_slab(std::size_t bytes) {
  const std::size_t rounded = std::max<std::size_t>((bytes + 4095) / 4096 * 4096, 4096);
  void* p = std::aligned_alloc(4096, rounded);
  if (p == nullptr) throw std::bad_alloc();
  std::memset(p, 0, rounded);
  return Slab(static_cast<std::byte*>(p));
}

bool port_active(ibv_context* ctx, int port, ibv_port_attr* out) {
  ibv_port_attr attr{};
  if (ibv_query_port(ctx, static_cast<std::uint8_t>(port), &attr) != 0) return false;
  if (out != nullptr) *out = attr;
  return attr.state == IBV_PORT_ACTIVE;
}

int pick_gid_index(ibv_context* ctx, int port, const ibv_port_attr& attr) {
  if (attr.gid_tbl_len <= 0) return 0;
  // One call for the whole table (an ioctl on current kernels) instead of one sysfs read per
  // index, which is very slow under emulation.
  std::vector<ibv_gid_entry> raw(static_cast<std::size_t>(attr.gid_tbl_len));
  const ssize_t n = ibv_query_gid_table(ctx, raw.data(), raw.size(), 0);
  if (n <= 0) return 0;
  std::vector<GidEntry> entries;
  for (ssize_t i = 0; i < n; ++i) {
    const ibv_gid_entry& e = raw[static_cast<std::size_t>(i)];
    if (static_cast<int>(e.port_num) != port) continue;
    GidEntry g;
    g.index = static_cast<int>(e.gid_index);
    std::memcpy(g.gid.data(), e.gid.raw, 16);
    g.type = e.gid_type == IBV_GID_TYPE_ROCE_V2   ? GidType::kRoceV2
             : e.gid_type == IBV_GID_TYPE_ROCE_V1 ? GidType::kRoceV1
                                                  : GidType::kIb;
    entries.push_back(g);
  }
  return choose_gid_index(entries);
}

// Opens the configured (or first usable) device and port. Throws with a clear reason.
LocalPort open_local_port(const VerbsOptions& options) {
  int count = 0;
  DeviceList list(ibv_get_device_list(&count));
  if (!list || count == 0) {
    throw std::runtime_error(no_rdma_device_message(
        !list ? "ibv_get_device_list failed: " + errno_text(errno)
              : "ibv_get_device_list found no device; /dev/infiniband/uverbs* missing?"));
  }
  std::string seen;
  for (int d = 0; d < count; ++d) {
    ibv_device* dev = list.get()[d];
    const std::string name = ibv_get_device_name(dev);
    seen += (seen.empty() ? "" : ", ") + name;
    if (!options.device.empty() && name != options.device) continue;
    Context ctx(ibv_open_device(dev));
    if (!ctx) {
      if (!options.device.empty()) {
        throw std::runtime_error("netsparse verbs transport: ibv_open_device(" + name +
                                 ") failed: " + errno_text(errno));
      }
      continue;
    }
    ibv_device_attr dattr{};
    if (ibv_query_device(ctx.get(), &dattr) != 0) continue;
    for (int p = 1; p <= dattr.phys_port_cnt; ++p) {
      if (options.port != 0 && p != options.port) continue;
      ibv_port_attr pattr{};
      if (!port_active(ctx.get(), p, &pattr)) continue;
      LocalPort local;
      local.device_name = name;
      local.port = p;
      local.port_attr = pattr;
      local.device_attr = dattr;
      local.gid_index =
          options.gid_index >= 0 ? options.gid_index : pick_gid_index(ctx.get(), p, pattr);
      if (ibv_query_gid(ctx.get(), static_cast<std::uint8_t>(p), local.gid_index, &local.gid) !=
          0) {
        throw std::runtime_error("netsparse verbs transport: GID index " +
                                 std::to_string(local.gid_index) + " of " + name + " port " +
                                 std::to_string(p) + " cannot be read (NETSPARSE_IB_GID_INDEX?)");
      }
      local.context = std::move(ctx);
      return local;
    }
  }
  if (!options.device.empty() && seen.find(options.device) == std::string::npos) {
    throw std::runtime_error(no_rdma_device_message("device '" + options.device +
                                                    "' (NETSPARSE_IB_DEVICE) not among: " + seen));
  }
  throw std::runtime_error(no_rdma_device_message(
      "found " + seen + " but no ACTIVE port" +
      (options.port != 0 ? " numbered " + std::to_string(options.port) : std::string())));
}
}  // namespace netsparse::transport::verbs
