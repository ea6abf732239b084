#include "emulate/workload.hpp"

#include <algorithm>
#include <cmath>
#include <ostream>
#include <stdexcept>

#include "netsparse/generators.hpp"
#include "netsparse/matrix_market.hpp"
#include "netsparse/netsparse.hpp"  // detail::rig_wr

namespace netsparse::emulate {

namespace {

// The number after `prefix` in `spec`, refused unless it is all digits and within [lo, hi].
long long spec_number(const std::string& spec, std::size_t prefix, long long lo, long long hi) {
  const std::string digits = spec.substr(prefix);
  std::size_t used = 0;
  long long v = 0;
  try {
    v = std::stoll(digits, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (digits.empty() || used != digits.size() || v < lo || v > hi)
    throw std::invalid_argument("matrix spec " + spec + ": expected an integer in [" +
                                std::to_string(lo) + ", " + std::to_string(hi) + "] after '" +
                                spec.substr(0, prefix) + "'");
  return v;
}

constexpr LadderStep kLadder[] = {
    {"rig", NS_CTX_NO_FILTER | NS_CTX_NO_COALESCE | NS_CTX_NO_CONCAT, false},
    {"filter", NS_CTX_NO_COALESCE | NS_CTX_NO_CONCAT, false},
    {"coalesce", NS_CTX_NO_CONCAT, false},
    {"nic", 0, false},
    {"switch", 0, true},
};

}  // namespace

CsrMatrix load_matrix_spec(const std::string& spec, std::uint64_t seed) {
  if (spec.rfind("gen:kron:", 0) == 0) {
    KroneckerParams p;
    p.scale = static_cast<int>(spec_number(spec, 9, 1, 30));
    p.seed = seed;
    return generate_kronecker(p, 0, gidx_t{1} << p.scale);
  }
  if (spec.rfind("gen:road:", 0) == 0) {
    RoadParams p;
    p.width = p.height = spec_number(spec, 9, 1, 1 << 15);
    p.seed = seed;
    return generate_road(p, 0, p.width * p.height);
  }
  if (spec.rfind("gen:stencil:", 0) == 0) {
    StencilParams p;
    p.nx = p.ny = p.nz = spec_number(spec, 12, 1, 1 << 10);
    return generate_stencil27(p, 0, p.nx * p.ny * p.nz);
  }
  if (spec.rfind("gen:", 0) == 0)
    throw std::invalid_argument("matrix spec " + spec +
                                ": unknown generator (gen:kron:S, gen:road:W, gen:stencil:N)");
  return read_matrix_market(spec);
}

Workload gather_workload(const CsrMatrix& a, int nodes, std::uint32_t prop_bytes,
                         int ranks_per_node) {
  const auto rows = static_cast<std::uint64_t>(a.n_rows_global);
  const auto ranks =
      static_cast<std::uint64_t>(nodes) * static_cast<std::uint64_t>(std::max(ranks_per_node, 0));
  if (nodes < 1 || ranks_per_node < 1 || a.n_cols != a.n_rows_global || a.row_begin != 0 ||
      a.n_rows != a.n_rows_global || rows < ranks)
    throw std::invalid_argument(
        "the emulated gather needs a whole square matrix with at least one row per rank (" +
        std::to_string(a.n_rows_global) + " x " + std::to_string(a.n_cols) + ", " +
        std::to_string(nodes) + " nodes of " + std::to_string(ranks_per_node) + " ranks)");
  Workload w;
  w.prop_bytes = prop_bytes;
  const auto N = static_cast<std::uint64_t>(nodes), R = static_cast<std::uint64_t>(ranks_per_node);
  // Node p's first row is its first rank's: rows * (p R) / (N R), the ranks' equal blocks.
  for (std::uint64_t p = 0; p <= N; ++p) w.row_offsets.push_back(rows * (p * R) / ranks);
  w.idxs.resize(static_cast<std::size_t>(nodes));
  for (std::size_t p = 0; p < w.idxs.size(); ++p) {
    const auto b = static_cast<std::size_t>(w.row_offsets[p]);
    const auto e = static_cast<std::size_t>(w.row_offsets[p + 1]);
    w.idxs[p].assign(a.col_idx.begin() + a.row_ptr[b], a.col_idx.begin() + a.row_ptr[e]);
  }
  return w;
}

std::uint32_t auto_batch(std::uint64_t mean_idxs_per_node, int units) {
  const std::uint64_t want =
      mean_idxs_per_node / (4 * static_cast<std::uint64_t>(std::max(units, 1)));
  std::uint32_t b = 64;
  while (b < 32768 && 2 * static_cast<std::uint64_t>(b) <= want) b *= 2;
  return b;
}

std::span<const LadderStep> ladder() noexcept {
  return kLadder;
}

const LadderStep* find_step(std::string_view name) noexcept {
  for (const LadderStep& s : kLadder)
    if (name == s.name) return &s;
  return nullptr;
}

ns_context_attr node_attr(const NodeModel& m) {
  ns_context_attr attr{};
  attr.comp_mask = NS_CTX_ATTR_UNITS | NS_CTX_ATTR_PROGRESS | NS_CTX_ATTR_PACKET |
                   NS_CTX_ATTR_DELAY | NS_CTX_ATTR_PENDING | NS_CTX_ATTR_FLAGS | NS_CTX_ATTR_BATCH |
                   NS_CTX_ATTR_WATCHDOG | NS_CTX_ATTR_WIRE;
  // The emulator models the paper's NIC: its packets, its switch (which parses PRs), its bytes.
  attr.wire = NS_WIRE_PAPER;
  attr.num_client_units = m.client_units;
  attr.num_server_units = m.server_units;
  attr.progress_mode = NS_PROGRESS_INLINE;
  attr.packet_bytes = m.packet_bytes;
  attr.concat_delay_ns = static_cast<std::uint64_t>(std::llround(m.delay_cycles / m.clock_ghz));
  attr.pending_entries = m.pending_entries;
  attr.flags = m.flags;
  attr.idx_chunk = m.idx_chunk;
  attr.watchdog_ms = 0;  // a lossless fabric: nothing is lost, and virtual time may be long
  return attr;
}

ns_send_wr gather_wr(std::uint64_t n, std::span<const std::uint64_t> idxs, std::uint32_t batch,
                     ns_mr* mr, void* out, std::uint64_t total_rows, std::uint32_t prop_bytes) {
  const std::size_t begin = static_cast<std::size_t>(n) * batch;
  const unsigned flags =
      NS_SEND_SIGNALED | NS_SEND_REMOTE_ONLY | (n == 0 ? unsigned{NS_SEND_NEW_EPOCH} : 0u);
  // `out` holds every row (INDEXED over all of them).
  return detail::rig_wr(n, mr, idxs.data() + begin,
                        std::min<std::size_t>(batch, idxs.size() - begin), out,
                        total_rows * prop_bytes, NS_RIG_LAYOUT_INDEXED, 0, total_rows, flags);
}

NodeTraffic traffic_of(const NodeResult& n) {
  NodeTraffic t;
  t.requested = n.requested;
  t.dropped = n.filtered + n.coalesced;
  t.local = n.local;
  t.sent = n.sent;
  t.served = n.served;
  t.read_packets = n.nic.packets[0];
  t.response_packets = n.nic.packets[1];
  t.read_bytes = n.nic.wire_bytes[0];
  t.response_bytes = n.nic.wire_bytes[1];
  t.payload_bytes = n.nic.payload_bytes[0] + n.nic.payload_bytes[1];
  return t;
}

NodeTraffic traffic_of(const ns_context* ctx) {
  NodeTraffic t;
  t.requested = ns_stat_get(ctx, NS_STAT_PRS_REQUESTED);
  t.dropped = ns_stat_get(ctx, NS_STAT_PRS_FILTERED) + ns_stat_get(ctx, NS_STAT_PRS_COALESCED);
  t.local = ns_stat_get(ctx, NS_STAT_PRS_LOCAL);
  t.sent = ns_stat_get(ctx, NS_STAT_PRS_SENT);
  t.served = ns_stat_get(ctx, NS_STAT_SERVER_PRS);
  t.read_packets = ns_stat_get(ctx, NS_STAT_READ_PACKETS);
  t.response_packets = ns_stat_get(ctx, NS_STAT_RESPONSE_PACKETS);
  t.read_bytes = ns_stat_get(ctx, NS_STAT_READ_BYTES);
  t.response_bytes = ns_stat_get(ctx, NS_STAT_RESPONSE_BYTES);
  t.payload_bytes = ns_stat_get(ctx, NS_STAT_PAYLOAD_BYTES);
  return t;
}

void write_traffic(std::ostream& out, std::span<const NodeTraffic> nodes) {
  for (std::size_t p = 0; p < nodes.size(); ++p) {
    const NodeTraffic& t = nodes[p];
    out << "node " << p << ": requested " << t.requested << " dropped " << t.dropped << " local "
        << t.local << " sent " << t.sent << " served " << t.served << " read_packets "
        << t.read_packets << " response_packets " << t.response_packets << " read_bytes "
        << t.read_bytes << " response_bytes " << t.response_bytes << " payload_bytes "
        << t.payload_bytes << "\n";
  }
}

}  // namespace netsparse::emulate
