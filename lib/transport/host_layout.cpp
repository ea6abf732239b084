// See host_layout.hpp.
#include "transport/host_layout.hpp"

#include <atomic>
#include <cstdio>
#include <limits>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "agreement/mpi.hpp"
#include "config/settings.hpp"
#include "support/memory.hpp"

namespace netsparse::transport {

using agreement::check_mpi;

namespace {

// The refusals split_host and virtual_host_refusal share (one wording wherever it is refused).
const std::string kRefused = "netsparse: host layout refused: ";
std::string indivisible(long long per_host, int ranks) {
  return "NETSPARSE_RANKS_PER_HOST=" + std::to_string(per_host) + " does not divide the job's " +
         std::to_string(ranks) + " ranks into whole hosts";
}
std::string spanning_machines(long long per_host) {
  return "NETSPARSE_RANKS_PER_HOST=" + std::to_string(per_host) +
         " puts ranks of different machines on one virtual host (virtual hosts are " +
         std::to_string(per_host) + " consecutive ranks, all on one machine)";
}

}  // namespace

// This rank's host: the ranks sharing its memory, cut into virtual hosts of
// NETSPARSE_RANKS_PER_HOST consecutive ranks of `comm` when that is set (one machine acting as
// several hosts: what crosses a virtual host goes through MPI, as between real hosts).
//
// A layout that cannot work is refused on every rank with the same reason, never half-applied
// (a rank that cut its host differently from its peers would write rings nobody reads): the
// ranks disagree on the value, it does not divide the job into whole hosts, or a virtual host
// would span two machines. One allreduce of three integers decides it.
MPI_Comm split_host(MPI_Comm comm, MPI_Comm* machine, bool layout_agreed) {
  MPI_Comm shared = MPI_COMM_NULL;
  if (machine != nullptr && *machine != MPI_COMM_NULL) {
    shared = std::exchange(*machine, MPI_COMM_NULL);
  } else {
    check_mpi(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &shared),
              "MPI_Comm_split_type");
  }
  long long per_host = 0;  // 0 = not set; -1 = not a positive integer on this rank
  if (config::is_set(config::Env::kRanksPerHost)) {
    try {
      per_host = config::integer(config::Env::kRanksPerHost);
      if (per_host <= 0 || per_host > std::numeric_limits<int>::max()) per_host = -1;
    } catch (const std::exception&) {
      per_host = -1;
    }
  }
  int world_rank = 0, world_size = 1;
  MPI_Comm_rank(comm, &world_rank);
  MPI_Comm_size(comm, &world_size);
  // Cut by this rank's own value (a split with colours from differing values is still well
  // defined), then agree: {max, -min} of the value, and whether some virtual host came out
  // smaller than the value (its ranks are on different machines, or the job's last host is cut).
  MPI_Comm host = shared;
  if (per_host > 0) {
    host = MPI_COMM_NULL;
    const int rc =
        MPI_Comm_split(shared, static_cast<int>(world_rank / per_host), world_rank, &host);
    MPI_Comm_free(&shared);
    check_mpi(rc, "MPI_Comm_split (virtual hosts)");
  }
  int host_size = 1;
  MPI_Comm_size(host, &host_size);
  // ns_open_mpi agreed on the value and refused a layout that cannot work (virtual_host_refusal)
  // in its one agreement: no second round.
  if (layout_agreed) return host;
  const long long in[3] = {per_host, -per_host, per_host > 0 && host_size != per_host ? 1 : 0};
  long long out[3] = {0, 0, 0};
  const int arc = MPI_Allreduce(in, out, 3, MPI_LONG_LONG, MPI_MAX, comm);
  if (arc != MPI_SUCCESS) MPI_Comm_free(&host);
  check_mpi(arc, "MPI_Allreduce (host layout)");
  const long long hi = out[0], lo = -out[1];
  std::string refused;
  if (hi != lo) {
    refused = "the ranks disagree on NETSPARSE_RANKS_PER_HOST (values from " +
              (lo < 0    ? std::string("an invalid one")
               : lo == 0 ? "unset"
                         : std::to_string(lo)) +
              " to " + std::to_string(hi) + "); every rank must be given the same layout";
  } else if (hi < 0) {
    refused = "NETSPARSE_RANKS_PER_HOST is not a positive integer";
  } else if (hi > 0 && world_size % hi != 0) {
    refused = indivisible(hi, world_size);
  } else if (out[2] != 0) {
    refused = spanning_machines(hi);
  }
  if (!refused.empty()) {
    MPI_Comm_free(&host);
    throw std::invalid_argument(kRefused + refused);
  }
  return host;
}

