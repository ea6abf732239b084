#include "hosts/topology.hpp"

#include "config/settings.hpp"

#include <sched.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <exception>
#include <stdexcept>
#include <string>
#include <utility>

#include "agreement/mpi_util.hpp"

namespace netsparse::dist {

namespace {

// A positive int from the configuration table (validated there), or 0 when unset.
int positive_env(netsparse::config::Env e) {
  return netsparse::config::is_set(e) ? static_cast<int>(netsparse::config::integer(e)) : 0;
}

std::string layout_text(int ranks_per_host, int hosts_per_rack) {
  return "NETSPARSE_RANKS_PER_HOST=" +
         (ranks_per_host > 0 ? std::to_string(ranks_per_host) : std::string("(unset)")) +
         ", NETSPARSE_HOSTS_PER_RACK=" +
         (hosts_per_rack > 0 ? std::to_string(hosts_per_rack) : std::string("(unset)"));
}

}  // namespace

TopologyOverrides TopologyOverrides::from_environment() {
  TopologyOverrides o;
  o.ranks_per_host = positive_env(netsparse::config::Env::kRanksPerHost);
  o.hosts_per_rack = positive_env(netsparse::config::Env::kHostsPerRack);
  return o;
}

Topology Topology::build(MPI_Comm comm) {
  TopologyOverrides o;
  std::exception_ptr error;
  try {
    o = TopologyOverrides::from_environment();
  } catch (...) {
    error = std::current_exception();
  }
  return build(comm, o, error);
}

Topology Topology::build(MPI_Comm comm, const TopologyOverrides& overrides) {
  return build(comm, overrides, nullptr);
}

// Four collectives (issue 34: at scale each is a round over every rank): the machine's split,
// one allgather of every rank's record (overrides, machine, cores, whether its environment was
// refused), and the host and leaders' splits. Everything after the allgather is decided from
// the same gathered records on every rank, so a refused layout throws the same message
// everywhere without another round; only a rank's own refusal (its environment) needs one, and
// every rank sees from the records that it does.
Topology Topology::build(MPI_Comm comm, const TopologyOverrides& overrides,
                         std::exception_ptr own_error) {
  const int rank = comm_rank(comm), nranks = comm_size(comm);
  // The real host: ranks sharing memory; named by its lowest rank, which is rank 0 of the
  // split (keyed by rank): found locally by translating it, no reduction.
  MPI_Comm shm = MPI_COMM_NULL;
  check_mpi(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &shm),
            "MPI_Comm_split_type");
  int real_host = rank;
  {
    MPI_Group shm_group = MPI_GROUP_NULL, comm_group = MPI_GROUP_NULL;
    const int zero = 0;
    int rc = MPI_Comm_group(shm, &shm_group);
    if (rc == MPI_SUCCESS) rc = MPI_Comm_group(comm, &comm_group);
    if (rc == MPI_SUCCESS)
      rc = MPI_Group_translate_ranks(shm_group, 1, &zero, comm_group, &real_host);
    if (shm_group != MPI_GROUP_NULL) MPI_Group_free(&shm_group);
    if (comm_group != MPI_GROUP_NULL) MPI_Group_free(&comm_group);
    MPI_Comm_free(&shm);
    check_mpi(rc, "MPI_Group_translate_ranks (the host's lowest rank)");
  }
  cpu_set_t mask;
  CPU_ZERO(&mask);
  const int cores = sched_getaffinity(0, sizeof mask, &mask) == 0 ? CPU_COUNT(&mask) : 1;

  // Every rank sees every rank's values and applies the same checks to them, so all refuse a
  // bad layout with the same message (and nobody is left in a collective).
  constexpr int kFields = 5;
  const int mine[kFields] = {overrides.ranks_per_host, overrides.hosts_per_rack, real_host, cores,
                             own_error ? 1 : 0};
  std::vector<int> all(static_cast<std::size_t>(kFields * nranks));
  check_mpi(MPI_Allgather(mine, kFields, MPI_INT, all.data(), kFields, MPI_INT, comm),
            "MPI_Allgather");
  const auto value = [&](int r, int i) { return all[static_cast<std::size_t>(kFields * r + i)]; };
  for (int r = 0; r < nranks; ++r) {
    // Some rank's environment was refused: every rank joins the agreement that carries the
    // lowest such rank's message (its own exception on that rank) and throws it.
    if (value(r, 4) != 0) {
      agree_on_failure(comm, own_error);
      throw std::logic_error("host layout: a refused environment was not agreed on");
    }
  }

