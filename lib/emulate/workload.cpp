#include "emulate/workload.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <ostream>
#include <stdexcept>

#include <metis.h>

#include "netsparse/generator_spec.hpp"
#include "netsparse/generators.hpp"
#include "netsparse/matrix_market.hpp"
#include "netsparse/netsparse.hpp"  // detail::rig_wr
#include "support/enum_names.hpp"

namespace netsparse::emulate {

namespace {

constexpr LadderStep kLadder[] = {
    {"rig", NS_CTX_NO_FILTER | NS_CTX_NO_COALESCE | NS_CTX_NO_CONCAT, false},
    {"filter", NS_CTX_NO_COALESCE | NS_CTX_NO_CONCAT, false},
    {"coalesce", NS_CTX_NO_CONCAT, false},
    {"nic", 0, false},
    {"switch", 0, true},
};

}  // namespace

MatrixGenerator matrix_generator(const std::string& spec, std::uint64_t seed) {
  // The paper's Table 6 matrices by shape: rows and nonzeros per row as the originals (which no
  // Debian package carries), the structure from the generator of their kind.
  if (spec == "paper:arabic") return matrix_generator("gen:web:22744080:32:0.9", seed);
  if (spec == "paper:arabic-kron") return matrix_generator("gen:kron:24:40", seed);
  if (spec == "paper:europe")
    return matrix_generator("gen:road:7150:7150:0.01:" + std::to_string(seed) + ":0.53", seed);
  if (spec == "paper:queen") return matrix_generator("gen:stencil:111:111:111:3", seed);
  if (spec.rfind("paper:", 0) == 0)
    throw std::invalid_argument(
        "matrix spec " + spec +
        ": unknown paper matrix (paper:arabic, paper:arabic-kron, paper:europe, paper:queen)");
  // The library's generator forms, parsed by the library (a SEED left out is --seed).
  const std::optional<GeneratorParams> params = parse_generator_spec(spec, seed);
  if (!params) return {};
  MatrixGenerator g;
  g.rows = generator_rows(*params);
  // One process holds every node's idx list and an output row per matrix row: far below what
  // the generators allow.
  constexpr gidx_t kMaxRows = gidx_t{1} << 32;
  if (g.rows > kMaxRows)
    throw std::invalid_argument("matrix spec " + spec + ": " + std::to_string(g.rows) +
                                " rows, more than the emulator's " + std::to_string(kMaxRows));
  g.block = [p = *params](gidx_t b, gidx_t e) { return generate_rows(p, b, e); };
  return g;
}

CsrMatrix load_matrix_spec(const std::string& spec, std::uint64_t seed) {
  const MatrixGenerator g = matrix_generator(spec, seed);
  if (g.block) return g.block(0, g.rows);
  return read_matrix_market(spec);
}

PatternWorkload pattern_workload(const std::string& spec, std::uint64_t seed, int nodes,
                                 std::uint32_t prop_bytes, int ranks_per_node) {
  PatternWorkload out;
  const MatrixGenerator g = matrix_generator(spec, seed);
  if (!g.block) {
    CsrMatrix a = read_matrix_market(spec);
    out.w = gather_workload(a, nodes, prop_bytes, ranks_per_node);
    out.row_ptr = std::move(a.row_ptr);
    return out;
  }
  const auto rows = static_cast<std::uint64_t>(g.rows);
  const auto ranks =
      static_cast<std::uint64_t>(nodes) * static_cast<std::uint64_t>(std::max(ranks_per_node, 0));
  if (nodes < 1 || ranks_per_node < 1 || rows < ranks)
    throw std::invalid_argument("the emulated gather needs at least one row per rank (" +
                                std::to_string(rows) + " rows, " + std::to_string(nodes) +
                                " nodes of " + std::to_string(ranks_per_node) + " ranks)");
  Workload& w = out.w;
  w.prop_bytes = prop_bytes;
  const auto N = static_cast<std::uint64_t>(nodes), R = static_cast<std::uint64_t>(ranks_per_node);
  for (std::uint64_t p = 0; p <= N; ++p) w.row_offsets.push_back(rows * (p * R) / ranks);
  w.idxs.resize(static_cast<std::size_t>(nodes));
  out.row_ptr.reserve(static_cast<std::size_t>(rows) + 1);
  out.row_ptr.push_back(0);
  // A node's rows at a time, their values never kept: what is resident is the idx lists (8 B a
  // nonzero) and one node's block.
  for (std::size_t p = 0; p < w.idxs.size(); ++p) {
    const CsrMatrix block =
        g.block(static_cast<gidx_t>(w.row_offsets[p]), static_cast<gidx_t>(w.row_offsets[p + 1]));
    const std::int64_t base = out.row_ptr.back();
    for (std::size_t r = 1; r < block.row_ptr.size(); ++r)
      out.row_ptr.push_back(base + block.row_ptr[r]);
    w.idxs[p].assign(block.col_idx.begin(), block.col_idx.end());
  }
  return out;
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

constexpr auto kRowPartitionNames = std::to_array<support::EnumName<RowPartition>>({
    {RowPartition::kEqualRows, "equal"},
    {RowPartition::kBalancedNnz, "nnz"},
    {RowPartition::kMetis, "metis"},
});

const char* partition_name(RowPartition p) noexcept {
  return support::name_of<kRowPartitionNames>(p, "equal");
}

namespace {

void check_partitionable(const CsrMatrix& a, int nodes) {
  if (nodes < 1 || a.n_cols != a.n_rows_global || a.row_begin != 0 || a.n_rows != a.n_rows_global ||
      a.n_rows < nodes)
    throw std::invalid_argument(
        "a partition of the rows needs a whole square matrix with at "
        "least one row per node (" +
        std::to_string(a.n_rows_global) + " x " + std::to_string(a.n_cols) + ", " +
        std::to_string(nodes) + " nodes)");
}

std::vector<int> metis_parts(const CsrMatrix& a, int nodes, std::uint64_t seed) {
  const auto n = static_cast<std::size_t>(a.n_rows);
  if (a.nnz() > std::numeric_limits<idx_t>::max() / 2)
    throw std::invalid_argument("METIS partition: " + std::to_string(a.nnz()) +
                                " nonzeros exceed METIS' 32-bit indices");
  std::vector<int> part(n, 0);
  if (nodes == 1) return part;
  // A + A^T without self-loops (METIS wants a symmetric graph): both directions, then each
  // adjacency list sorted and its repeats dropped.
  std::vector<idx_t> xadj(n + 1, 0);
  for (std::size_t r = 0; r < n; ++r)
    for (auto j = a.row_ptr[r]; j < a.row_ptr[r + 1]; ++j) {
      const auto c = static_cast<std::size_t>(a.col_idx[static_cast<std::size_t>(j)]);
      if (c == r) continue;
      ++xadj[r + 1];
      ++xadj[c + 1];
    }
  std::partial_sum(xadj.begin(), xadj.end(), xadj.begin());
  std::vector<idx_t> adj(static_cast<std::size_t>(xadj.back()));
  std::vector<idx_t> fill(xadj.begin(), xadj.end() - 1);
  for (std::size_t r = 0; r < n; ++r)
    for (auto j = a.row_ptr[r]; j < a.row_ptr[r + 1]; ++j) {
      const auto c = static_cast<std::size_t>(a.col_idx[static_cast<std::size_t>(j)]);
      if (c == r) continue;
      adj[static_cast<std::size_t>(fill[r]++)] = static_cast<idx_t>(c);
      adj[static_cast<std::size_t>(fill[c]++)] = static_cast<idx_t>(r);
    }
  std::vector<idx_t> xadj_unique(n + 1, 0), adj_unique;
  adj_unique.reserve(adj.size());
  for (std::size_t r = 0; r < n; ++r) {
    auto first = adj.begin() + xadj[r], last = adj.begin() + xadj[r + 1];
    std::sort(first, last);
    adj_unique.insert(adj_unique.end(), first, std::unique(first, last));
    xadj_unique[r + 1] = static_cast<idx_t>(adj_unique.size());
  }
  std::vector<idx_t> weight(n);
  for (std::size_t r = 0; r < n; ++r)
    weight[r] = static_cast<idx_t>(a.row_ptr[r + 1] - a.row_ptr[r] + 1);
  idx_t options[METIS_NOPTIONS];
  METIS_SetDefaultOptions(options);
  options[METIS_OPTION_SEED] = static_cast<idx_t>(seed & 0x7FFFFFFF);
  idx_t nvtxs = static_cast<idx_t>(n), ncon = 1, nparts = nodes, cut = 0;
  std::vector<idx_t> out(n, 0);
  const int status =
      METIS_PartGraphKway(&nvtxs, &ncon, xadj_unique.data(), adj_unique.data(), weight.data(),
                          nullptr, nullptr, &nparts, nullptr, nullptr, options, &cut, out.data());
  if (status != METIS_OK)
    throw std::invalid_argument("METIS_PartGraphKway failed (status " + std::to_string(status) +
                                ") for " + std::to_string(n) + " rows in " + std::to_string(nodes) +
                                " parts");
  for (std::size_t r = 0; r < n; ++r) part[r] = static_cast<int>(out[r]);
  return part;
}

}  // namespace

std::vector<int> row_parts(const CsrMatrix& a, int nodes, RowPartition how, std::uint64_t seed) {
  check_partitionable(a, nodes);
  const auto n = static_cast<std::uint64_t>(a.n_rows);
  const auto N = static_cast<std::uint64_t>(nodes);
  std::vector<int> part(static_cast<std::size_t>(n), 0);
  if (how == RowPartition::kMetis) return metis_parts(a, nodes, seed);
  if (how == RowPartition::kEqualRows) {
    for (std::uint64_t p = 0; p < N; ++p)
      for (std::uint64_t r = n * p / N; r < n * (p + 1) / N; ++r)
        part[static_cast<std::size_t>(r)] = static_cast<int>(p);
    return part;
  }
  // Balanced nonzeros: node p starts at the first row whose running count reaches p nnz / N,
  // but never before one row per node before it nor later than leaves one row per node after.
  const auto nnz = static_cast<std::uint64_t>(a.nnz());
  std::uint64_t begin = 0;
  for (std::uint64_t p = 0; p < N; ++p) {
    std::uint64_t end = n;
    if (p + 1 < N) {
      const std::uint64_t target = nnz * (p + 1) / N;
      end = begin + 1;
      while (end < n - (N - p - 1) &&
             static_cast<std::uint64_t>(a.row_ptr[static_cast<std::size_t>(end)]) < target)
        ++end;
    }
    for (std::uint64_t r = begin; r < end; ++r)
      part[static_cast<std::size_t>(r)] = static_cast<int>(p);
    begin = end;
  }
  return part;
}

CsrMatrix renumber_by_parts(const CsrMatrix& a, std::span<const int> part, int nodes,
                            std::vector<std::uint64_t>& row_offsets) {
  check_partitionable(a, nodes);
  const auto n = static_cast<std::size_t>(a.n_rows);
  if (part.size() != n)
    throw std::invalid_argument("renumber_by_parts: " + std::to_string(part.size()) +
                                " parts for " + std::to_string(n) + " rows");
  row_offsets.assign(static_cast<std::size_t>(nodes) + 1, 0);
  for (std::size_t r = 0; r < n; ++r) {
    if (part[r] < 0 || part[r] >= nodes)
      throw std::invalid_argument("renumber_by_parts: row " + std::to_string(r) + " in part " +
                                  std::to_string(part[r]) + " of " + std::to_string(nodes));
    ++row_offsets[static_cast<std::size_t>(part[r]) + 1];
  }
  for (int p = 0; p < nodes; ++p)
    if (row_offsets[static_cast<std::size_t>(p) + 1] == 0)
      throw std::invalid_argument("the partition leaves node " + std::to_string(p) +
                                  " without rows");
  std::partial_sum(row_offsets.begin(), row_offsets.end(), row_offsets.begin());
  std::vector<std::uint64_t> next(row_offsets.begin(), row_offsets.end() - 1);
  std::vector<std::uint64_t> new_of(n), old_of(n);
  for (std::size_t r = 0; r < n; ++r) {
    new_of[r] = next[static_cast<std::size_t>(part[r])]++;
    old_of[new_of[r]] = r;
  }
  CsrMatrix b;
  b.n_rows_global = b.n_rows = a.n_rows;
  b.n_cols = a.n_cols;
  b.row_ptr.assign(n + 1, 0);
  b.col_idx.resize(a.col_idx.size());
  b.values.resize(a.values.size());
  std::vector<std::pair<gidx_t, double>> row;
  for (std::size_t r = 0; r < n; ++r) {
    const std::size_t old = old_of[r];
    row.clear();
    for (auto j = a.row_ptr[old]; j < a.row_ptr[old + 1]; ++j) {
      const auto J = static_cast<std::size_t>(j);
      row.emplace_back(static_cast<gidx_t>(new_of[static_cast<std::size_t>(a.col_idx[J])]),
                       J < a.values.size() ? a.values[J] : 0.0);
    }
    std::sort(row.begin(), row.end());
    const auto at = static_cast<std::size_t>(b.row_ptr[r]);
    for (std::size_t k = 0; k < row.size(); ++k) {
      b.col_idx[at + k] = row[k].first;
      if (at + k < b.values.size()) b.values[at + k] = row[k].second;
    }
    b.row_ptr[r + 1] = b.row_ptr[r] + static_cast<std::int64_t>(row.size());
  }
  return b;
}

Workload block_workload(const CsrMatrix& a, std::vector<std::uint64_t> row_offsets,
                        std::uint32_t prop_bytes) {
  check_partitionable(a, static_cast<int>(row_offsets.size()) - 1);
  Workload w;
  w.prop_bytes = prop_bytes;
  w.row_offsets = std::move(row_offsets);
  w.idxs.resize(w.row_offsets.size() - 1);
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