std::string virtual_host_refusal(MPI_Comm comm, MPI_Comm machine) {
  if (!config::is_set(config::Env::kRanksPerHost)) return {};
  long long per_host = 0;
  try {
    per_host = config::integer(config::Env::kRanksPerHost);
  } catch (const std::exception& e) {
    return e.what();  // the agreement's own check names it too
  }
  int rank = 0, size = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  if (per_host <= 0) return "NETSPARSE_RANKS_PER_HOST is not a positive integer";
  if (size % per_host != 0) {
    return kRefused + indivisible(per_host, size);
  }
  // This rank's virtual host, ranks [first, first + per_host) of comm: each in this machine?
  MPI_Group comm_group = MPI_GROUP_NULL, machine_group = MPI_GROUP_NULL;
  check_mpi(MPI_Comm_group(comm, &comm_group), "MPI_Comm_group");
  const int rc = MPI_Comm_group(machine, &machine_group);
  if (rc != MPI_SUCCESS) MPI_Group_free(&comm_group);
  check_mpi(rc, "MPI_Comm_group");
  const int first = static_cast<int>(rank / per_host * per_host);
  std::vector<int> members(static_cast<std::size_t>(per_host)), on_machine(members.size());
  for (std::size_t i = 0; i < members.size(); ++i) members[i] = first + static_cast<int>(i);
  const int trc = MPI_Group_translate_ranks(comm_group, static_cast<int>(members.size()),
                                            members.data(), machine_group, on_machine.data());
  MPI_Group_free(&comm_group);
  MPI_Group_free(&machine_group);
  check_mpi(trc, "MPI_Group_translate_ranks (virtual host)");
  for (const int m : on_machine) {
    if (m == MPI_UNDEFINED) {
      return kRefused + spanning_machines(per_host);
    }
  }
  return {};
}

// The bytes this rank's rings may take: its share of MemAvailable (shared by the host's ranks),
// at most NETSPARSE_MAX_CONTEXT_BYTES. memfd rings live on the kernel's internal tmpfs, which
// /dev/shm's size does not bound; memory does. When the rings to every rank of the host
// (`stride` bytes each) would not fit, the host's first rank says so once, with the cost: pairs
// past the limit send through MPI (issue 37: sa-vanilla 5.6x slower without its rings).
std::uint64_t ring_memory_limit(MPI_Comm host, int host_size, std::uint64_t stride) {
  const support::MemoryLimit available = support::available_memory();
  std::uint64_t limit = available.bytes / static_cast<std::uint64_t>(host_size);
  std::string source = available.source + " / " + std::to_string(host_size) + " ranks of the host";
  if (config::is_set(config::Env::kMaxContextBytes)) {
    const auto budget = static_cast<std::uint64_t>(config::integer(config::Env::kMaxContextBytes));
    if (budget < limit) limit = budget, source = "NETSPARSE_MAX_CONTEXT_BYTES";
  }
  const std::uint64_t others = static_cast<std::uint64_t>(host_size - 1);
  const std::uint64_t worst = others * stride;
  int host_rank = 0;
  MPI_Comm_rank(host, &host_rank);
  static std::atomic<bool> warned{false};  // once per process, however many contexts open
  if (worst > limit && host_rank == 0 && !warned.exchange(true)) {
    std::fprintf(
        stderr,
        "netsparse: warning: the shared-memory rings to the %llu other ranks of this host "
        "would take %s per rank (%llu x %s), more than the %s each rank may give them "
        "(%s); rings are made on first use while they fit (%llu per rank), and frames "
        "to the other peers of the host go through MPI (slower: sa-vanilla measured "
        "5.6x slower with its rings dropped). Set NETSPARSE_MPI_SHM_RING_BYTES lower, or free "
        "memory.\n",
        static_cast<unsigned long long>(others), support::human_bytes(worst).c_str(),
        static_cast<unsigned long long>(others), support::human_bytes(stride).c_str(),
        support::human_bytes(limit).c_str(), source.c_str(),
        static_cast<unsigned long long>(limit / stride));
  }
  return limit;
}

}  // namespace netsparse::transport
