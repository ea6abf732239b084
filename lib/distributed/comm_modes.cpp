// The communication modes' names and how `netsparse` resolves by the job's layout, and the
// layout and per-host volume queries (host_layout, host_volume). DistKernel itself:
// dist_kernel.cpp.
#include <algorithm>
#include <array>
#include <bit>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "agreement/mpi_util.hpp"
#include "distributed/comm_modes.hpp"
#include "distributed/dist_kernel_impl.hpp"
#include "hosts/topology.hpp"
#include "netsparse/distributed.hpp"
#include "support/enum_names.hpp"

namespace netsparse {

using dist::check_mpi;

// ---- modes -----------------------------------------------------------------------------------

// In the order all_comm_modes() lists them.
constexpr auto kCommModeNames = std::to_array<support::EnumName<CommMode>>({
    {CommMode::netsparse, "netsparse"},
    {CommMode::netsparse_rank, "netsparse-rank"},
    {CommMode::su, "su"},
    {CommMode::su_panel, "su-panel"},
    {CommMode::sa_vanilla, "sa-vanilla"},
    {CommMode::sa_conveyors, "sa-conveyors"},
    {CommMode::sa_opt, "sa-opt"},
    {CommMode::inspector_executor, "inspector-executor"},
    {CommMode::node_aware_ie, "node-aware-ie"},
    {CommMode::netsparse_node, "netsparse-node"},
    {CommMode::ideal, "ideal"},
    {CommMode::task_packets, "task-packets"},
    {CommMode::automatic, "auto"},
});
constexpr auto kAllModes = support::values_of<kCommModeNames>();

const char* to_string(CommMode mode) noexcept {
  return support::name_of<kCommModeNames>(mode, "unknown");
}

CommMode parse_comm_mode(std::string_view name) {
  if (const auto mode = support::value_named<kCommModeNames>(name)) return *mode;
  if (name == "ie") return CommMode::inspector_executor;
  throw std::invalid_argument("unknown communication mode '" + std::string(name) +
                              "' (accepted: " + support::names_joined<kCommModeNames>() + ")");
}

std::span<const CommMode> all_comm_modes() noexcept {
  return kAllModes;
}

bool uses_rig_engine(CommMode mode) noexcept {
  return mode == CommMode::netsparse || mode == CommMode::netsparse_rank ||
         mode == CommMode::sa_vanilla;
}

namespace dist {

// Whether CommMode::netsparse needs the job's layout to resolve. Same on every rank: the
// options are (DistKernel agrees on its arguments), engine_given is the caller's structure.
bool resolves_by_layout(const DistOptions& options, bool engine_given) noexcept {
  return options.mode == CommMode::netsparse && !engine_given &&
         options.rig_idx != RigIdxSource::nonzeros;
}

HostLayout layout_of(const dist::Topology& topo) {
  HostLayout l;
  l.hosts = topo.nhosts();
  l.racks = topo.nracks();
  l.virtual_hosts = topo.virtual_hosts();
  l.host = topo.host();
  l.rack = topo.rack();
  l.leader = topo.is_leader();
  for (int h = 0; h < topo.nhosts(); ++h) {
    l.max_ranks_per_host =
        std::max(l.max_ranks_per_host, static_cast<int>(topo.ranks_of(h).size()));
  }
  return l;
}

CommMode resolve_by_layout(const HostLayout& l) noexcept {
  return l.hosts > 1 && l.max_ranks_per_host > 1 ? CommMode::netsparse_node
                                                 : CommMode::netsparse_rank;
}

// The modes that route or count by host: their kernel builds the job's Topology once.
bool routes_by_host(CommMode mode) noexcept {
  return mode == CommMode::netsparse_node || mode == CommMode::node_aware_ie ||
         mode == CommMode::inspector_executor;
}

}  // namespace dist

CommMode resolve_comm_mode(MPI_Comm comm, const DistOptions& options, bool engine_given) {
  if (options.mode != CommMode::netsparse) return options.mode;
  if (!dist::resolves_by_layout(options, engine_given)) return CommMode::netsparse_rank;
  return dist::resolve_by_layout(host_layout(comm));
}

HostLayout host_layout(MPI_Comm comm) {
  return dist::layout_of(dist::Topology::build(comm));
}

HostVolume host_volume(const DistKernel& kernel) {
  const DistKernel::Impl& s = *kernel.impl_;
  // The kernel's own hosts when its mode has them (no collective), else built here.
  std::optional<dist::Topology> built;
  if (!s.topology) built.emplace(dist::Topology::build(s.comm));
  const dist::Topology& topo = s.topology ? *s.topology : *built;
  // This rank's distinct rows owned on other hosts (sorted: one pass over a column bitmap).
  const gidx_t n_cols = s.cols.n_rows();
  std::vector<std::uint64_t> bits(static_cast<std::size_t>((n_cols + 63) / 64), 0);
  for (const gidx_t c : s.rows_in_use->col_idx) {
    if (topo.host_of(s.cols.owner(c)) != topo.host()) bits[c >> 6] |= std::uint64_t{1} << (c & 63);
  }
  std::vector<gidx_t> mine;
  for (std::size_t w = 0; w < bits.size(); ++w) {
    for (std::uint64_t b = bits[w]; b != 0; b &= b - 1) {
      mine.push_back(static_cast<gidx_t>(w * 64 + static_cast<std::size_t>(std::countr_zero(b))));
    }
  }
  // The host's union, at its leader.
  const MPI_Comm hc = topo.host_comm();
  const int hsize = dist::comm_size(hc), hrank = dist::comm_rank(hc);
  const int n = dist::to_mpi_count(mine.size(), "host_volume rows");
  std::vector<int> counts(static_cast<std::size_t>(hsize)), displs(hsize + 1, 0);
  check_mpi(MPI_Gather(&n, 1, MPI_INT, counts.data(), 1, MPI_INT, 0, hc), "MPI_Gather");
  for (int i = 0; i < hsize; ++i) {
    displs[i + 1] = dist::to_mpi_count(std::uint64_t(displs[i]) + std::uint64_t(counts[i]),
                                       "host_volume gathered rows");
  }
  std::vector<gidx_t> all(hrank == 0 ? static_cast<std::size_t>(displs.back()) : 0);
  dist::ByteBlockType item(sizeof(gidx_t));
  check_mpi(MPI_Gatherv(mine.data(), n, item.get(), all.data(), counts.data(), displs.data(),
                        item.get(), 0, hc),
            "MPI_Gatherv");
  std::sort(all.begin(), all.end());
  const auto host_rows =
      static_cast<std::uint64_t>(std::unique(all.begin(), all.end()) - all.begin());
  std::uint64_t sums[2] = {mine.size(), hrank == 0 ? host_rows : 0}, tail = sums[1];
  check_mpi(MPI_Allreduce(MPI_IN_PLACE, sums, 2, MPI_UINT64_T, MPI_SUM, s.comm), "MPI_Allreduce");
  check_mpi(MPI_Allreduce(MPI_IN_PLACE, &tail, 1, MPI_UINT64_T, MPI_MAX, s.comm), "MPI_Allreduce");
  HostVolume v;
  v.hosts = topo.nhosts();
  v.racks = topo.nracks();
  v.virtual_hosts = topo.virtual_hosts();
  v.row_bytes = std::uint64_t(s.k) * scalar_bytes(s.options.scalar);
  v.rank_rows_total = sums[0];
  v.host_rows_total = sums[1];
  v.host_rows_tail = tail;
  return v;
}

}  // namespace netsparse