  Topology t;
  t.rank_ = rank;
  t.host_of_rank_.assign(static_cast<std::size_t>(nranks), 0);
  t.machine_ranks_ = 0;
  for (int r = 0; r < nranks; ++r) t.machine_ranks_ += value(r, 2) == real_host ? 1 : 0;
  {
    // Whether every rank's affinity holds a core per rank of its machine (ranks per machine
    // counted by the machine's name, its lowest rank).
    std::vector<int> per_machine(static_cast<std::size_t>(nranks), 0);
    for (int r = 0; r < nranks; ++r) ++per_machine[static_cast<std::size_t>(value(r, 2))];
    t.cores_for_every_rank_ = true;
    for (int r = 0; r < nranks; ++r) {
      if (value(r, 3) < per_machine[static_cast<std::size_t>(value(r, 2))]) {
        t.cores_for_every_rank_ = false;
      }
    }
  }
  for (int r = 1; r < nranks; ++r) {
    if (value(r, 0) != value(0, 0) || value(r, 1) != value(0, 1)) {
      throw std::invalid_argument(
          "host layout: the ranks disagree: rank 0 has " + layout_text(value(0, 0), value(0, 1)) +
          " but rank " + std::to_string(r) + " has " + layout_text(value(r, 0), value(r, 1)) +
          "; every rank must be given the same layout");
    }
  }
  const int rph = value(0, 0), hpr = value(0, 1);
  if (rph > 0) {
    if (nranks % rph != 0) {
      throw std::invalid_argument("host layout: NETSPARSE_RANKS_PER_HOST=" + std::to_string(rph) +
                                  " does not divide the job's " + std::to_string(nranks) +
                                  " ranks into whole hosts");
    }
    t.virtual_ = true;
    for (int r = 0; r < nranks; ++r) {
      t.host_of_rank_[r] = r / rph;
      // A virtual host inside one real host: its "intra-host" traffic must really be local.
      if (value(r, 2) != value(r - r % rph, 2)) {
        throw std::invalid_argument("host layout: NETSPARSE_RANKS_PER_HOST=" + std::to_string(rph) +
                                    " puts ranks " + std::to_string(r - r % rph) + " and " +
                                    std::to_string(r) +
                                    " on one virtual host but they run on different machines");
      }
    }
  } else {
    std::vector<int> leaders;
    for (int r = 0; r < nranks; ++r) leaders.push_back(value(r, 2));
    std::sort(leaders.begin(), leaders.end());
    leaders.erase(std::unique(leaders.begin(), leaders.end()), leaders.end());
    for (int r = 0; r < nranks; ++r) {
      t.host_of_rank_[r] = static_cast<int>(
          std::lower_bound(leaders.begin(), leaders.end(), value(r, 2)) - leaders.begin());
    }
  }
  int nhosts = 0;
  for (const int h : t.host_of_rank_) nhosts = std::max(nhosts, h + 1);
  t.ranks_of_host_.assign(static_cast<std::size_t>(nhosts), {});
  t.leader_of_host_.assign(static_cast<std::size_t>(nhosts), -1);
  for (int r = 0; r < nranks; ++r) {
    const int h = t.host_of_rank_[r];
    t.ranks_of_host_[h].push_back(r);
    if (t.leader_of_host_[h] < 0) t.leader_of_host_[h] = r;
  }
  if (hpr > 0 && nhosts % hpr != 0) {
    throw std::invalid_argument("host layout: NETSPARSE_HOSTS_PER_RACK=" + std::to_string(hpr) +
                                " does not divide the job's " + std::to_string(nhosts) +
                                " hosts into whole racks");
  }
  t.nracks_ = hpr > 0 ? nhosts / hpr : 1;
  t.rack_of_host_.resize(static_cast<std::size_t>(nhosts));
  for (int h = 0; h < nhosts; ++h) t.rack_of_host_[h] = hpr > 0 ? h / hpr : 0;
  // No agreement here: the checks above threw on every rank or on none (the same records),
  // and the only other way out is running out of memory for a few vectors of ranks, which the
  // job does not survive either way.

  check_mpi(MPI_Comm_split(comm, t.host(), rank, &t.host_comm_), "MPI_Comm_split (host)");
  check_mpi(MPI_Comm_split(comm, t.is_leader() ? 0 : MPI_UNDEFINED, t.host(), &t.leaders_comm_),
            "MPI_Comm_split (leaders)");
  return t;
}

Topology::~Topology() {
  release();
}

Topology::Topology(Topology&& other) noexcept {
  *this = std::move(other);
}

Topology& Topology::operator=(Topology&& other) noexcept {
  if (this != &other) {
    release();
    rank_ = other.rank_;
    virtual_ = other.virtual_;
    nracks_ = other.nracks_;
    machine_ranks_ = other.machine_ranks_;
    cores_for_every_rank_ = other.cores_for_every_rank_;
    host_of_rank_ = std::move(other.host_of_rank_);
    leader_of_host_ = std::move(other.leader_of_host_);
    rack_of_host_ = std::move(other.rack_of_host_);
    ranks_of_host_ = std::move(other.ranks_of_host_);
    host_comm_ = std::exchange(other.host_comm_, MPI_COMM_NULL);
    leaders_comm_ = std::exchange(other.leaders_comm_, MPI_COMM_NULL);
  }
  return *this;
}

void Topology::release() noexcept {
  if (host_comm_ != MPI_COMM_NULL) MPI_Comm_free(&host_comm_);
  if (leaders_comm_ != MPI_COMM_NULL) MPI_Comm_free(&leaders_comm_);
}

std::string Topology::describe() const {
  std::string s = std::to_string(nranks()) + " ranks = " + std::to_string(nhosts()) + " host" +
                  (nhosts() == 1 ? "" : "s");
  bool uniform = true;
  for (const auto& r : ranks_of_host_) uniform = uniform && r.size() == ranks_of_host_[0].size();
  if (uniform && !ranks_of_host_.empty()) {
    s += " x " + std::to_string(ranks_of_host_[0].size()) + " ranks";
  }
  if (virtual_) s += " (virtual)";
  s += ", " + std::to_string(nracks_) + " rack" + (nracks_ == 1 ? "" : "s");
  return s;
}

}  // namespace netsparse::dist
