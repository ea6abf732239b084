// Building a Hierarchy over MPI (hierarchical_mpi.hpp).
#include "collectives/hierarchical_mpi.hpp"

#include <mpi.h>

#include <stdexcept>
#include <vector>

#include "config/settings.hpp"

namespace netsparse::collectives {

bool hierarchy_wanted(const dist::Topology& topology) {
  const std::string mode = config::choice(config::Env::kCollHierarchy);
  if (mode == "flat") return false;
  if (mode == "hierarchical" || mode == "hosts") return true;
  return topology.nhosts() > 1 && topology.nhosts() < topology.nranks();
}

bool rack_level_wanted(const dist::Topology& topology) {
  return config::choice(config::Env::kCollHierarchy) != "hosts" && topology.nracks() > 1 &&
         topology.nracks() < topology.nhosts();
}

namespace {

// MPI_Comm_split, freed when it goes out of scope (the transports work on duplicates).
struct SplitComm {
  MPI_Comm comm = MPI_COMM_NULL;
  SplitComm(MPI_Comm parent, int color, int key) {
    if (MPI_Comm_split(parent, color, key, &comm) != MPI_SUCCESS)
      throw std::runtime_error("MPI_Comm_split (collectives' rack level) failed");
  }
  ~SplitComm() {
    if (comm != MPI_COMM_NULL) MPI_Comm_free(&comm);
  }
  SplitComm(const SplitComm&) = delete;
  SplitComm& operator=(const SplitComm&) = delete;
};

}  // namespace

std::unique_ptr<Hierarchy> make_hierarchy(const dist::Topology& topology,
                                          transport::TransportKind inter_host,
                                          const Options& options, const TransportWrap& wrap) {
  const auto wrapped = [&](std::unique_ptr<transport::Transport> t, bool across_hosts) {
    return wrap ? wrap(std::move(t), across_hosts) : std::move(t);
  };
  transport::TransportOptions inside;
  inside.host_rings = true;
  auto host = std::make_unique<Communicator>(
      wrapped(
          transport::make_transport(transport::TransportKind::kMpi, topology.host_comm(), inside),
          false),
      options);
  transport::TransportOptions across;
  across.host_rings = false;  // between hosts: never through shared memory
  const auto between_hosts = [&](MPI_Comm comm) {
    return std::make_unique<Communicator>(
        wrapped(transport::make_transport(inter_host, comm, across), true), options);
  };
  if (rack_level_wanted(topology)) {
    // Collective over the leaders only (the others skip it, as they skip the leaders' split).
    std::unique_ptr<Hierarchy> racks;
    if (topology.is_leader()) {
      const int my_host = topology.host(), rack = topology.rack();
      int first = my_host;  // the rack's first host: its leader is the rack's switch
      while (first > 0 && topology.rack_of_host(first - 1) == rack) --first;
      const SplitComm rack_comm(topology.leaders_comm(), rack, my_host);
      const SplitComm switches_comm(topology.leaders_comm(), my_host == first ? 0 : MPI_UNDEFINED,
                                    rack);
      auto rack_level = between_hosts(rack_comm.comm);
      std::unique_ptr<Communicator> switches;
      if (my_host == first) {
        switches = between_hosts(switches_comm.comm);
        // Each switch is a rack of its own (the default): all it sends leaves its rack.
      }
      racks = Hierarchy::make_rack_level(std::move(rack_level), std::move(switches));
    }
    return std::make_unique<Hierarchy>(std::move(host), std::move(racks));
  }
  std::unique_ptr<Communicator> leaders;
  if (topology.is_leader()) {
    leaders = between_hosts(topology.leaders_comm());
    // Rank h is host h: its rack, so that the leaders' flat step counts what leaves each rack.
    std::vector<int> racks(static_cast<std::size_t>(topology.nhosts()));
    for (int h = 0; h < topology.nhosts(); ++h)
      racks[static_cast<std::size_t>(h)] = topology.rack_of_host(h);
    leaders->set_racks(std::move(racks));
  }
  return std::make_unique<Hierarchy>(std::move(host), std::move(leaders));
}

std::vector<int> hosts_of_ranks(const dist::Topology& topology) {
  std::vector<int> hosts(static_cast<std::size_t>(topology.nranks()));
  for (int r = 0; r < topology.nranks(); ++r)
    hosts[static_cast<std::size_t>(r)] = topology.host_of(r);
  return hosts;
}

std::vector<int> racks_of_ranks(const dist::Topology& topology) {
  std::vector<int> racks(static_cast<std::size_t>(topology.nranks()));
  for (int r = 0; r < topology.nranks(); ++r)
    racks[static_cast<std::size_t>(r)] = topology.rack_of_host(topology.host_of(r));
  return racks;
}

}  // namespace netsparse::collectives
